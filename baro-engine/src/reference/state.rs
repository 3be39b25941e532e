//! The per-sequence decode state of the reference: a KV cache per full-attention layer and, per
//! gated-delta-net layer, a ring of the last `conv_kernel − 1` conv inputs and the delta-rule
//! state. Holds values only; the layer modules define how they change.

use crate::model::{LayerKind, ModelConfig};
use crate::reference::real::Real;

/// Decode state for one sequence.
pub struct DecodeState<T> {
    /// The position the next token takes (tokens fed so far).
    pub position: usize,
    /// The configuration the state was made for (a state fits only its own model's shapes).
    pub(crate) config: ModelConfig,
    pub(crate) layers: Vec<LayerState<T>>,
}

pub(crate) enum LayerState<T> {
    Attention(KvCache<T>),
    Gdn(GdnState<T>),
}

/// Keys after q/k norm and RoPE, values as projected.
pub(crate) struct KvCache<T> {
    pub keys: Vec<T>,   // (position, kv_head, head_dim)
    pub values: Vec<T>, // (position, kv_head, head_dim)
}

pub(crate) struct GdnState<T> {
    /// The last `conv_kernel − 1` conv inputs, oldest at slot `conv_oldest`; zeros before the
    /// sequence starts (a causal conv's left padding).
    pub conv: Vec<T>, // (slot, channel)
    pub conv_oldest: usize,
    /// The delta-rule state S per value head (canonical, tiled head order).
    pub s: Vec<T>, // (value_head, key_dim, value_dim)
}

impl<T: Real> DecodeState<T> {
    /// The empty state (position 0) for a model of `cfg`.
    pub fn new(cfg: &ModelConfig) -> DecodeState<T> {
        let layers = cfg
            .layer_kinds
            .iter()
            .map(|kind| match kind {
                LayerKind::Attention => LayerState::Attention(KvCache { keys: Vec::new(), values: Vec::new() }),
                LayerKind::Gdn => LayerState::Gdn(GdnState {
                    conv: vec![T::ZERO; (cfg.conv_kernel - 1) * cfg.gdn_conv_dim()],
                    conv_oldest: 0,
                    s: vec![T::ZERO; cfg.gdn_n_value_heads * cfg.gdn_key_dim * cfg.gdn_value_dim],
                }),
            })
            .collect();
        DecodeState { position: 0, config: cfg.clone(), layers }
    }
}
