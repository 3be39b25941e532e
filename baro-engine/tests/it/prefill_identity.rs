//! Batched prefill against replay (the decode step per token) on the tiny fixture, from
//! safetensors and from a Q8_0 GGUF: the logits of every prompt position byte for byte, and
//! the greedy tokens after, for prompts that cross chunk boundaries with chunk sizes that do
//! not divide them, and for a prompt fed in two calls (state and KV carried across calls).
//! `engine_q8` runs the same checks in the q8 precision mode.
//! Runs on the host, or with `BARO_TEST_DEVICE=cuda` (or `hip`) on a GPU.

use crate::common;

use baro_engine::engine::{Engine, EngineOptions, Logits, ModelSource, Precision, PrefillMode};
use baro_engine::model::{GgufFile, HfCheckpoint, TensorType};
use common::{canonical_f32, dev, fixture, gguf_from, pick_type, Rng};

fn prompt(seed: u64, len: usize, vocab: usize) -> Vec<u32> {
    let mut rng = Rng(seed);
    (0..len).map(|_| (rng.next_u64() % vocab as u64) as u32).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn first_difference(a: &[f32], b: &[f32], vocab: usize) -> String {
    match a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()) {
        Some(i) => format!("position {} logit {}: batched {} replay {}", i / vocab, i % vocab, a[i], b[i]),
        None => format!("lengths {} and {}", a.len(), b.len()),
    }
}

fn check(source: &ModelSource, what: &str) {
    check_in(source, what, Precision::F32)
}

pub(crate) fn check_in(source: &ModelSource, what: &str, precision: Precision) {
    let mut engine =
        Engine::new(dev(), source, EngineOptions { max_ctx: 512, precision, ..EngineOptions::default() }).unwrap();
    let vocab = engine.model.config().vocab_size;
    for (seed, len, chunk) in [(1u64, 37usize, 8usize), (2, 64, 64), (3, 100, 33), (4, 5, 16), (5, 129, 128)] {
        let p = prompt(seed, len, vocab);
        engine.reset().unwrap();
        let batched = engine.prefill(&p, PrefillMode::Batched { chunk }, Logits::All).unwrap();
        assert_eq!(
            (batched.rows_batched, batched.chunks),
            (len, len.div_ceil(chunk)),
            "{what}: rows and chunks of the batched path"
        );
        engine.reset().unwrap();
        let replay = engine.prefill(&p, PrefillMode::Replay, Logits::All).unwrap();
        assert_eq!(replay.rows_batched, 0);
        assert_eq!(batched.logits.len(), len * vocab);
        assert!(
            bits(&batched.logits) == bits(&replay.logits),
            "{what}: prompt {len} chunk {chunk}: {}",
            first_difference(&batched.logits, &replay.logits, vocab)
        );
        let a = engine.generate_with(&p, 12, PrefillMode::Batched { chunk }).unwrap();
        let b = engine.generate_with(&p, 12, PrefillMode::Replay).unwrap();
        assert_eq!(a, b, "{what}: greedy tokens after prompt {len} chunk {chunk}");
        println!("{what}: prompt {len} chunk {chunk}: {} logits byte-equal, 12 greedy tokens equal", len * vocab);
    }
    // A prompt fed in two batched calls, then decoded: the same as one replay.
    let p = prompt(9, 70, vocab);
    engine.reset().unwrap();
    engine.prefill(&p[..41], PrefillMode::Batched { chunk: 16 }, Logits::Last).unwrap();
    let split = engine.prefill(&p[41..], PrefillMode::Batched { chunk: 16 }, Logits::Last).unwrap();
    engine.reset().unwrap();
    let whole = engine.prefill(&p, PrefillMode::Replay, Logits::Last).unwrap();
    assert!(bits(&split.logits) == bits(&whole.logits), "{what}: a prompt split over two prefill calls");
}

#[test]
fn batched_prefill_is_replay_from_safetensors() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    check(&ModelSource::Hf(ck), "tiny safetensors");
}

#[test]
fn batched_prefill_is_replay_from_q8_0_gguf() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let bytes = gguf_from(&ck.config, &canonical_f32(&ck), &|shape| pick_type(TensorType::Q8_0, shape));
    check(&ModelSource::Gguf(GgufFile::from_vec(bytes).unwrap()), "tiny Q8_0 GGUF");
}

#[test]
fn bad_prefill_input_is_an_error() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let mut engine =
        Engine::new(dev(), &ModelSource::Hf(ck), EngineOptions { max_ctx: 16, ..EngineOptions::default() }).unwrap();
    let e = engine.prefill(&[], PrefillMode::Batched { chunk: 4 }, Logits::Last).unwrap_err().to_string();
    assert!(e.contains("expected at least one token"), "{e}");
    let e = engine.prefill(&[1, 2], PrefillMode::Batched { chunk: 0 }, Logits::Last).unwrap_err().to_string();
    assert!(e.contains("chunk size") && e.contains("at least 1"), "{e}");
    let e = engine.prefill(&[1, 5000], PrefillMode::Batched { chunk: 4 }, Logits::Last).unwrap_err().to_string();
    assert!(e.contains("5000") && e.contains("1000"), "{e}");
    let e = engine.prefill(&[1; 17], PrefillMode::Batched { chunk: 4 }, Logits::Last).unwrap_err().to_string();
    assert!(e.contains("context full"), "{e}");
    assert_eq!(engine.position(), 0, "a refused prefill feeds nothing");
}
