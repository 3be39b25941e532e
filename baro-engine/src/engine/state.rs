//! One sequence's state on the device: the KV cache of every full-attention layer, the conv
//! ring and delta-rule state of every GDN layer, the RoPE table, the position, the scratch
//! buffers one decode step writes (a one-row `Scratch`) and the launch graphs of its resident
//! decode steps (they record this state's buffers). A `Model` steps it (`Model::step`); sizes
//! come from the config and the context capacity; nothing here launches a kernel or reads
//! weights.

use baro_dsl::runtime::{Buffer, Device, DeviceError, GraphStats, LaunchGraph};
use baro_dsl::ScalarType;

use crate::engine::scratch::Scratch;
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

/// One buffer of a sequence's state, as `State::read_parts` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatePart {
    pub layer: usize,
    /// "k cache", "v cache", "conv ring" or "delta-rule state".
    pub what: &'static str,
}

/// The launch graphs of a sequence's resident decode steps: one per kind of step, so
/// alternating `step` and `step_greedy` updates each graph rather than rebuilding one.
#[derive(Default)]
pub(crate) struct DecodeGraphs {
    logits: LaunchGraph,
    greedy: LaunchGraph,
}

impl DecodeGraphs {
    /// The graph of `step_greedy` (`greedy`) or of `step`.
    pub(crate) fn get(&mut self, greedy: bool) -> &mut LaunchGraph {
        if greedy {
            &mut self.greedy
        } else {
            &mut self.logits
        }
    }

    /// Both graphs' counters, summed.
    fn stats(&self) -> GraphStats {
        let (a, b) = (self.logits.stats(), self.greedy.stats());
        GraphStats {
            replays: a.replays + b.replays,
            builds: a.builds + b.builds,
            updated_nodes: a.updated_nodes + b.updated_nodes,
        }
    }
}

/// The state of one sequence.
pub struct State {
    /// Tokens fed so far: the position of the next one.
    pub pos: usize,
    /// Positions the KV cache and RoPE table hold.
    pub max_ctx: usize,
    pub layers: Vec<LayerState>,
    pub rope_cos: Buffer, // (position, rope_dim / 2)
    pub rope_sin: Buffer, // (position, rope_dim / 2)
    /// The buffers this sequence's decode step writes (one row).
    pub s: Scratch,
    /// Its resident decode steps' launch graphs (`EngineOptions::graphs`); a fresh state,
    /// a snapshot included, starts with none built.
    pub(crate) graphs: DecodeGraphs,
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
                    LayerKind::Attention => {
                        LayerState::Attention { k_cache: f(max_ctx * kv_dim)?, v_cache: f(max_ctx * kv_dim)? }
                    }
                })
            })
            .collect::<Result<Vec<_>, DeviceError>>()?;
        let (cos, sin) = rope_table(cfg.rope_theta, cfg.rope_dim, max_ctx);
        let s = Scratch::new(device, cfg, 1, max_ctx)?;
        // An empty table (rope_dim 0) still needs a buffer to pass.
        let (cos, sin) = if cos.is_empty() { (vec![0.0], vec![0.0]) } else { (cos, sin) };
        Ok(State {
            pos: 0,
            max_ctx,
            layers,
            rope_cos: device.upload(&cos)?,
            rope_sin: device.upload(&sin)?,
            s,
            graphs: DecodeGraphs::default(),
        })
    }

    /// A copy of this sequence's state (KV cache, conv rings, delta-rule states, position) in
    /// fresh buffers, queued on the default stream (`Model::snapshot` takes the model's lock
    /// around it).
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
                _ => {
                    return Err(DeviceError::Mismatch {
                        what: "state snapshot",
                        expected: "the same layer kinds".into(),
                        found: "another layout (a bug in baro)".into(),
                    })
                }
            }
        }
        copy.pos = self.pos;
        Ok(copy)
    }

    /// Reads the sequence's state to the host, one buffer at a time, and hands each one's
    /// bytes to `visit` with what it is: per layer, the KV cache's valid rows (positions
    /// 0..pos: the rows past them are never read and hold whatever was there) or the conv ring
    /// and delta-rule state whole. Two states that went through the same tokens, by any path,
    /// give the same bytes (`Model::read_state`). Synchronous; reads up to one whole KV buffer
    /// (max_ctx · kv_heads · head_dim f32) at a time.
    pub fn read_parts(
        &self,
        device: &Device,
        cfg: &ModelConfig,
        visit: &mut dyn FnMut(StatePart, &[u8]),
    ) -> Result<(), DeviceError> {
        let valid = self.pos.min(self.max_ctx) * cfg.n_kv_heads * cfg.head_dim;
        for (layer, state) in self.layers.iter().enumerate() {
            let parts: [(&'static str, &Buffer, Option<usize>); 2] = match state {
                LayerState::Gdn { conv_ring, ssm } => [("conv ring", conv_ring, None), ("delta-rule state", ssm, None)],
                LayerState::Attention { k_cache, v_cache } => {
                    [("k cache", k_cache, Some(valid)), ("v cache", v_cache, Some(valid))]
                }
            };
            for (what, buf, prefix) in parts {
                let values = match prefix {
                    Some(n) => device.read_prefix::<f32>(buf, n)?,
                    None => device.read::<f32>(buf)?,
                };
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                visit(StatePart { layer, what }, &bytes);
            }
        }
        Ok(())
    }

    /// The counters of this state's decode graphs (`step`'s and `step_greedy`'s, summed).
    pub fn graph_stats(&self) -> GraphStats {
        self.graphs.stats()
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
