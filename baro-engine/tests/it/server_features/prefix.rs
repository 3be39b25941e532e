//! The block prefix cache on loopback with the embedded tiny model: requests that share a
//! system prompt (a whole-block prefix) start from the state saved at their longest shared
//! boundary, the hit rate shows in `/metrics`, and every output (token ids and
//! log-probabilities, bit for bit) equals that of a server with no prefix cache at all.

use std::net::SocketAddr;

use crate::server_common::{metric, post_json, start};
use serde_json::{json, Value};

/// One token: id and logprob bits.
fn tokens(v: &Value) -> Vec<(String, u64)> {
    let lp = &v["choices"][0]["logprobs"];
    let ids = lp["tokens"].as_array().expect("tokens");
    let lps = lp["token_logprobs"].as_array().expect("token_logprobs");
    ids.iter()
        .zip(lps)
        .map(|(id, l)| (id.as_str().expect("an id").to_string(), l.as_f64().expect("a logprob").to_bits()))
        .collect()
}

fn requests() -> Vec<Value> {
    // A 50-token "system prompt" shared by all, then a different question of 3 to 9 tokens;
    // the last request repeats the first.
    let system: Vec<u64> = (0..50).map(|i| 1000 + 37 * i).collect();
    let mut out: Vec<Value> = (0..12u64)
        .map(|q| {
            let mut prompt = system.clone();
            prompt.extend((0..3 + q % 7).map(|j| 20_000 + 101 * q + j));
            let sampling = if q % 2 == 0 { json!(0) } else { json!(0.9) };
            json!({ "prompt": prompt, "max_tokens": 3, "logprobs": 1, "return_tokens_as_token_ids": true, "temperature": sampling, "seed": q })
        })
        .collect();
    out.push(out[0].clone());
    out
}

async fn run(addr: SocketAddr) -> Vec<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for r in requests() {
        let (status, v) = post_json(addr, "/v1/completions", &r).await;
        assert_eq!(status, 200, "{v}");
        out.push(tokens(&v));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_system_prompt_is_served_from_saved_block_states_with_the_bytes_of_a_cold_run() {
    let mut cold = crate::server_common::config(8);
    cold.scheduler.prefix_cache = 0;
    let mut cached = cold.clone();
    (cached.scheduler.prefix_block, cached.scheduler.prefix_blocks) = (16, 8);
    let cold = start(cold).await.addr;
    let cached = start(cached).await.addr;
    let expected = run(cold).await;
    let got = run(cached).await;
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert!(!e.is_empty());
        assert_eq!(e, g, "request {i}: the cached server's tokens or logprobs differ from a cold run");
    }
    // The first request saves boundaries 16, 32, 48; every later one starts at 48.
    let (lookups, hits) =
        (metric(cached, "baro_prefix_cache_lookups_total").await, metric(cached, "baro_prefix_cache_hits_total").await);
    eprintln!("prefix cache: {hits} hits of {lookups} lookups");
    assert_eq!((lookups, hits), (13.0, 12.0));
    assert_eq!(metric(cached, "baro_prefix_cache_block_hits_total").await, 12.0);
    assert!((metric(cached, "baro_prefix_cache_hit_rate").await - 12.0 / 13.0).abs() < 1e-6);
    assert_eq!(metric(cached, "baro_prompt_tokens_cached_total").await, 12.0 * 48.0);
    assert_eq!(metric(cached, "baro_prefix_cache_block_saves_total").await, 3.0);
    assert_eq!(metric(cold, "baro_prefix_cache_hits_total").await, 0.0);
}
