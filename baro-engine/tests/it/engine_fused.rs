//! A GGUF pack whose routed gate and up experts are one fused `blk.N.ffn_gate_up_exps.weight`
//! (E, 2·I, H) — gate the first I rows of each expert, up the last I — decodes to the same
//! logits, bit for bit, as the pack with separate `ffn_gate_exps` / `ffn_up_exps`, in F32, Q8_0
//! and Q4_K (the split is a byte split of whole-block rows). The halves swapped give other
//! logits (the order is observed), and a mis-shaped fused tensor is a shape error naming it.
//! Runs on the host, or with `BARO_TEST_DEVICE=cuda` (or `hip`) on a GPU.

use crate::common;

use common::dev;

use baro_engine::engine::{Engine, EngineError, EngineOptions, ModelSource};
use baro_engine::model::names::GgufTensorSpec;
use baro_engine::model::quantize::quantize;
use baro_engine::model::{GgufFile, GgufWriter, HfCheckpoint, ModelConfig, TensorType};
use common::{canonical_f32, fixture, pick_type};

/// How the gate and up experts are written.
#[derive(Clone, Copy, PartialEq)]
enum Experts {
    Separate,
    /// Fused, gate first (the convention).
    Fused,
    /// Fused with up first: a pack the engine reads as gate = up and up = gate.
    FusedSwapped,
    /// Fused with one expert row too few.
    FusedShort,
}

/// The fixture's canonical tensors as GGUF, matrices of `pick_type(want, shape)`.
fn pack(cfg: &ModelConfig, canonical: &[(GgufTensorSpec, Vec<f32>)], want: TensorType, experts: Experts) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (k, v) in cfg.to_gguf_metadata().expect("interval layer pattern") {
        w.add_meta(&k, v);
    }
    let find = |name: &str| canonical.iter().find(|(s, _)| s.name == name).map(|(_, d)| d).unwrap();
    for (spec, data) in canonical {
        let name = spec.name.as_str();
        if experts != Experts::Separate && name.ends_with(".ffn_up_exps.weight") {
            continue;
        }
        if experts != Experts::Separate && name.ends_with(".ffn_gate_exps.weight") {
            let (e, n, k) = (spec.shape[0], spec.shape[1], spec.shape[2]);
            let up = find(&name.replace("ffn_gate_exps", "ffn_up_exps"));
            let (first, second) = if experts == Experts::FusedSwapped { (up, data) } else { (data, up) };
            // Interleaved per expert in f32, quantized as one tensor: rows are whole blocks, so
            // these are the bytes of the two quantized halves, interleaved.
            let mut fused = Vec::with_capacity(2 * e * n * k);
            for x in 0..e {
                fused.extend_from_slice(&first[x * n * k..(x + 1) * n * k]);
                fused.extend_from_slice(&second[x * n * k..(x + 1) * n * k]);
            }
            let mut shape = vec![e, 2 * n, k];
            if experts == Experts::FusedShort {
                shape = vec![e, 2 * n - 1, k];
                fused.truncate(e * (2 * n - 1) * k);
            }
            let ty = pick_type(want, &shape);
            let fused_name = name.replace("ffn_gate_exps", "ffn_gate_up_exps");
            w.add_tensor(&fused_name, ty, &shape, quantize(ty, &fused).unwrap()).expect("consistent tensor");
            continue;
        }
        let ty = pick_type(want, &spec.shape);
        w.add_tensor(name, ty, &spec.shape, quantize(ty, data).unwrap()).expect("consistent tensor");
    }
    w.to_bytes().0
}

fn engine(bytes: Vec<u8>) -> Result<Engine, EngineError> {
    Engine::new(
        dev(),
        &ModelSource::Gguf(GgufFile::from_vec(bytes).unwrap()),
        EngineOptions { max_ctx: 16, ..EngineOptions::default() },
    )
}

/// The logits of every step of `tokens`.
fn logits(engine: &mut Engine, tokens: &[u32]) -> Vec<u32> {
    tokens.iter().flat_map(|&t| engine.step(t).unwrap()).map(f32::to_bits).collect()
}

fn fused_equals_separate(fixture_name: &str, want: TensorType, tokens: &[u32]) {
    let ck = HfCheckpoint::open(&fixture(fixture_name)).unwrap();
    let cfg = &ck.config;
    let canonical = canonical_f32(&ck);
    let gate_shape = &canonical.iter().find(|(s, _)| s.name == "blk.0.ffn_gate_exps.weight").unwrap().0.shape;
    assert_eq!(pick_type(want, gate_shape), want, "{fixture_name}: the experts take {want}");
    let separate = logits(&mut engine(pack(cfg, &canonical, want, Experts::Separate)).unwrap(), tokens);
    let fused = logits(&mut engine(pack(cfg, &canonical, want, Experts::Fused)).unwrap(), tokens);
    let differ = separate.iter().zip(&fused).filter(|(a, b)| a != b).count();
    println!("{fixture_name} {want}: fused vs separate: {differ} of {} logits differ in bits", separate.len());
    assert_eq!(separate.len(), tokens.len() * cfg.vocab_size);
    assert_eq!(differ, 0, "{fixture_name} {want}");
    let swapped = logits(&mut engine(pack(cfg, &canonical, want, Experts::FusedSwapped)).unwrap(), tokens);
    assert_ne!(separate, swapped, "{fixture_name} {want}: swapping the halves changed nothing");
}

#[test]
fn tiny_f32_fused_gate_up_equals_separate_bytes() {
    fused_equals_separate("tiny", TensorType::F32, &[1, 5, 999, 0, 42]);
}

#[test]
fn tiny_q8_0_fused_gate_up_equals_separate_bytes() {
    fused_equals_separate("tiny", TensorType::Q8_0, &[3, 700, 12]);
}

#[test]
fn vocab_q4_k_fused_gate_up_equals_separate_bytes() {
    fused_equals_separate("vocab", TensorType::Q4_K, &[1, 2047, 513]);
}

#[test]
fn misshaped_fused_gate_up_is_named() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let cfg = &ck.config;
    let (e, i, h) = (cfg.n_experts, cfg.expert_ffn_dim, cfg.hidden_dim);
    let err = engine(pack(cfg, &canonical_f32(&ck), TensorType::F32, Experts::FusedShort)).err().expect("an error");
    assert_eq!(
        err.to_string(),
        format!(
            "tensor blk.0.ffn_gate_up_exps.weight: expected shape [{e}, {}, {h}], found [{e}, {}, {h}]",
            2 * i,
            2 * i - 1
        )
    );
}
