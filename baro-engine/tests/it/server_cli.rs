//! `baro-engine serve` as a user runs it: the built binary on the embedded default model,
//! port 0 on loopback; it prints the address it bound before loading the model, then a ready
//! line; answers `/health`, a chat completion and an Ollama generate, writes one log line per
//! request to stderr, and is then killed. A bad flag is refused before any slow step.

use crate::server_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;
use server_common::{get, post_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_binds_prints_its_address_and_answers_both_apis() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baro-engine"))
        .args(["serve", "--host", "127.0.0.1", "--port", "0", "--target", "host", "--max-tokens", "8"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start baro-engine serve");
    let stdout = child.stdout.take().expect("stdout");
    let lines = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("a line");
            let done = line.starts_with("ready on ");
            seen.push(line);
            if done {
                break;
            }
        }
        seen
    })
    .await
    .expect("reading stdout");
    // The port is bound before the model loads: the address comes first.
    assert!(lines.first().is_some_and(|l| l.starts_with("listening on http://")), "{lines:?}");
    let addr = lines
        .last()
        .and_then(|l| l.strip_prefix("ready on http://"))
        .unwrap_or_else(|| panic!("no address in {lines:?}"));
    let addr: std::net::SocketAddr = addr.parse().expect("an address");
    assert!(addr.ip().is_loopback());
    assert!(lines.iter().any(|l| l.starts_with("model: built-in qwen35moe")), "{lines:?}");

    let health = get(addr, "/health").await.text().await;
    assert!(health.contains("\"status\":\"ok\"") && health.contains("baro-builtin"), "{health}");
    let (status, v) = post_json(addr, "/v1/chat/completions", &json!({ "model": "baro-builtin", "messages": [{ "role": "user", "content": "hi" }], "max_tokens": 3, "seed": 1 })).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let (status, v) = post_json(
        addr,
        "/api/generate",
        &json!({ "model": "baro-builtin", "prompt": "hi", "stream": false, "options": { "num_predict": 9 } }),
    )
    .await;
    assert_eq!(status, 400, "the server's --max-tokens 8 should refuse 9: {v}");
    child.kill().expect("kill the server");
    let _ = child.wait();
    // One line per finished request, on stderr.
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("read stderr");
    let logged: Vec<&str> = stderr.lines().filter(|l| l.starts_with("request ")).collect();
    assert_eq!(logged.len(), 1, "{stderr}");
    let line = logged[0];
    for part in [
        "id=chatcmpl-",
        " route=/v1/chat/completions ",
        " generated_tokens=3 ",
        " ttft_ms=",
        " tok_s=",
        " finish=length",
    ] {
        assert!(line.contains(part), "{part:?} not in {line:?}");
    }
}

#[test]
fn a_zero_limit_is_refused_with_what_was_expected() {
    let out = Command::new(env!("CARGO_BIN_EXE_baro-engine"))
        .args(["serve", "--max-queue", "0", "--port", "0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: --max-queue: expected at least 1, found 0"), "{stderr}");
}

/// `serve` and `run` share flag names (`--max-context`, `--prefill-chunk`, `--vram-budget`,
/// `--expert-slots`); the old `serve` names stay accepted.
#[test]
fn serve_takes_the_run_flag_names_and_the_old_ones() {
    let cases: [(&[&str], &str); 5] = [
        (&["--max-context", "0"], "error: --max-context: expected at least 1, found 0"),
        (&["--ctx", "0"], "error: --max-context: expected at least 1, found 0"),
        (&["--prefill-chunk", "0"], "error: --prefill-chunk: expected at least 1, found 0"),
        (&["--expert-slots", "0"], "error: --expert-slots: expected at least the model's top-k, found 0"),
        (&["--vram-budget", "lots"], "--vram-budget"),
    ];
    for (flags, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_baro-engine"))
            .args(["serve", "--port", "0"])
            .args(flags)
            .output()
            .expect("run");
        assert_ne!(out.status.code(), Some(0), "{flags:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{flags:?}: expected {want:?} in\n{stderr}");
    }
}
