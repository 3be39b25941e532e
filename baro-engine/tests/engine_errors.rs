//! The engine's errors on bad models and bad calls: a missing tensor, a mis-shaped tensor, a
//! token embedding no gather kernel reads, a token id past the vocabulary and a full context
//! each give an error naming what was expected and what was found, never a panic.

mod common;

use baro_dsl::runtime::Device;
use baro_engine::engine::{Engine, EngineError, EngineOptions, ModelSource, WeightError};
use baro_engine::model::{GgufFile, HfCheckpoint, TensorType};
use common::{canonical_f32, fixture, gguf_from};

fn dev() -> Device {
    match std::env::var("BARO_TEST_DEVICE").as_deref() {
        Ok("cuda") => Device::cuda(0),
        Ok("hip") => Device::hip(0),
        _ => Device::host(),
    }
    .expect("test device")
}

fn engine_from(bytes: Vec<u8>, max_ctx: usize) -> Result<Engine, EngineError> {
    Engine::new(dev(), &ModelSource::Gguf(GgufFile::from_vec(bytes).unwrap()), EngineOptions { max_ctx })
}

#[test]
fn missing_and_misshaped_tensors_are_named() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let canonical = canonical_f32(&ck);
    let without: Vec<_> = canonical.iter().filter(|(s, _)| s.name != "blk.2.ssm_a").cloned().collect();
    let e = engine_from(gguf_from(&ck.config, &without, &|_| TensorType::F32), 8).err().expect("an error");
    assert!(matches!(&e, EngineError::Weights(w) if matches!(&**w, WeightError::Missing { name, .. } if name == "blk.2.ssm_a")), "{e}");
    assert_eq!(e.to_string(), "missing tensor blk.2.ssm_a (for blk.2.ssm_a)");

    let mut transposed = canonical.clone();
    let qkv = transposed.iter_mut().find(|(s, _)| s.name == "blk.0.attn_qkv.weight").unwrap();
    qkv.0.shape.reverse();
    let e = engine_from(gguf_from(&ck.config, &transposed, &|_| TensorType::F32), 8).err().expect("an error");
    assert_eq!(e.to_string(), "tensor blk.0.attn_qkv.weight: expected shape [128, 64], found [64, 128]");
}

#[test]
fn k_quant_embedding_is_refused_at_load() {
    let ck = HfCheckpoint::open(&fixture("vocab")).unwrap();
    let canonical = canonical_f32(&ck);
    let vocab_hidden = [ck.config.vocab_size, ck.config.hidden_dim];
    let bytes = gguf_from(&ck.config, &canonical, &|s| if s == vocab_hidden { TensorType::Q6_K } else { TensorType::F32 });
    let e = engine_from(bytes, 8).err().expect("an error");
    assert_eq!(e.to_string(), "tensor token_embd.weight: expected element type F32, F16, BF16 or Q8_0 (an embedding kernel's table), found Q6_K");
}

#[test]
fn bad_token_and_full_context_are_errors() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let mut engine = Engine::new(dev(), &ModelSource::Hf(ck), EngineOptions { max_ctx: 2 }).unwrap();
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
