//! The buffers one forward pass writes, for up to `rows` rows: one plan for all three uses.
//! A sequence's `State` holds one of one row (its decode step); the engine holds one of a
//! chunk's rows for batched prefill and the batched decode step. Every buffer is (row, …)
//! row-major, so row 0 of a rows scratch is laid out as a one-row scratch; MoE pair buffers
//! hold rows · top_k pairs. Sizes come from the config; nothing here launches a kernel.

use baro_dsl::runtime::{Buffer, Device, DeviceError};
use baro_dsl::ScalarType;

use crate::model::ModelConfig;

/// Rows the output head computes per launch: the logits buffer holds this many rows whatever
/// the chunk or batch (a 248 320-entry vocabulary makes a row ≈ 1 MB), and each row's logits
/// do not depend on which tile it is in (the rows matvec is proven per row).
pub(crate) const HEAD_TILE: usize = 8;

/// Buffers a pass overwrites; shared by all layers (they run in order).
pub struct Scratch {
    /// Rows every buffer holds.
    pub rows: usize,
    pub tokens: Buffer,   // (row) u32: the tokens being fed
    pub zero_ids: Buffer, // (row) u32 = 0: the `ids` of a single-matrix projection
    pub x: Buffer,        // (row, hidden): the residual stream entering a layer
    pub h: Buffer,        // (row, hidden): the residual after the mixer
    pub xn: Buffer,       // (row, hidden): the normed input of the mixer or the MoE block
    pub mix: Buffer,      // (row, hidden): the mixer's or the MoE block's output
    // gated delta net
    pub qkv: Buffer,      // (row, q | k | v channel)
    pub conv_out: Buffer, // (row, q | k | v channel)
    pub z: Buffer,        // (row, v_head, value_dim)
    pub ba: Buffer,       // (row, beta | alpha · v_head)
    pub o: Buffer,        // (row, v_head, value_dim)
    pub o_normed: Buffer, // (row, v_head, value_dim)
    // full attention
    pub q_gate: Buffer,     // (row, head, query | gate, head_dim): the q_proj output
    pub q: Buffer,          // (row, head, head_dim)
    pub k_raw: Buffer,      // (row, kv_head, head_dim)
    pub k: Buffer,          // (row, kv_head, head_dim)
    pub v: Buffer,          // (row, kv_head, head_dim)
    pub probs_attn: Buffer, // (row, head, max_ctx)
    pub attn: Buffer,       // (row, head, head_dim)
    // MoE
    pub router_logits: Buffer,  // (row, expert)
    pub router_probs: Buffer,   // (row, expert)
    pub expert_ids: Buffer,     // (row, top_k) u32
    pub expert_weights: Buffer, // (row, top_k)
    pub counts: Buffer,         // (expert) u32
    pub n_slots: Buffer,        // (1) u32: the slot count of the tiled layout (`moe_scatter_tiles`)
    // Slots: rows · top_k pairs, and in the q8 mode the padding of the tiled layout
    // (`moe_scatter_tiles`), so the slot buffers hold `expert_slots` rows.
    pub pair_of: Buffer,     // (slot) u32: the (row · top_k + k) pair in each expert-sorted slot
    pub slot_of: Buffer,     // (pair) u32
    pub sorted_ids: Buffer,  // (slot) u32: the slot's expert
    pub xs: Buffer,          // (slot, hidden): each slot's token row
    pub gate_up: Buffer,     // (pair, gate | up · expert_ffn): by (row, k) in a one-token pass, by slot in a rows pass
    pub act: Buffer,         // (pair, expert_ffn)
    pub down_sorted: Buffer, // (slot, hidden)
    pub down: Buffer,        // (pair, hidden): in (row, k) order
    pub sh_gate_up: Buffer,  // (row, gate | up · shared_ffn)
    pub sh_act: Buffer,      // (row, shared_ffn)
    pub sh_out: Buffer,      // (row, hidden)
    pub sh_logit: Buffer,    // (row)
    // the output head
    pub head_row: Buffer, // (hidden): one row on its way into `head_x`
    pub head_x: Buffer,   // (HEAD_TILE, hidden): rows c.. of `xn` for a head tile past the first
    pub logits: Buffer,   // (min(rows, HEAD_TILE), vocab)
    // the q8 precision mode's quantized inputs (`kernels::q8act`): `q8_in` the normed rows
    // (`xn`, read by several projections), `q8_sh` the shared expert's down input (its own,
    // so that the shared expert shares no buffer with the routed experts, and a launch graph
    // ordered by data may run the two side by side), `q8_mid` any other input, quantized
    // just before its one use
    pub q8_in: Q8Blocks,
    pub q8_sh: Q8Blocks,
    pub q8_mid: Q8Blocks,
    // the greedy pick on the device (`kernels::pick`): per chunk, then the answer (4 u32)
    pub pick_best: Buffer,   // (chunk)
    pub pick_at: Buffer,     // (chunk) u32
    pub pick_nan_at: Buffer, // (chunk) u32
    pub pick_inf_at: Buffer, // (chunk) u32
    pub pick: Buffer,        // (4) u32
}

/// Activations quantized to 8-bit blocks of 32 by `q8act`, for every row (and MoE pair) of
/// the widest matrix input.
pub struct Q8Blocks {
    pub q: Buffer,   // (block, 8) u32: 32 i8, four to a word
    pub d: Buffer,   // (block) f32: the scale
    pub sum: Buffer, // (block) i32: the sum of the block's 32 i8
}

impl Q8Blocks {
    fn new(device: &Device, blocks: usize) -> Result<Q8Blocks, DeviceError> {
        Ok(Q8Blocks {
            q: device.alloc(ScalarType::U32, blocks * 8)?,
            d: device.alloc(ScalarType::F32, blocks)?,
            sum: device.alloc(ScalarType::I32, blocks)?,
        })
    }
}

impl Scratch {
    pub fn new(device: &Device, cfg: &ModelConfig, rows: usize, max_ctx: usize) -> Result<Scratch, DeviceError> {
        let rows = rows.max(1);
        let f = |n: usize| device.alloc(ScalarType::F32, rows * n);
        let u = |n: usize| device.alloc(ScalarType::U32, rows * n);
        let (h, k, fi, fs) = (cfg.hidden_dim, cfg.n_experts_used, cfg.expert_ffn_dim, cfg.shared_ffn_dim);
        let slots = expert_slots(cfg, rows);
        let s = |n: usize| device.alloc(ScalarType::F32, slots * n);
        let (nv, vd, kv_dim) = (cfg.gdn_n_value_heads, cfg.gdn_value_dim, cfg.n_kv_heads * cfg.head_dim);
        let chunks = crate::kernels::pick::pick_chunks(cfg.vocab_size);
        // The widest input of any matrix, in blocks of 32; the MoE's inputs hold top-k per row.
        let widest = [h, fi, fs, nv * vd, cfg.n_heads * cfg.head_dim].into_iter().max().unwrap_or(0).div_ceil(32);
        Ok(Scratch {
            rows,
            tokens: u(1)?,
            zero_ids: device.upload(&vec![0u32; rows])?,
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
            expert_ids: u(k)?,
            expert_weights: f(k)?,
            counts: device.alloc(ScalarType::U32, cfg.n_experts.max(1))?,
            n_slots: device.alloc(ScalarType::U32, 1)?,
            pair_of: device.alloc(ScalarType::U32, slots)?,
            slot_of: u(k)?,
            sorted_ids: device.alloc(ScalarType::U32, slots)?,
            xs: s(h)?,
            gate_up: s(2 * fi)?,
            act: s(fi)?,
            down_sorted: s(h)?,
            down: f(k * h)?,
            sh_gate_up: f(2 * fs)?,
            sh_act: f(fs)?,
            sh_out: f(h)?,
            sh_logit: f(1)?,
            head_row: device.alloc(ScalarType::F32, h)?,
            head_x: device.alloc(ScalarType::F32, HEAD_TILE * h)?,
            logits: device.alloc(ScalarType::F32, rows.min(HEAD_TILE) * cfg.vocab_size)?,
            q8_in: Q8Blocks::new(device, rows * widest)?,
            q8_sh: Q8Blocks::new(device, rows * fs.div_ceil(32))?,
            q8_mid: Q8Blocks::new(device, slots.max(rows) * widest)?,
            pick_best: device.alloc(ScalarType::F32, chunks)?,
            pick_at: device.alloc(ScalarType::U32, chunks)?,
            pick_nan_at: device.alloc(ScalarType::U32, chunks)?,
            pick_inf_at: device.alloc(ScalarType::U32, chunks)?,
            pick: device.alloc(ScalarType::U32, 4)?,
        })
    }
}

impl Scratch {
    /// The device bytes `Scratch::new(device, cfg, rows, max_ctx)` allocates, by the same
    /// sizes (every element is 4 bytes). Pure arithmetic: the context memory plan
    /// (`context_memory`) counts a decode step's and a chunk's scratch with it, and a test holds
    /// it to what `new` allocates. Attention's probabilities, (row, head, max_ctx), make it grow
    /// with the context: at 128k a chunk of 512 rows holds 4 GiB of them.
    pub fn bytes(cfg: &ModelConfig, rows: usize, max_ctx: usize) -> u64 {
        let rows = rows.max(1);
        let (h, k, fi, fs) = (cfg.hidden_dim, cfg.n_experts_used, cfg.expert_ffn_dim, cfg.shared_ffn_dim);
        let slots = expert_slots(cfg, rows);
        let (nv, vd, kv_dim) = (cfg.gdn_n_value_heads, cfg.gdn_value_dim, cfg.n_kv_heads * cfg.head_dim);
        let (heads, hd) = (cfg.n_heads, cfg.head_dim);
        let chunks = crate::kernels::pick::pick_chunks(cfg.vocab_size);
        let widest = [h, fi, fs, nv * vd, heads * hd].into_iter().max().unwrap_or(0).div_ceil(32);
        // Per row: tokens, zero_ids, x, h, xn, mix, the GDN buffers, attention's, the router's,
        // the pair buffers sized per row, the shared expert's.
        let per_row = 2
            + 4 * h
            + 2 * cfg.gdn_conv_dim()
            + 3 * nv * vd
            + 2 * nv
            + 2 * heads * hd
            + heads * hd
            + 3 * kv_dim
            + heads * max_ctx
            + heads * hd
            + 2 * cfg.n_experts
            + 3 * k
            + k * h
            + 3 * fs
            + h
            + 1;
        // Per expert-sorted slot: pair_of, sorted_ids, xs, gate_up, act, down_sorted.
        let per_slot = 2 + h + 2 * fi + fi + h;
        // Q8 blocks: 8 words of i8, a scale and a sum per block.
        let q8 = 10 * (rows * widest + rows * fs.div_ceil(32) + slots.max(rows) * widest);
        let fixed =
            cfg.n_experts.max(1) + 1 + h + HEAD_TILE * h + rows.min(HEAD_TILE) * cfg.vocab_size + 4 * chunks + 4;
        4 * (rows * per_row + slots * per_slot + q8 + fixed) as u64
    }
}

/// A rows pass's routed experts in the q8 mode keep one slot per pair (no tiles) where tiles of
/// `EXPERT_TILE` would hold more than this many slots per pair (`forward::moe`).
pub(crate) const MAX_TILE_PADDING: usize = 3;

/// The expert-sorted slots a pass over `rows` rows may fill: rows · top_k pairs, plus the
/// tiled layout's padding, up to `EXPERT_TILE − 1` slots for each expert that holds a pair
/// and at most `MAX_TILE_PADDING` slots per pair in all.
pub(crate) fn expert_slots(cfg: &ModelConfig, rows: usize) -> usize {
    let pairs = rows.max(1) * cfg.n_experts_used.max(1);
    pairs + ((crate::kernels::moe::EXPERT_TILE - 1) * pairs.min(cfg.n_experts)).min((MAX_TILE_PADDING - 1) * pairs)
}
