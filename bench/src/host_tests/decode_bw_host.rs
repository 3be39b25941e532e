//! `decode_bw`'s routine on the host JIT with a tiny GGUF written from the engine's `tiny`
//! fixture (Q8_0 matrices, F32 vectors, one extra tensor decode never reads): it runs to the
//! end with deterministic ids, and its floor equals the bytes computed here independently from
//! the tensor shapes (and, for the routed experts, by hand), untied and tied.

use std::path::PathBuf;

use crate::decode::{run, DecodeOptions};
use crate::floor::{floor, Rule};
use baro_dsl::runtime::DeviceKind;
use baro_engine::model::names::{self, HfTensor};
use baro_engine::model::{quantize, GgufFile, GgufWriter, HfCheckpoint, ModelConfig, TensorType};

const EXTRA: &str = "blk.4.nextn.extra.weight";

/// Q8_0 for matrices whose rows are whole blocks, F32 otherwise (the community mix's choice
/// for vectors; the tiny shapes are too small for K-quants).
fn ty_for(shape: &[usize]) -> TensorType {
    if shape.len() >= 2 && shape[shape.len() - 1] % TensorType::Q8_0.block_len() == 0 {
        TensorType::Q8_0
    } else {
        TensorType::F32
    }
}

/// The tiny fixture as a GGUF of `cfg`'s tensors (tied: no `output.weight`), plus `EXTRA`.
fn tiny_gguf(tied: bool) -> (ModelConfig, Vec<u8>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../baro-engine/fixtures/tiny");
    let ck = HfCheckpoint::open(&dir).expect("tiny fixture");
    let mut cfg = ck.config.clone();
    cfg.tied_embeddings = tied;
    let get = |name: &str| ck.tensor(name).map(|t| HfTensor { shape: t.shape.to_vec(), data: t.to_f32() });
    let mut w = GgufWriter::new();
    for (k, v) in cfg.to_gguf_metadata().expect("interval layer pattern") {
        w.add_meta(&k, v);
    }
    for spec in names::gguf_tensors(&cfg) {
        let data = names::hf_to_gguf(&cfg, &spec, &get).expect("fixture tensor");
        let ty = ty_for(&spec.shape);
        w.add_tensor(&spec.name, ty, &spec.shape, quantize::quantize(ty, &data).expect("whole blocks"))
            .expect("consistent tensor");
    }
    w.add_tensor(EXTRA, TensorType::F32, &[64], vec![0u8; 256]).expect("extra tensor");
    (cfg, w.to_bytes().0)
}

/// The per-token bytes from the shapes: the embedding's one row, `top_k` single experts of
/// each expert tensor, every other decode tensor whole, and the table again when tied.
fn expected_bytes(cfg: &ModelConfig) -> u64 {
    let bytes = |shape: &[usize]| ty_for(shape).bytes_for(shape).expect("whole blocks") as u64;
    let mut total = 0;
    for spec in names::gguf_tensors(cfg) {
        total += if spec.name == "token_embd.weight" {
            bytes(&[1, cfg.hidden_dim]) + if cfg.tied_embeddings { bytes(&spec.shape) } else { 0 }
        } else if spec.name.ends_with("_exps.weight") {
            cfg.n_experts_used as u64 * bytes(&spec.shape[1..])
        } else {
            bytes(&spec.shape)
        };
    }
    total
}

#[test]
fn floor_counts_embedding_row_topk_experts_and_the_rest_whole() {
    for tied in [false, true] {
        let (cfg, bytes) = tiny_gguf(tied);
        let file = GgufFile::from_vec(bytes).expect("valid gguf");
        let cfg_read = ModelConfig::from_gguf(&file).expect("config");
        assert_eq!(cfg_read.tied_embeddings, tied);
        let f = floor(&file, &cfg_read).expect("floor");
        assert_eq!(f.per_token, expected_bytes(&cfg), "tied {tied}");
        assert_eq!(f.per_token, f.embedding_row + f.lm_head + f.routed_experts + f.other);
        // Q8_0 rows of 64 values are 2 blocks of 34 bytes: the embedding row is 68 bytes; each
        // layer reads 2 experts × (gate 32 rows + up 32 rows of 68 bytes + down 64 rows of 34).
        assert_eq!(f.embedding_row, 68);
        assert_eq!(f.routed_experts, 4 * 2 * (32 * 68 + 32 * 68 + 64 * 34));
        // The head: 1000 rows of 68 bytes (the table itself when tied).
        assert_eq!(f.lm_head, 1000 * 68);
        assert_eq!(f.not_read(), vec![EXTRA]);
        let embd = f.tensors.iter().find(|t| t.name == "token_embd.weight").expect("embedding");
        assert_eq!(
            embd.rule,
            if tied { Rule::EmbeddingRowAndTiedHead { rows: 1000 } } else { Rule::EmbeddingRow { rows: 1000 } }
        );
        assert!(f.tokens_per_s(1e9) > 0.0 && (f.tokens_per_s(1e9) - 1e9 / f.per_token as f64).abs() < 1e-6);
    }
}

#[test]
fn decode_bw_runs_on_the_host_with_deterministic_ids() {
    let (cfg, bytes) = tiny_gguf(false);
    let path = std::env::temp_dir().join(format!("baro_decode_bw_host_{}.gguf", std::process::id()));
    std::fs::write(&path, bytes).expect("write tiny gguf");
    let opts = DecodeOptions {
        model: path.clone(),
        target: DeviceKind::Host,
        ordinal: 0,
        tokens: 5,
        warmup: 2,
        context_tokens: 3,
        first_token: 7,
        vram_budget: None,
        precision: baro_engine::engine::Precision::F32,
        copy_bytes: 1 << 20,
        copy_iters: 3,
        filler_bytes: 1 << 20,
        pinned_bytes: 1 << 20,
        pinned_iters: 2,
        host_pick: false,
        graphs: true,
    };
    let first = run(&opts);
    let second = run(&DecodeOptions { host_pick: true, ..opts.clone() });
    let third = run(&DecodeOptions { graphs: false, ..opts.clone() });
    std::fs::remove_file(&path).ok();
    let (a, b, c) = (first.expect("first run"), second.expect("second run"), third.expect("third run"));
    assert!(a.graphs && b.graphs && !c.graphs);
    assert_eq!(a.timed_ids, c.timed_ids, "greedy ids differ between launch graphs on and off");
    // 10 step_greedy calls through one graph: built once, then updated in place.
    assert_eq!(a.graph_stats.map(|s| (s.replays, s.builds)), Some((10, 1)));
    assert_eq!(a.step_s.len(), 5);
    assert_eq!(a.timed_ids.len(), 6);
    assert_eq!(a.first_timed_pos, 5);
    assert!(a.timed_ids.iter().all(|&t| (t as usize) < cfg.vocab_size));
    assert_eq!(a.timed_ids, b.timed_ids, "greedy ids differ between the device pick and the host pick");
    assert!(a.pick_s.iter().all(|&p| p == 0.0) && b.pick_s.iter().all(|&p| p > 0.0));
    assert_eq!(a.floor.per_token, expected_bytes(&cfg));
    assert_eq!(a.upload_bytes, a.floor.stored_total - 256, "every tensor but the extra one is uploaded");
    let lat = a.latency();
    assert!(lat.min > 0.0 && lat.min <= lat.p50 && lat.p50 <= lat.p90 && lat.p90 <= lat.p99 && lat.p99 <= lat.max);
    assert!(a.copy_bytes_per_s > 0.0 && a.tok_s_median() > 0.0 && a.ratio() > 0.0);
    assert!(
        (a.ratio() - a.tok_s_median() * a.floor.per_token as f64 / a.copy_bytes_per_s).abs()
            < 1e-9 * a.ratio().max(1.0)
    );
}
