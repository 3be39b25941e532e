//! Model configurations the synthetic-pack writer knows by name: `real` (Qwen3.5-35B-A3B's
//! shapes, from `shared/reference/qwen35moe.md`) and `tiny` (the same structure at test size,
//! with every matrix dimension a multiple of 256 so that every K-quant of the community mix
//! applies). Numbers only; never weights.

use crate::model::config::ModelConfig;

/// Qwen3.5-35B-A3B (`qwen35moe`): hidden 2048, 40 layers with full attention every 4th,
/// 256 experts top-8 of 512, shared expert 512, vocab 248320, GDN 16 key heads and 32 value
/// heads of 128, conv 4, attention 16/2 heads of 256, RoPE on 64 dims with theta 1e7.
pub fn real() -> ModelConfig {
    ModelConfig {
        vocab_size: 248_320,
        hidden_dim: 2048,
        n_layers: 40,
        layer_kinds: ModelConfig::kinds_from_interval(40, 4),
        rms_eps: 1e-6,
        context_length: 262_144,
        n_heads: 16,
        n_kv_heads: 2,
        head_dim: 256,
        rope_dim: 64,
        rope_theta: 1e7,
        gdn_n_key_heads: 16,
        gdn_n_value_heads: 32,
        gdn_key_dim: 128,
        gdn_value_dim: 128,
        conv_kernel: 4,
        n_experts: 256,
        n_experts_used: 8,
        expert_ffn_dim: 512,
        shared_ffn_dim: 512,
        tied_embeddings: false,
    }
}

/// A test-sized model of the same structure: hidden 256, 4 layers (the last full attention),
/// 8 experts top-2 of 256, shared 256, vocab 1024, GDN 2 key / 4 value heads of 64, attention
/// 4/2 heads of 64 (RoPE on 16 dims). About 9 MB in the community mix.
pub fn tiny() -> ModelConfig {
    ModelConfig {
        vocab_size: 1024,
        hidden_dim: 256,
        n_layers: 4,
        layer_kinds: ModelConfig::kinds_from_interval(4, 4),
        rms_eps: 1e-6,
        context_length: 4096,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        rope_dim: 16,
        rope_theta: 1e7,
        gdn_n_key_heads: 2,
        gdn_n_value_heads: 4,
        gdn_key_dim: 64,
        gdn_value_dim: 64,
        conv_kernel: 4,
        n_experts: 8,
        n_experts_used: 2,
        expert_ffn_dim: 256,
        shared_ffn_dim: 256,
        tied_embeddings: false,
    }
}
