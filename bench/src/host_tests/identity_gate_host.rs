//! The identity gate on the host JIT with the tiny fixture, as CI runs it: the default 26
//! prompts (1 to 4096 tokens, chunk sizes that do not divide them) give byte-identical
//! logits at every prompt position and 64 identical greedy tokens after, with exactly the two
//! prompts that cannot exercise a rows kernel reported NOT EXERCISED; the same gate with the
//! reordered attention (the negative control) diverges and keeps the teacher-forced agreement
//! above the bar in `bench/NOTES.md`; a staged engine (experts in host memory, 2 decode slots)
//! produces the resident engine's gate digest.

use std::path::PathBuf;

use crate::identity::{self, Case, GateReport, Verdict};
use baro_dsl::runtime::{Device, DeviceKind};
use baro_engine::engine::staging::MemoryMode;
use baro_engine::engine::{Engine, EngineOptions, ModelSource};

const SEED: u64 = 0x6261726f;

fn source() -> ModelSource {
    ModelSource::open(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../baro-engine/fixtures/tiny"))
        .expect("the tiny fixture")
}

fn engine(source: &ModelSource, max_ctx: usize, vram_budget: Option<u64>) -> Engine {
    let device = Device::open(DeviceKind::Host, 0).expect("the host JIT");
    Engine::new(device, source, EngineOptions { max_ctx, vram_budget, ..EngineOptions::default() })
        .expect("the tiny engine")
}

fn gate(engine: &mut Engine, cases: &[Case], greedy: usize) -> GateReport {
    let report = identity::run(engine, cases, greedy, SEED, &mut |r| println!("{}", identity::case_line(r)))
        .expect("the gate runs");
    println!("{}", report.summary());
    report
}

#[test]
fn default_prompts_are_byte_identical_and_short_ones_not_exercised() {
    let cases = identity::default_cases();
    assert!(cases.len() >= 24);
    for len in [128, 512, 1024, 4096] {
        assert!(
            cases.iter().any(|c| c.len == len && c.len > c.chunk),
            "a {len}-token prompt crossing a chunk boundary"
        );
    }
    let longest = cases.iter().map(|c| c.len).max().unwrap();
    let mut e = engine(&source(), longest + 65, None);
    let report = gate(&mut e, &cases, 64);
    assert_eq!(report.failed(), 0, "{}", report.summary());
    let not_exercised: Vec<Case> =
        report.cases.iter().filter(|c| c.verdict == Verdict::NotExercised).map(|c| c.case).collect();
    // A prompt of one token, and one prefilled in chunks of one row: nothing else.
    assert_eq!(not_exercised, vec![Case { len: 1, chunk: 512 }, Case { len: 5, chunk: 1 }]);
    assert_eq!(report.passed(), cases.len() - 2);
    for c in &report.cases {
        assert_eq!(c.differing_positions, 0, "{:?}", c.case);
        assert!(
            c.greedy > 0 && c.greedy_equal == c.greedy && c.greedy_logits_equal == c.greedy,
            "{:?}: greedy tokens and their logits",
            c.case
        );
        assert_eq!(c.top1_agree, c.case.len, "{:?}", c.case);
    }
    assert_eq!(report.max_rel_delta, Some(0.0));
}

/// The bar written in `bench/NOTES.md` before the first negative-control run: top-1 agreement
/// at least 0.99 of prompt positions, max |Δ| / max |logit| at most 1e-4.
#[test]
fn reordered_attention_is_detected_and_agreement_meets_the_bar() {
    let cases: Vec<Case> = identity::default_cases().into_iter().filter(|c| c.len <= 512).collect();
    let mut e = engine(&source(), 512 + 9, None);
    e.model.set_reordered_attention(true);
    let report = gate(&mut e, &cases, 8);
    assert!(report.failed() > 0, "the gate must detect the reordered attention: {}", report.summary());
    // Attention over one or two positions sums one or two terms, which no order changes: the
    // first differing position is the third.
    for c in report.cases.iter().filter(|c| c.case.len >= 3) {
        assert_eq!(c.verdict, Verdict::Fail { position: Some(2) }, "{:?}", c.case);
    }
    let agree = report.top1_agree() as f64 / report.positions() as f64;
    let delta = report.max_rel_delta.expect("tiny logits are kept");
    println!("teacher-forced agreement {agree:.4}, max |Δ| / max |logit| {delta:.3e}");
    assert!(agree >= 0.99, "top-1 agreement {agree} below the 0.99 bar");
    assert!(delta > 0.0 && delta <= 1e-4, "max |Δ| / max |logit| {delta} outside (0, 1e-4]");
}

#[test]
fn staged_engine_has_the_resident_gate_digest() {
    let cases: Vec<Case> =
        [(33, 32), (200, 64), (513, 512)].into_iter().map(|(len, chunk)| Case { len, chunk }).collect();
    let src = source();
    let mut resident = engine(&src, 513 + 9, None);
    assert_eq!(resident.model.memory_plan().mode, MemoryMode::Resident);
    let want = gate(&mut resident, &cases, 8);
    let budget = resident.model.memory_plan().needs.staged(2);
    drop(resident);
    let mut staged = engine(&src, 513 + 9, Some(budget));
    assert!(
        matches!(staged.model.memory_plan().mode, MemoryMode::Staged { slots: 2, .. }),
        "{:?}",
        staged.model.memory_plan().mode
    );
    let got = gate(&mut staged, &cases, 8);
    assert_eq!(got.failed(), 0, "{}", got.summary());
    assert_eq!(got.digest_hex(), want.digest_hex(), "staged and resident logits differ");
}
