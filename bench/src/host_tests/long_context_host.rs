//! The long-context check on the host JIT with the tiny fixture, at test size: a 300-token
//! prompt in chunks of 32, batched prefill against replay over its last two chunk boundaries
//! (logits at every position of the window, the state after, greedy tokens) byte for byte,
//! with the prefix copied and with it prefilled again (`fresh`); the check fails at the right
//! position when the replayed tail differs by one token, and when batched attention sums in
//! another order (the negative control). The needle prompt is exactly as long as asked, with
//! the needle at a sentence boundary near its depth.

use std::path::PathBuf;

use crate::identity::sequence;
use crate::long_context::{self, needle_prompt, replay_start, Check, Report, Verdict};
use baro_dsl::runtime::{Device, DeviceKind};
use baro_engine::engine::{Engine, EngineOptions, ModelSource};
use baro_engine::tokenizer::{Specials, Tokenizer};

const LEN: usize = 300;
const CHUNK: usize = 32;

fn engine() -> Engine {
    let source = ModelSource::open(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../baro-engine/fixtures/tiny"))
        .expect("the tiny fixture");
    let device = Device::open(DeviceKind::Host, 0).expect("the host JIT");
    Engine::new(device, &source, EngineOptions { max_ctx: LEN + 8, ..EngineOptions::default() })
        .expect("the tiny engine")
}

fn check(fresh: bool) -> Check {
    Check { chunk: CHUNK, boundaries: 2, margin: 4, greedy: 4, fresh }
}

fn run(engine: &mut Engine, batched: &[u32], replay: &[u32], fresh: bool) -> Report {
    let r = long_context::run(engine, batched, replay, check(fresh), &mut |s| println!("{s}")).expect("the check runs");
    println!("{}", r.line());
    r
}

#[test]
fn the_window_starts_a_margin_before_the_last_boundaries() {
    // The last chunk of 300 tokens in chunks of 32 starts at 288, the one before at 256: the
    // window starts 4 positions before that.
    assert_eq!(replay_start(300, 32, 2, 4), 252);
    assert_eq!(replay_start(300, 32, 2, 0), 256);
    assert_eq!(replay_start(300, 32, 1, 4), 284);
    assert_eq!(replay_start(288, 32, 2, 4), 220);
    assert_eq!(replay_start(289, 32, 2, 4), 252);
    assert_eq!(replay_start(100_000, 512, 2, 4), 99_324);
    assert_eq!(replay_start(100_000, 512, 1, 4), 99_836);
    assert_eq!(replay_start(40, 32, 2, 4), 0);
    assert_eq!(replay_start(1, 512, 2, 4), 0);
}

#[test]
fn batched_prefill_equals_replay_over_the_last_boundaries() {
    let mut e = engine();
    let vocab = e.model.config().vocab_size;
    let seq = sequence(7, LEN, vocab);
    for fresh in [false, true] {
        let r = run(&mut e, &seq, &seq, fresh);
        assert_eq!(r.verdict(), Verdict::Pass, "fresh {fresh}: {}", r.line());
        assert_eq!(r.start, 252);
        assert_eq!(r.batched.digests.len(), LEN - 252);
        // Every layer's two buffers: KV rows for attention, conv ring and delta rule for GDN.
        assert_eq!(r.batched.state.len(), 2 * e.model.config().n_layers);
        assert_eq!(r.batched.greedy.len(), 4);
        assert!(r.line().contains("PASS") && r.line().contains("chunk boundaries inside: 2"), "{}", r.line());
    }
}

#[test]
fn a_different_tail_or_reordered_attention_fails() {
    let mut e = engine();
    let vocab = e.model.config().vocab_size as u32;
    let seq = sequence(7, LEN, vocab as usize);
    let mut other = seq.clone();
    other[270] = (other[270] + 1) % vocab;
    let r = run(&mut e, &seq, &other, false);
    match r.verdict() {
        Verdict::Fail { position, state, .. } => {
            // The logits after position 270 are the first to see the changed token.
            assert_eq!(position, Some(270));
            assert!(state.is_some(), "the state after a different tail differs");
        }
        v => panic!("a different replayed tail must fail, found {v:?}"),
    }
    assert!(r.line().contains("FAIL") && r.line().contains("first differing position 270"), "{}", r.line());

    e.model.set_reordered_attention(true);
    let r = run(&mut e, &seq, &seq, false);
    assert!(
        matches!(r.verdict(), Verdict::Fail { position: Some(p), .. } if p >= r.start),
        "the reordered attention must be caught: {}",
        r.line()
    );
}

#[test]
fn the_needle_prompt_has_the_asked_length_and_the_fact_at_its_depth() {
    let t = Tokenizer::qwen35().expect("the built-in tokenizer");
    for (len, depth) in [(2000, 0.1), (2000, 0.5), (3001, 0.9)] {
        let p = needle_prompt(&t, len, depth, 7294).expect("a needle prompt");
        assert_eq!(p.tokens.len(), len);
        assert_eq!(p.answer, "7294");
        let before = t.decode(&p.tokens[..p.needle_at], Specials::Without).expect("decode");
        let after = t.decode(&p.tokens[p.needle_at..], Specials::Without).expect("decode");
        assert!(after.starts_with(" The secret number is 7294."), "{}", &after[..60]);
        assert!(after.ends_with("The secret number is"), "the question ends the prompt");
        // A user turn (Qwen's chat tokens), the needle at a sentence boundary within one
        // sentence (< 30 tokens) of the depth, the answer's start in the assistant's turn.
        let all = t.decode(&p.tokens, Specials::With).expect("decode");
        assert!(all.starts_with("<|im_start|>user\n The river"), "{}", &all[..40]);
        assert!(all.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\nThe secret number is"));
        assert!(before.ends_with('.'), "{}", &before[before.len() - 20..]);
        let at = p.needle_at as f64 / len as f64;
        assert!((at - depth).abs() < 0.03, "needle at {at}, asked {depth}");
    }
    let e = needle_prompt(&t, 10, 0.5, 1).unwrap_err();
    assert!(e.contains("expected at least"), "{e}");
}
