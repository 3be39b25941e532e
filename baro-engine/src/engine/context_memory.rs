//! The device memory a context length costs: one sequence's KV cache (every full-attention
//! layer, f32, the whole capacity allocated up front), its GDN state (conv rings and
//! delta-rule states, independent of the length), its RoPE table and one-row decode scratch,
//! and the rows scratch of a batched prefill chunk (attention's probabilities are (row, head,
//! context) there, so it grows with the context too). Pure arithmetic from the config, by the
//! sizes `State::new` and `Scratch::new` allocate (a test holds them equal); the weights are
//! the memory plan's (`staging::budget`), not this file's. Allocates nothing.

use std::fmt;

use crate::engine::scratch::Scratch;
use crate::engine::staging::format_bytes;
use crate::model::{LayerKind, ModelConfig};

/// What a context of `max_ctx` positions costs on the device, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextMemory {
    pub max_ctx: usize,
    /// Rows of the prefill chunk the scratch is sized for.
    pub chunk: usize,
    /// K and V of every attention layer: layers · 2 · max_ctx · kv_heads · head_dim · 4.
    pub kv_cache: u64,
    /// Every GDN layer's conv ring, (channel, conv_kernel − 1), and delta-rule state,
    /// (v_head, key_dim, value_dim), f32: the same at any length.
    pub gdn_state: u64,
    /// RoPE cos and sin, (position, rope_dim / 2) each.
    pub rope_table: u64,
    /// The one-row scratch each state's decode step writes.
    pub decode_scratch: u64,
    /// The model's rows scratch for a chunk of `chunk` rows (one per model, not per sequence).
    pub chunk_scratch: u64,
}

impl ContextMemory {
    pub fn new(cfg: &ModelConfig, max_ctx: usize, chunk: usize) -> ContextMemory {
        let max_ctx = max_ctx.max(1);
        let count = |kind: LayerKind| cfg.layer_kinds.iter().filter(|&&k| k == kind).count() as u64;
        let kv_dim = (cfg.n_kv_heads * cfg.head_dim) as u64;
        let ssm = (cfg.gdn_n_value_heads * cfg.gdn_key_dim * cfg.gdn_value_dim) as u64;
        let ring = (cfg.gdn_conv_dim() * (cfg.conv_kernel.max(1) - 1)) as u64;
        // `State::new` uploads a one-entry table when rope_dim is 0.
        let rope = ((max_ctx * (cfg.rope_dim / 2)) as u64).max(1);
        ContextMemory {
            max_ctx,
            chunk,
            kv_cache: count(LayerKind::Attention) * 2 * max_ctx as u64 * kv_dim * 4,
            gdn_state: count(LayerKind::Gdn) * (ring + ssm) * 4,
            rope_table: 2 * rope * 4,
            decode_scratch: Scratch::bytes(cfg, 1, max_ctx),
            chunk_scratch: Scratch::bytes(cfg, chunk, max_ctx),
        }
    }

    /// One sequence's `State` (what `Model::new_state` allocates).
    pub fn state(&self) -> u64 {
        self.kv_cache + self.gdn_state + self.rope_table + self.decode_scratch
    }

    /// `states` sequences and one chunk's scratch: what a batched prefill of this context adds
    /// to the weights.
    pub fn total(&self, states: usize) -> u64 {
        states as u64 * self.state() + self.chunk_scratch
    }
}

impl fmt::Display for ContextMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "context {}: KV cache {}, GDN state {}, RoPE table {}, decode scratch {} (one state {}); chunk scratch for {} rows {}",
            self.max_ctx,
            format_bytes(self.kv_cache),
            format_bytes(self.gdn_state),
            format_bytes(self.rope_table),
            format_bytes(self.decode_scratch),
            format_bytes(self.state()),
            self.chunk,
            format_bytes(self.chunk_scratch)
        )
    }
}
