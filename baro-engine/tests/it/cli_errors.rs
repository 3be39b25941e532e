//! Mistakes a user can make on the generation CLI end with `error: ...` (what was expected,
//! what was found) and exit status 1, before any slow step, never a panic.

use std::process::Command;

fn fails(args: &[&str], wanted: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_baro-engine")).args(args).output().expect("run the baro-engine binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "baro-engine {args:?}: expected exit status 1, found {}; stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.lines().any(|l| l.starts_with("error: ")),
        "baro-engine {args:?}: no line of stderr starts with `error: `:\n{stderr}"
    );
    for w in wanted {
        assert!(stderr.contains(w), "baro-engine {args:?}: expected {w:?} in stderr, found:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn unknown_target_names_the_possible_values() {
    fails(&["--target", "tpu"], &["'tpu'", "--target", "host, cuda, hip"]);
}

#[test]
fn unavailable_target_names_what_was_found() {
    for kind in ["cuda", "hip"] {
        let available = baro_dsl::runtime::Device::open(kind.parse().expect("a kind"), 0).is_ok();
        if !available {
            fails(
                &["--target", kind],
                &[&format!("--target {kind}: expected an available {kind} device"), "available targets: host"],
            );
        }
    }
}

#[test]
fn missing_model_path() {
    fails(&["--model", "/nonexistent/model.gguf"], &["--model /nonexistent/model.gguf", "found nothing at that path"]);
}

#[test]
fn model_file_that_is_not_gguf() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    fails(&["--model", path], &["not a gguf file", "expected magic"]);
}

#[test]
fn bad_sampling_values() {
    fails(&["--temperature", "-1"], &["--temperature: expected a finite value >= 0, found -1"]);
    fails(&["--temperature", "warm"], &["'warm'", "--temperature"]);
    fails(&["--top-p", "0"], &["--top-p: expected a value in (0, 1], found 0"]);
    fails(&["--max-tokens", "0"], &["--max-tokens: expected at least 1, found 0"]);
}

#[test]
fn text_prompt_for_a_model_without_a_fitting_tokenizer() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/tiny");
    fails(&["--model", dir, "--prompt", "hello"], &["expected the prompt as ids (--prompt-ids 1,2,3), found text"]);
}

#[test]
fn prompt_id_outside_the_vocabulary() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/tiny");
    fails(
        &["--model", dir, "--prompt-ids", "1,5000"],
        &["token 5000: expected an id below the model's vocabulary size 1000"],
    );
}

/// The built-in model's vocabulary is known before it is built: a bad id is reported at once.
#[test]
fn prompt_id_outside_the_builtin_vocabulary_fails_before_building() {
    let started = std::time::Instant::now();
    fails(&["--prompt-ids", "1,999999"], &["token 999999: expected an id below the model's vocabulary size 248320"]);
    fails(&["--prefill-chunk", "0"], &["--prefill-chunk: expected at least 1 token per chunk, found 0"]);
    assert!(
        started.elapsed().as_secs() < 20,
        "the flags were checked only after a slow step ({:?})",
        started.elapsed()
    );
}
