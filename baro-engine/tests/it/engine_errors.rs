//! The engine's errors on bad models and bad calls: a missing tensor, a mis-shaped tensor, a
//! token id past the vocabulary and a full context each give an error naming what was expected
//! and what was found, never a panic; so does a pair of projections the engine stacks into one
//! matrix stored in two types. A K-quant token embedding, once refused here, now loads:
//! its gather equals the engine on the F32 dequantized table, bit for bit.

use crate::common;

use common::dev;

use baro_engine::engine::{Engine, EngineError, EngineOptions, ModelSource, WeightError};
use baro_engine::model::names::GgufTensorSpec;
use baro_engine::model::quantize::quantize;
use baro_engine::model::{dequant, GgufFile, GgufWriter, HfCheckpoint, ModelConfig, TensorType};
use common::{canonical_f32, fixture, gguf_from};

fn engine_from(bytes: Vec<u8>, max_ctx: usize) -> Result<Engine, EngineError> {
    Engine::new(
        dev(),
        &ModelSource::Gguf(GgufFile::from_vec(bytes).unwrap()),
        EngineOptions { max_ctx, ..EngineOptions::default() },
    )
}

#[test]
fn missing_and_misshaped_tensors_are_named() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let canonical = canonical_f32(&ck);
    let without: Vec<_> = canonical.iter().filter(|(s, _)| s.name != "blk.2.ssm_a").cloned().collect();
    let e = engine_from(gguf_from(&ck.config, &without, &|_| TensorType::F32), 8).err().expect("an error");
    assert!(
        matches!(&e, EngineError::Weights(w) if matches!(&**w, WeightError::Missing { name, .. } if name == "blk.2.ssm_a")),
        "{e}"
    );
    assert_eq!(e.to_string(), "missing tensor blk.2.ssm_a (for blk.2.ssm_a)");

    let mut transposed = canonical.clone();
    let qkv = transposed.iter_mut().find(|(s, _)| s.name == "blk.0.attn_qkv.weight").unwrap();
    qkv.0.shape.reverse();
    let e = engine_from(gguf_from(&ck.config, &transposed, &|_| TensorType::F32), 8).err().expect("an error");
    assert_eq!(e.to_string(), "tensor blk.0.attn_qkv.weight: expected shape [128, 64], found [64, 128]");
}

/// Two projections the engine stacks into one matrix (here the shared expert's gate and up)
/// stored in different types: refused at load, naming both tensors and both types.
#[test]
fn a_stacked_pair_of_two_types_is_refused() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in ck.config.to_gguf_metadata().expect("interval layer pattern") {
        w.add_meta(&k, v);
    }
    for (spec, data) in canonical_f32(&ck) {
        let ty = if spec.name == "blk.0.ffn_up_shexp.weight" { TensorType::F16 } else { TensorType::F32 };
        w.add_tensor(&spec.name, ty, &spec.shape, quantize(ty, &data).unwrap()).unwrap();
    }
    let e = engine_from(w.to_bytes().0, 8).err().expect("an error");
    assert!(matches!(&e, EngineError::Weights(w) if matches!(&**w, WeightError::PairType { .. })), "{e}");
    assert_eq!(
        e.to_string(),
        "tensors blk.0.ffn_gate_shexp.weight and blk.0.ffn_up_shexp.weight: expected one element type (baro runs these two projections of one input as one stacked matrix), found F32 and F16"
    );
}

/// The fixture's canonical tensors as GGUF: F32 everywhere except `token_embd.weight`, written
/// as `embd` (type, bytes); with `output` an untied `output.weight` is appended.
fn gguf_with_embedding(
    cfg: &ModelConfig,
    canonical: &[(GgufTensorSpec, Vec<f32>)],
    embd: (TensorType, &[u8]),
    output: Option<(TensorType, &[u8])>,
) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (k, v) in cfg.to_gguf_metadata().expect("interval layer pattern") {
        w.add_meta(&k, v);
    }
    for (spec, data) in canonical {
        let (ty, bytes) = if spec.name == "token_embd.weight" {
            (embd.0, embd.1.to_vec())
        } else {
            (TensorType::F32, quantize(TensorType::F32, data).unwrap())
        };
        w.add_tensor(&spec.name, ty, &spec.shape, bytes).expect("consistent tensor");
    }
    if let Some((ty, bytes)) = output {
        w.add_tensor("output.weight", ty, &[cfg.vocab_size, cfg.hidden_dim], bytes.to_vec())
            .expect("consistent tensor");
    }
    w.to_bytes().0
}

#[test]
fn k_quant_embedding_loads_and_equals_its_dequantized_f32_table() {
    let ck = HfCheckpoint::open(&fixture("vocab")).unwrap();
    let cfg = &ck.config;
    assert!(cfg.tied_embeddings, "the vocab fixture ties its head to the embedding");
    let canonical = canonical_f32(&ck);
    let embd = &canonical.iter().find(|(s, _)| s.name == "token_embd.weight").unwrap().1;
    let tokens = [1u32, 2047, 0, 513, 77, 1024];
    for ty in [TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K] {
        let q = quantize(ty, embd).unwrap();
        let deq = dequant::to_f32(ty, &q);
        // The pack: a K-quant table, tied, so the head is the K-quant matvec on the same bytes.
        let pack = gguf_with_embedding(cfg, &canonical, (ty, &q), None);
        // The reference: the dequantized table as F32 for the gather, the same K-quant bytes as
        // an untied head, so only the gather differs between the two engines.
        let reference = gguf_with_embedding(
            cfg,
            &canonical,
            (TensorType::F32, &quantize(TensorType::F32, &deq).unwrap()),
            Some((ty, &q)),
        );
        let (mut a, mut b) =
            (engine_from(pack, 8).unwrap_or_else(|e| panic!("{ty}: {e}")), engine_from(reference, 8).unwrap());
        for &t in &tokens {
            let (la, lb) = (a.step(t).unwrap(), b.step(t).unwrap());
            assert_eq!(la.len(), cfg.vocab_size);
            let differ = la.iter().zip(&lb).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            assert_eq!(differ, 0, "{ty} token {t}: {differ} of {} logits differ in bits", la.len());
        }
    }
}

#[test]
fn bad_token_and_full_context_are_errors() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let mut engine =
        Engine::new(dev(), &ModelSource::Hf(ck), EngineOptions { max_ctx: 2, ..EngineOptions::default() }).unwrap();
    let e = engine.step(1000).unwrap_err();
    assert_eq!(e.to_string(), "token 1000: expected an id below the vocabulary size 1000");
    assert_eq!(engine.position(), 0);
    engine.step(1).unwrap();
    engine.step(2).unwrap();
    let e = engine.step(3).unwrap_err();
    assert_eq!(e.to_string(), "context full: expected fewer than 2 tokens in the sequence, found 2 already");
    // A reset starts over and gives the first step's logits again, bit for bit.
    engine.reset().unwrap();
    let a = engine.step(1).unwrap();
    engine.reset().unwrap();
    let b = engine.step(1).unwrap();
    assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    assert!(matches!(engine.generate(&[], 3), Err(EngineError::Unsupported { .. })));
}
