//! One sequence's decode state on the device: the KV cache of every full-attention layer, the
//! conv ring and delta-rule state of every GDN layer, the RoPE table, and the scratch buffers
//! one decode step writes. Sizes come from the config and the context capacity; nothing here
//! launches a kernel or reads weights.

use baro_dsl::runtime::{Buffer, Device, DeviceError};
use baro_dsl::ScalarType;

use crate::kernels::rope::rope_table;
use crate::model::{LayerKind, ModelConfig};

/// The recurrent or cached state of one layer.
pub enum LayerState {
    Gdn {
        conv_ring: Buffer, // (channel, conv_kernel − 1): the last inputs, indexed by position % (K − 1)
        ssm: Buffer,       // (v_head, key_dim, value_dim) f32
    },
    Attention {
        k_cache: Buffer, // (position, kv_head, head_dim) f32, rows 0..pos valid
        v_cache: Buffer, // (position, kv_head, head_dim) f32
    },
}

/// Buffers one step overwrites; shared by all layers (they run in order).
pub struct Scratch {
    pub token: Buffer,    // (1) u32: the token being fed
    pub plain_ids: Buffer, // (1) u32 = [0]: the `ids` of a single-matrix matvec
    pub x: Buffer,        // (hidden): the residual stream entering a layer
    pub h: Buffer,        // (hidden): the residual after the mixer
    pub xn: Buffer,       // (hidden): the normed input of the mixer or the MoE block
    pub mix: Buffer,      // (hidden): the mixer's or the MoE block's output
    // gated delta net
    pub qkv: Buffer,      // (q | k | v channel)
    pub conv_out: Buffer, // (q | k | v channel)
    pub z: Buffer,        // (v_head, value_dim)
    pub ba: Buffer,       // (beta | alpha · v_head)
    pub o: Buffer,        // (v_head, value_dim)
    pub o_normed: Buffer, // (v_head, value_dim)
    // full attention
    pub q_gate: Buffer,    // (head, query | gate, head_dim): the q_proj output
    pub q: Buffer,         // (head, head_dim)
    pub k_raw: Buffer,     // (kv_head, head_dim)
    pub k: Buffer,         // (kv_head, head_dim)
    pub v: Buffer,         // (kv_head, head_dim)
    pub probs_attn: Buffer, // (head, max_ctx)
    pub attn: Buffer,      // (head, head_dim)
    // MoE
    pub router_logits: Buffer, // (expert)
    pub router_probs: Buffer,  // (expert)
    pub expert_ids: Buffer,    // (top_k) u32
    pub expert_weights: Buffer, // (top_k)
    pub gate_up: Buffer,       // (top_k, gate | up · expert_ffn)
    pub act: Buffer,           // (top_k, expert_ffn)
    pub down: Buffer,          // (top_k, hidden)
    pub sh_gate_up: Buffer,    // (gate | up · shared_ffn)
    pub sh_act: Buffer,        // (shared_ffn)
    pub sh_out: Buffer,        // (hidden)
    pub sh_logit: Buffer,      // (1)
    pub logits: Buffer,        // (vocab)
    // the greedy pick on the device (`kernels::pick`): per chunk, then the answer (3 u32)
    pub pick_best: Buffer,   // (chunk)
    pub pick_at: Buffer,     // (chunk) u32
    pub pick_nan_at: Buffer, // (chunk) u32
    pub pick_inf_at: Buffer, // (chunk) u32
    pub pick: Buffer,        // (4) u32
}

/// The decode state of one sequence.
pub struct State {
    /// Tokens fed so far: the position of the next one.
    pub pos: usize,
    /// Positions the KV cache and RoPE table hold.
    pub max_ctx: usize,
    pub layers: Vec<LayerState>,
    pub rope_cos: Buffer, // (position, rope_dim / 2)
    pub rope_sin: Buffer, // (position, rope_dim / 2)
    pub s: Scratch,
}

impl State {
    pub fn new(device: &Device, cfg: &ModelConfig, max_ctx: usize) -> Result<State, DeviceError> {
        let f = |n: usize| device.alloc(ScalarType::F32, n);
        let kv_dim = cfg.n_kv_heads * cfg.head_dim;
        let layers = cfg
            .layer_kinds
            .iter()
            .map(|kind| {
                Ok(match kind {
                    LayerKind::Gdn => LayerState::Gdn {
                        conv_ring: f(cfg.gdn_conv_dim() * (cfg.conv_kernel - 1))?,
                        ssm: f(cfg.gdn_n_value_heads * cfg.gdn_key_dim * cfg.gdn_value_dim)?,
                    },
                    LayerKind::Attention => LayerState::Attention { k_cache: f(max_ctx * kv_dim)?, v_cache: f(max_ctx * kv_dim)? },
                })
            })
            .collect::<Result<Vec<_>, DeviceError>>()?;
        let (cos, sin) = rope_table(cfg.rope_theta, cfg.rope_dim, max_ctx);
        let (h, vd, nv) = (cfg.hidden_dim, cfg.gdn_value_dim, cfg.gdn_n_value_heads);
        let (k, fi, fs) = (cfg.n_experts_used, cfg.expert_ffn_dim, cfg.shared_ffn_dim);
        let chunks = crate::kernels::pick::pick_chunks(cfg.vocab_size);
        let s = Scratch {
            token: device.alloc(ScalarType::U32, 1)?,
            plain_ids: device.alloc(ScalarType::U32, 1)?,
            x: f(h)?,
            h: f(h)?,
            xn: f(h)?,
            mix: f(h)?,
            qkv: f(cfg.gdn_conv_dim())?,
            conv_out: f(cfg.gdn_conv_dim())?,
            z: f(nv * vd)?,
            ba: f(2 * nv)?,
            o: f(nv * vd)?,
            o_normed: f(nv * vd)?,
            q_gate: f(2 * cfg.n_heads * cfg.head_dim)?,
            q: f(cfg.n_heads * cfg.head_dim)?,
            k_raw: f(kv_dim)?,
            k: f(kv_dim)?,
            v: f(kv_dim)?,
            probs_attn: f(cfg.n_heads * max_ctx)?,
            attn: f(cfg.n_heads * cfg.head_dim)?,
            router_logits: f(cfg.n_experts)?,
            router_probs: f(cfg.n_experts)?,
            expert_ids: device.alloc(ScalarType::U32, k)?,
            expert_weights: f(k)?,
            gate_up: f(k * 2 * fi)?,
            act: f(k * fi)?,
            down: f(k * h)?,
            sh_gate_up: f(2 * fs)?,
            sh_act: f(fs)?,
            sh_out: f(h)?,
            sh_logit: f(1)?,
            logits: f(cfg.vocab_size)?,
            pick_best: f(chunks)?,
            pick_at: device.alloc(ScalarType::U32, chunks)?,
            pick_nan_at: device.alloc(ScalarType::U32, chunks)?,
            pick_inf_at: device.alloc(ScalarType::U32, chunks)?,
            pick: device.alloc(ScalarType::U32, 4)?,
        };
        // An empty table (rope_dim 0) still needs a buffer to pass.
        let (cos, sin) = if cos.is_empty() { (vec![0.0], vec![0.0]) } else { (cos, sin) };
        Ok(State { pos: 0, max_ctx, layers, rope_cos: device.upload(&cos)?, rope_sin: device.upload(&sin)?, s })
    }

    /// A copy of this sequence's state (KV cache, conv rings, delta-rule states, position) in
    /// fresh buffers, queued on the default stream: a later `restore` resumes from here.
    pub fn snapshot(&self, device: &Device, cfg: &ModelConfig) -> Result<State, DeviceError> {
        let mut copy = State::new(device, cfg, self.max_ctx)?;
        let stream = device.default_stream();
        for (src, dst) in self.layers.iter().zip(copy.layers.iter_mut()) {
            match (src, dst) {
                (LayerState::Gdn { conv_ring, ssm }, LayerState::Gdn { conv_ring: r, ssm: s }) => {
                    device.copy(stream, conv_ring, r)?;
                    device.copy(stream, ssm, s)?;
                }
                (LayerState::Attention { k_cache, v_cache }, LayerState::Attention { k_cache: k, v_cache: v }) => {
                    device.copy(stream, k_cache, k)?;
                    device.copy(stream, v_cache, v)?;
                }
                // Both were built from the same `cfg.layer_kinds`.
                _ => return Err(DeviceError::Mismatch { what: "state snapshot", expected: "the same layer kinds".into(), found: "another layout (a bug in baro)".into() }),
            }
        }
        copy.pos = self.pos;
        Ok(copy)
    }

    /// Back to position 0: the GDN conv rings and delta-rule states are zeroed (the KV cache
    /// needs no clearing: attention reads positions 0..pos only).
    pub fn reset(&mut self, device: &Device) -> Result<(), DeviceError> {
        for layer in &mut self.layers {
            if let LayerState::Gdn { conv_ring, ssm } = layer {
                device.write(conv_ring, &vec![0.0f32; conv_ring.len()])?;
                device.write(ssm, &vec![0.0f32; ssm.len()])?;
            }
        }
        self.pos = 0;
        Ok(())
    }
}
