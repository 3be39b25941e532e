//! The generation CLI end to end, through the built `baro-engine` binary: the no-argument run
//! (embedded random model, real tokenizer) completes and reports its target and speeds; a seed
//! fixes the text; `--model` on the tiny fixture (no tokenizer: ids in, ids out) reproduces
//! `transformers`' greedy tokens.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-engine")).args(args).output().expect("run the baro-engine binary")
}

fn stdout_ok(args: &[&str]) -> String {
    let out = run(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "baro-engine {args:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
}

/// The generated text: between the blank line after the header and the blank line before the
/// speed report.
fn generated(stdout: &str) -> &str {
    let start = stdout.find("\n\n").expect("a blank line after the header") + 2;
    let end = stdout.rfind("\n\nprompt: ").expect("the speed report after the text");
    &stdout[start..end]
}

#[test]
fn no_arguments_runs_the_default_model_and_reports_target_and_speed() {
    let out = stdout_ok(&[]);
    let target = out.lines().find(|l| l.starts_with("target: ")).unwrap_or_else(|| panic!("no target line in:\n{out}"));
    assert!(["target: host", "target: cuda", "target: hip"].iter().any(|t| target.starts_with(t)), "{target}");
    assert!(out.contains("model: built-in qwen35moe"), "{out}");
    assert!(out.contains("prompt: Explain in one sentence"), "{out}");
    let speeds: Vec<&str> = out.lines().filter(|l| l.contains(" tok/s")).collect();
    assert_eq!(speeds.len(), 2, "expected prompt and generation tok/s lines in:\n{out}");
    assert!(speeds[0].starts_with("prompt: ") && speeds[1].starts_with("generation: 32 tokens"), "{speeds:?}");
    assert!(out.contains("weights are random"), "{out}");
    assert!(!generated(&out).trim().is_empty(), "no generated text in:\n{out}");
}

#[test]
fn the_same_seed_gives_the_same_text_and_another_seed_another() {
    let args = |seed: &'static str| {
        ["--max-tokens", "8", "--seed", seed, "--temperature", "1.0", "--top-k", "0", "--min-p", "0"]
    };
    let a = stdout_ok(&args("7"));
    let b = stdout_ok(&args("7"));
    let c = stdout_ok(&args("8"));
    assert_eq!(generated(&a), generated(&b), "seed 7 twice gave different text");
    assert!(!generated(&a).is_empty());
    assert_ne!(generated(&a), generated(&c), "seeds 7 and 8 gave the same text: the seed is ignored");
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().expect("an id list").iter().map(|t| t.as_u64().expect("an id") as u32).collect()
}

#[test]
fn tiny_fixture_without_tokenizer_takes_ids_and_matches_transformers_greedy_tokens() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).expect("index.json")).expect("json");
    let prompt =
        index["prompts"].as_array().expect("prompts").iter().max_by_key(|p| ids(&p["tokens"]).len()).expect("a prompt");
    let (tokens, greedy) = (ids(&prompt["tokens"]), ids(&prompt["greedy"]));
    assert!(tokens.len() > 1, "want a multi-token prompt");
    let list = tokens.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
    let n = greedy.len().to_string();
    let out = run(&[
        "--model",
        dir.to_str().expect("utf-8 path"),
        "--prompt-ids",
        &list,
        "--temperature",
        "0",
        "--max-tokens",
        &n,
        "--target",
        "host",
    ]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("no tokenizer") && stderr.contains("--prompt-ids"),
        "expected the no-tokenizer warning, found:\n{stderr}"
    );
    let got: Vec<u32> = generated(&stdout).split_whitespace().map(|t| t.parse().expect("an id")).collect();
    assert_eq!(got, greedy, "the CLI's greedy ids differ from transformers'");
    assert!(stdout.contains(&format!("generation: {n} tokens")), "{stdout}");
}
