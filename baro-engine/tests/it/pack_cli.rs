//! The `baro-engine synth-pack` command line (and the pack-only `baro-synth-pack`): a tiny pack
//! written through the binary opens and matches the library's bytes; user errors exit nonzero with one `error:` line and no
//! panic; `--help` documents the subcommand and its options.

use std::path::PathBuf;
use std::process::{Command, Output};

use baro_engine::model::GgufFile;

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-engine")).args(args).output().unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("baro-pack-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn synth_pack_writes_a_tiny_pack() {
    let dir = temp_dir("ok");
    let path = dir.join("tiny.gguf");
    let out = baro(&[
        "synth-pack",
        "--out",
        path.to_str().unwrap(),
        "--config",
        "tiny",
        "--seed",
        "9",
        "--mix",
        "q8_0",
        "--threads",
        "3",
    ]);
    assert!(out.status.success(), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("q8_0 mix, seed 9"), "{stdout}");
    assert!(stdout.contains("Q8_0") && stdout.contains("F32"), "histogram: {stdout}");
    // stderr is not a terminal here: the progress bar stays quiet.
    assert_eq!(text(&out.stderr), "");
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.tensors.len(), baro_engine::model::gguf_tensors(&baro_engine::pack::presets::tiny()).len());

    let plan =
        baro_engine::pack::plan(&baro_engine::pack::presets::tiny(), baro_engine::pack::QuantMix::Q8_0, 9).unwrap();
    let lib_path = dir.join("lib.gguf");
    baro_engine::pack::write_pack(
        &plan,
        &lib_path,
        &baro_engine::pack::WriteOptions { seed: 9, threads: 1 },
        &mut |_| {},
    )
    .unwrap();
    assert!(
        std::fs::read(&path).unwrap() == std::fs::read(&lib_path).unwrap(),
        "the binary and the library write the same bytes"
    );

    // The pack-only binary (no LLVM) takes the same arguments and writes the same bytes.
    let alone = dir.join("alone.gguf");
    let out = Command::new(env!("CARGO_BIN_EXE_baro-synth-pack"))
        .args(["--out", alone.to_str().unwrap(), "--config", "tiny", "--seed", "9", "--mix", "q8_0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read(&path).unwrap() == std::fs::read(&alone).unwrap(), "baro-synth-pack writes the same bytes");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn user_errors_exit_nonzero_without_a_panic() {
    let dir = temp_dir("errors");
    let missing = dir.join("missing/dir/pack.gguf");
    let bad_json = dir.join("config.json");
    std::fs::write(&bad_json, r#"{"model_type": "llama"}"#).unwrap();
    let cases: [(Vec<&str>, &str); 5] = [
        (vec!["synth-pack", "--out", missing.to_str().unwrap(), "--config", "tiny"], "does not exist"),
        (vec!["synth-pack", "--out", "x.gguf", "--config", "/no/such/config.json"], "cannot read config"),
        (vec!["synth-pack", "--out", "x.gguf", "--config", bad_json.to_str().unwrap()], "unknown architecture"),
        (vec!["synth-pack", "--out", "x.gguf", "--config", "tiny", "--threads", "0"], "--threads"),
        (vec!["synth-pack", "--out", "x.gguf", "--mix", "q2_k"], "q2_k"),
    ];
    for (args, needle) in cases {
        let out = baro(&args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains("error") && stderr.contains(needle), "{args:?}: stderr {stderr:?}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(!std::path::Path::new("x.gguf").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_documents_the_subcommand() {
    let out = baro(&["--help"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("synth-pack") && stdout.contains("demonstration"), "{stdout}");
    let out = baro(&["synth-pack", "--help"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    for needle in ["--out", "--config", "--seed", "--mix", "--threads", "community", "Q4_K", "PATH.tmp"] {
        assert!(stdout.contains(needle), "synth-pack --help lacks {needle}: {stdout}");
    }
}
