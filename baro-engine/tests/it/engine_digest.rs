//! Byte identity of the decode path across targets: the logits of every position of every
//! fixture prompt (prompt tokens, then the fixture's greedy tokens), hashed with SHA-256 and
//! compared with the digest committed beside the fixture. The digest is written on the host
//! (`BARO_BLESS=1`); the same test run with `BARO_TEST_DEVICE=cuda` on a GPU proves that
//! device computes the host's bits exactly, since a single differing bit changes the hash.

use crate::common;

use common::dev;

use baro_engine::engine::{Engine, EngineOptions, ModelSource};
use baro_engine::model::HfCheckpoint;
use common::fixture;
use sha2::{Digest, Sha256};

fn digest(name: &str) -> (String, usize) {
    let dir = fixture(name);
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
    let source = ModelSource::Hf(HfCheckpoint::open(&dir).unwrap());
    let mut engine = Engine::new(dev(), &source, EngineOptions::default()).unwrap();
    let mut h = Sha256::new();
    let mut n = 0;
    for p in index["prompts"].as_array().unwrap() {
        let ids = |v: &serde_json::Value| {
            v.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect::<Vec<_>>()
        };
        engine.reset().unwrap();
        for t in ids(&p["tokens"]).into_iter().chain(ids(&p["greedy"])) {
            for v in engine.step(t).unwrap() {
                h.update(v.to_le_bytes());
                n += 1;
            }
        }
    }
    (h.finalize().iter().map(|b| format!("{b:02x}")).collect(), n)
}

fn check(name: &str) {
    let (got, n) = digest(name);
    let path = fixture(name).join("baro_logits.sha256");
    if std::env::var("BARO_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{got}\n")).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (write it on the host with BARO_BLESS=1)", path.display()));
    println!(
        "{name}: {n} logits, sha256 {got} on {}",
        std::env::var("BARO_TEST_DEVICE").unwrap_or_else(|_| "host".into())
    );
    assert_eq!(
        got,
        want.trim(),
        "{name}: the decode path's logits differ in at least one bit from the committed host digest"
    );
}

#[test]
fn tiny_logits_digest_equals_host() {
    check("tiny");
}

#[test]
fn vocab_logits_digest_equals_host() {
    check("vocab");
}
