//! The device-memory budget: sizes as users type them, the plan (resident when everything
//! fits, staged with as many slots as fit, never more than asked), and budgets too small for
//! any staged layout: an error naming the budget, what was needed and the minimum that works,
//! before any expert is uploaded, and the minimum itself works. The CLI flags say what they
//! expected on bad input and report the hit rate of a staged run.

use crate::common;

use std::process::Command;

use baro_engine::engine::staging::{format_bytes, parse_bytes, plan, MemoryMode, MemoryNeeds};
use baro_engine::engine::{ContextMemory, Engine, EngineError, EngineOptions, ModelSource, PrefillMode};
use baro_engine::model::HfCheckpoint;
use common::{dev, fixture};

#[test]
fn sizes_parse_with_binary_suffixes() {
    for (text, want) in [
        ("24G", 24u64 << 30),
        ("24g", 24 << 30),
        ("24GiB", 24 << 30),
        ("24GB", 24 << 30),
        ("512M", 512 << 20),
        ("1.5G", 3 << 29),
        ("0.5k", 512),
        ("2T", 2 << 40),
        ("1000", 1000),
        ("1000B", 1000),
        (" 8K ", 8192),
        (".25M", 1 << 18),
    ] {
        assert_eq!(parse_bytes(text), Ok(want), "{text}");
    }
}

#[test]
fn bad_sizes_say_what_was_expected() {
    for text in ["", "G", "24X", "-1G", "1..5G", "24 G B", "0", "0.0G", "99999999999T", "1e9"] {
        let e = parse_bytes(text).unwrap_err();
        assert!(e.starts_with("expected a size such as 24G, 512M or 1.5GiB"), "{text}: {e}");
        assert!(e.contains(&format!("found `{text}`")), "{text}: {e}");
    }
    assert!(parse_bytes("0").unwrap_err().ends_with("(zero bytes)"));
    assert!(parse_bytes("99999999999T").unwrap_err().ends_with("(too large)"));
}

#[test]
fn sizes_print_in_the_largest_whole_unit() {
    assert_eq!(format_bytes(24 << 30), "24.00 GiB");
    assert_eq!(format_bytes(1536 << 20), "1.50 GiB");
    assert_eq!(format_bytes(1023), "1023 B");
    assert_eq!(format_bytes(1 << 20), "1.00 MiB");
}

fn needs() -> MemoryNeeds {
    // 6 layers, 1000 bytes per expert (layer 1: 2000), 16 experts top-4, 50 000 fixed.
    MemoryNeeds { fixed: 50_000, per_expert: vec![1000, 2000, 1000, 1000, 1000, 1000], n_experts: 16, top_k: 4 }
}

#[test]
fn the_plan_is_resident_when_everything_fits_and_staged_with_what_fits_otherwise() {
    let n = needs();
    assert_eq!((n.all_experts(), n.slot_row(), n.staging()), (112_000, 7000, 64_000));
    assert_eq!(plan(None, n.clone(), 8).unwrap().mode, MemoryMode::Resident);
    assert_eq!(plan(Some(n.resident()), n.clone(), 8).unwrap().mode, MemoryMode::Resident);
    // 50 000 + 64 000 staging leaves 47 999 bytes: 6 slots of 7000.
    let just_under = plan(Some(n.resident() - 1), n.clone(), 8).unwrap();
    assert_eq!(just_under.mode, MemoryMode::Staged { slots: 6, asked: 8 });
    assert_eq!(just_under.device_bytes(), 50_000 + 64_000 + 6 * 7000);
    assert!(just_under.to_string().contains("6 expert slots per layer, 8 asked, the budget holds 6"), "{just_under}");
    let tight = plan(Some(n.staged(5) + 6999), n.clone(), 8).unwrap();
    assert_eq!(tight.mode, MemoryMode::Staged { slots: 5, asked: 8 });
    assert_eq!(plan(Some(n.staged(4)), n.clone(), 4).unwrap().mode, MemoryMode::Staged { slots: 4, asked: 4 });
    // More slots than experts are capped at the expert count.
    assert_eq!(plan(Some(n.resident() - 1), n.clone(), 100).unwrap().mode, MemoryMode::Staged { slots: 6, asked: 16 });
}

#[test]
fn a_budget_below_the_minimum_names_budget_need_and_minimum() {
    let n = needs();
    let minimum = n.staged(n.top_k);
    assert_eq!(plan(Some(minimum), n.clone(), 8).unwrap().mode, MemoryMode::Staged { slots: 4, asked: 8 });
    let e = plan(Some(minimum - 1), n.clone(), 8).unwrap_err();
    assert_eq!((e.budget, e.minimum, e.needed), (minimum - 1, minimum, n.staged(8)));
    assert_eq!(
        e.to_string(),
        "vram budget: expected at least 138.67 KiB (142000 bytes: non-expert weights, state and scratch 48.83 KiB + prefill staging of two whole layers 62.50 KiB + 4 expert slots per layer 27.34 KiB), found 138.67 KiB (141999 bytes); 8 slots per layer would need 166.02 KiB"
    );
    let e = plan(Some(1000), n, 8).unwrap_err();
    assert!(e.to_string().starts_with("vram budget: expected at least 138.67 KiB (142000 bytes: "), "{e}");
    assert!(e.to_string().contains("found 1000 B (1000 bytes)"), "{e}");
}

fn tiny() -> ModelSource {
    ModelSource::Hf(HfCheckpoint::open(&fixture("tiny")).unwrap())
}

fn engine(vram_budget: Option<u64>, expert_slots: usize) -> Result<Engine, EngineError> {
    Engine::new(dev(), &tiny(), EngineOptions { max_ctx: 64, vram_budget, expert_slots, ..EngineOptions::default() })
}

/// The rows scratch of a default prefill chunk is allocated at the first batched pass, not
/// with the model; the plan counts it from the start, so what is on the device after it is
/// allocated is still within the plan.
#[test]
fn the_plan_counts_the_prefill_chunk_scratch() {
    let e = engine(None, 64).unwrap();
    let chunk = ContextMemory::new(e.model.config(), 64, PrefillMode::DEFAULT_CHUNK).chunk_scratch;
    assert!(e.model.memory_plan().needs.fixed > chunk);
    let before = e.model.device().allocated_bytes();
    e.model.reserve_rows(PrefillMode::DEFAULT_CHUNK).unwrap();
    let after = e.model.device().allocated_bytes();
    assert_eq!(after - before, chunk);
    assert!(after <= e.model.memory_plan().device_bytes(), "{after} on the device, {}", e.model.memory_plan());
}

#[test]
fn the_engine_refuses_a_too_small_budget_and_runs_at_the_minimum() {
    let resident = engine(None, 64).unwrap();
    let n = resident.model.memory_plan().needs.clone();
    let cfg = resident.model.config().clone();
    assert!(n.fixed > 0 && n.per_expert.len() == cfg.n_layers);
    let minimum = n.staged(cfg.n_experts_used);
    let err = engine(Some(minimum - 1), 64).err().expect("a budget one byte short fails");
    let text = err.to_string();
    assert!(matches!(err, EngineError::Budget(_)), "{text}");
    assert!(text.contains(&format!("expected at least {}", format_bytes(minimum))), "{text}");
    assert!(text.starts_with("vram budget: expected at least"), "{text}");
    assert!(text.contains(&format!("found {} ({} bytes)", format_bytes(minimum - 1), minimum - 1)), "{text}");
    let mut at_min = engine(Some(minimum), 64).unwrap();
    assert_eq!(at_min.model.memory_plan().mode, MemoryMode::Staged { slots: cfg.n_experts_used, asked: cfg.n_experts });
    assert_eq!(at_min.model.memory_plan().device_bytes(), minimum);
    at_min.generate(&[1, 2, 3], 4).unwrap();
    let err = engine(Some(minimum), 1).err().expect("fewer slots than top-k");
    assert_eq!(
        err.to_string(),
        format!(
            "unsupported model: expert slots: expected at least the model's top-k ({}), found 1",
            cfg.n_experts_used
        )
    );
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_baro-engine")).args(args).output().expect("run the baro-engine binary")
}

#[test]
fn cli_budget_flags_check_their_input() {
    let tiny = fixture("tiny");
    let dir = tiny.to_str().unwrap();
    for (args, wanted) in [
        (
            vec!["--vram-budget", "24X"],
            "expected a size such as 24G, 512M or 1.5GiB (K, M, G, T: powers of 1024), found `24X`",
        ),
        (
            vec!["--model", dir, "--prompt-ids", "1,2", "--expert-slots", "1"],
            "--expert-slots: expected at least the model's top-k (2), found 1",
        ),
        (vec!["--model", dir, "--prompt-ids", "1,2", "--vram-budget", "1K"], "found 1.00 KiB (1024 bytes)"),
    ] {
        let out = cli(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(wanted), "{args:?}: expected {wanted:?} in:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_staged_cli_run_reports_the_plan_and_the_hit_rate() {
    // The CLI's KV cache holds the model's 4096 positions: plan with the same.
    let resident = Engine::new(dev(), &tiny(), EngineOptions { max_ctx: 4096, ..EngineOptions::default() }).unwrap();
    let budget = resident.model.memory_plan().needs.staged(3).to_string();
    drop(resident);
    let tiny = fixture("tiny");
    let args = [
        "--model",
        tiny.to_str().unwrap(),
        "--prompt-ids",
        "615,3,4",
        "--max-tokens",
        "6",
        "--temperature",
        "0",
        "--vram-budget",
        &budget,
        "--target",
        "host",
    ];
    let out = cli(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{}", stdout, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("memory: staged: "), "{stdout}");
    assert!(stdout.contains("3 expert slots per layer, 8 asked, the budget holds 3"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("expert cache: "))
        .unwrap_or_else(|| panic!("no cache line in:\n{stdout}"));
    // The 3 prompt tokens go through batched prefill (whole layers staged, no cache lookups);
    // the 6 generated tokens are decoded: 4 layers, top-2.
    assert!(line.starts_with("expert cache: 3 slots per layer, 48 lookups, "), "{line}");
    let staged = stdout
        .lines()
        .find(|l| l.starts_with("layer staging: "))
        .unwrap_or_else(|| panic!("no layer staging line in:\n{stdout}"));
    assert!(staged.contains("4 layers staged for prefill"), "{staged}");
}
