//! The embedded default model of `baro-engine` with no arguments: a small `qwen35moe`-shaped
//! config whose vocabulary covers the real Qwen3.5 tokenizer, with random weights that are a
//! pure function of `WEIGHT_SEED`, written as a GGUF pack into memory by the synthetic-pack
//! planner and block generator, and loaded through the normal GGUF path. Never writes a file
//! and never claims its text means anything: the weights are noise.

use baro_engine::model::{GgufFile, LayerKind, ModelConfig};
use baro_engine::pack::{self, blocks, rng::Xoshiro256, PackError, QuantMix, CHUNK_BYTES};

/// The seed of the default model's weights (not the sampler's): fixed, so every run and every
/// machine gets the same model.
pub const WEIGHT_SEED: u64 = 0x6261_726f; // "baro"

/// The quant mix: every matrix Q8_0 (the K-quants of the community mix need rows of 256 and
/// would fall back to Q8_0 at this hidden size anyway), norms, router and small vectors F32.
pub const MIX: QuantMix = QuantMix::Q8_0;

/// Qwen3.5-35B-A3B's structure at the size of the `tiny` test fixture: hidden 64, 4 layers
/// (three gated delta net, the last full attention), 8 experts top-2 of 32, shared expert 32,
/// attention 4/2 heads of 16 (RoPE on 4 dims), GDN 2 key / 4 value heads of 16, and the real
/// vocabulary of 248 320 ids, so the output head dominates the cost as in the real model.
pub fn config() -> ModelConfig {
    let n_layers = 4;
    ModelConfig {
        vocab_size: 248_320,
        hidden_dim: 64,
        n_layers,
        layer_kinds: ModelConfig::kinds_from_interval(n_layers, 4),
        rms_eps: 1e-6,
        context_length: 4096,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 16,
        rope_dim: 4,
        rope_theta: 1e7,
        gdn_n_key_heads: 2,
        gdn_n_value_heads: 4,
        gdn_key_dim: 16,
        gdn_value_dim: 16,
        conv_kernel: 4,
        n_experts: 8,
        n_experts_used: 2,
        expert_ffn_dim: 32,
        shared_ffn_dim: 32,
        tied_embeddings: false,
    }
}

/// One line describing the default model.
pub fn describe(cfg: &ModelConfig) -> String {
    let attention = cfg.layer_kinds.iter().filter(|k| **k == LayerKind::Attention).count();
    format!(
        "built-in qwen35moe, random weights (seed {WEIGHT_SEED:#x}, {MIX} mix): hidden {}, {} layers ({} full attention), {} experts top-{}, vocab {}",
        cfg.hidden_dim, cfg.n_layers, attention, cfg.n_experts, cfg.n_experts_used, cfg.vocab_size
    )
}

/// The default model as a GGUF file in memory.
pub fn gguf() -> Result<GgufFile, String> {
    let bytes = gguf_bytes(&config(), MIX, WEIGHT_SEED)
        .map_err(|e| format!("cannot build the built-in model (a bug in baro): {e}"))?;
    GgufFile::from_vec(bytes).map_err(|e| format!("cannot read the built-in model back (a bug in baro): {e}"))
}

/// The bytes `pack::write_pack` would write for (`cfg`, `mix`, `seed`), built in memory: the
/// planned header, then each tensor in chunks of `CHUNK_BYTES` seeded with (seed, tensor,
/// chunk) as the file writer seeds them, each tensor at its planned offset.
pub fn gguf_bytes(cfg: &ModelConfig, mix: QuantMix, seed: u64) -> Result<Vec<u8>, PackError> {
    let plan = pack::plan(cfg, mix, seed)?;
    let h = &plan.header;
    let data_start = h.bytes.len();
    let mut out = Vec::with_capacity(plan.file_len() as usize);
    out.extend_from_slice(&h.bytes);
    for (t, tensor) in plan.tensors.iter().enumerate() {
        out.resize(data_start + h.offsets[t] as usize, 0);
        let block_bytes = tensor.ty.block_bytes();
        let n_blocks = h.sizes[t] as usize / block_bytes;
        let per_chunk = (CHUNK_BYTES / block_bytes).max(1);
        for (index, first) in (0..n_blocks).step_by(per_chunk).enumerate() {
            let len = per_chunk.min(n_blocks - first) * block_bytes;
            let at = out.len();
            out.resize(at + len, 0);
            let mut rng = Xoshiro256::from_words(&[seed, t as u64, index as u64]);
            blocks::fill(tensor.ty, tensor.kind, &mut rng, &mut out[at..]);
        }
    }
    out.resize(plan.file_len() as usize, 0);
    Ok(out)
}
