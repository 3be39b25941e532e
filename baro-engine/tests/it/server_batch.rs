//! Batch invariance of the server: 16 requests of mixed prompt lengths (1 to 30 tokens, so
//! some cross several prefill chunks), output lengths and samplers (greedy, seeded top-k /
//! top-p, repetition penalty), sent together in a burst of 8 and then one by one as the
//! previous one's first token arrives, produce the same token ids, log-probabilities and top
//! log-probabilities, bit for bit, as the same requests sent one at a time. Two greedy ones are
//! also checked against the plain m = 1 engine loop run by hand. No timing is asserted: the
//! arrivals are ordered by events, and the test checks (`/metrics`) that the server did decode
//! several sequences in one batched step through the rows kernels, and fed every prompt token
//! through batched prefill.

use crate::server_common;

use std::net::SocketAddr;

use baro_dsl::runtime::Device;
use baro_engine::engine::{Engine, EngineOptions};
use baro_engine::sampling;
use baro_engine::server::logprob;
use baro_engine::tokenizer::Tokenizer;
use serde_json::{json, Value};
use server_common::{metric, post, post_json, start};

/// One token as the client saw it: id, logprob bits, and the top ones (text → bits, sorted).
type Token = (u64, u64, Vec<(String, u64)>);

struct Req {
    prompt: Vec<u64>,
    max_tokens: usize,
    sampling: Value,
}

fn requests() -> Vec<Req> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    (0..16)
        .map(|i| {
            let len = [1, 30, 3, 17, 8, 9, 25, 2, 12, 5, 16, 29, 4, 11, 7, 20][i];
            let prompt = (0..len).map(|_| 100 + next(150_000)).collect();
            let sampling = match i % 4 {
                0 => json!({ "temperature": 0 }),
                1 => json!({ "temperature": 0.9, "top_k": 40, "seed": 1000 + i }),
                2 => json!({ "temperature": 1.2, "top_p": 0.8, "min_p": 0.01, "seed": 7 * i }),
                _ => json!({ "temperature": 0.7, "repetition_penalty": 1.3, "seed": i }),
            };
            Req { prompt, max_tokens: 2 + (i * 5) % 7, sampling }
        })
        .collect()
}

fn body(r: &Req, stream: bool) -> Value {
    let mut v = json!({ "prompt": r.prompt, "max_tokens": r.max_tokens, "logprobs": 2, "return_tokens_as_token_ids": true, "stream": stream });
    if let (Some(v), Some(s)) = (v.as_object_mut(), r.sampling.as_object()) {
        v.extend(s.clone());
    }
    v
}

/// The tokens of a completions `logprobs` object.
fn tokens(lp: &Value) -> Vec<Token> {
    let ids = lp["tokens"].as_array().expect("tokens");
    let lps = lp["token_logprobs"].as_array().expect("token_logprobs");
    let tops = lp["top_logprobs"].as_array().expect("top_logprobs");
    ids.iter()
        .zip(lps)
        .zip(tops)
        .map(|((id, l), top)| {
            let id =
                id.as_str().and_then(|s| s.strip_prefix("token_id:")).expect("an id token").parse().expect("an id");
            let mut top: Vec<(String, u64)> = top
                .as_object()
                .expect("a map")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_f64().expect("a logprob").to_bits()))
                .collect();
            top.sort();
            (id, l.as_f64().expect("a logprob").to_bits(), top)
        })
        .collect()
}

async fn one_at_a_time(addr: SocketAddr, r: &Req) -> Vec<Token> {
    let (status, v) = post_json(addr, "/v1/completions", &body(r, false)).await;
    assert_eq!(status, 200, "{v}");
    tokens(&v["choices"][0]["logprobs"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_give_the_bytes_of_the_same_requests_one_at_a_time() {
    let mut config = server_common::config(32);
    config.scheduler.prefill_chunk = 8;
    config.scheduler.prefix_cache = 0;
    let addr = start(config).await.addr;
    let reqs = requests();
    let mut alone = Vec::new();
    for r in &reqs {
        alone.push(one_at_a_time(addr, r).await);
    }
    assert_eq!(metric(addr, "baro_decode_batch_peak").await, 1.0, "one at a time should decode one sequence per step");
    assert_eq!(
        metric(addr, "baro_decode_batched_steps_total").await,
        0.0,
        "one at a time: no decode step carries two rows"
    );
    let prompt_tokens = metric(addr, "baro_prompt_tokens_total").await;
    assert!(prompt_tokens > 0.0);
    assert_eq!(
        metric(addr, "baro_prompt_tokens_batched_total").await,
        prompt_tokens,
        "every prompt token goes through batched prefill"
    );

    // Together, streamed: a burst of 8, then each after the previous one's first token.
    let mut firsts = Vec::new();
    let mut tasks = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        if i >= 8 {
            let first: tokio::sync::oneshot::Receiver<()> = firsts.remove(0);
            first.await.expect("the previous request streamed a token");
        } else if i > 0 {
            firsts.remove(0);
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        firsts.push(rx);
        let b = body(r, true).to_string();
        tasks.push(tokio::spawn(async move {
            let mut resp = post(addr, "/v1/completions", &b).await;
            assert_eq!(resp.status, 200);
            let mut tx = Some(tx);
            let mut out = Vec::new();
            while let Some(data) = resp.sse().await {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
                if data == "[DONE]" {
                    break;
                }
                let v: Value = serde_json::from_str(&data).expect("an event");
                let lp = &v["choices"][0]["logprobs"];
                if !lp.is_null() {
                    out.extend(tokens(lp));
                }
            }
            out
        }));
    }
    let mut together = Vec::new();
    for t in tasks {
        together.push(t.await.expect("a request task"));
    }
    let peak = metric(addr, "baro_decode_batch_peak").await;
    eprintln!("decode batch peak: {peak} sequences");
    assert!(peak >= 2.0, "the concurrent requests never shared a decode step (peak {peak})");
    let (steps, rows) =
        (metric(addr, "baro_decode_batched_steps_total").await, metric(addr, "baro_decode_batched_rows_total").await);
    eprintln!("batched decode steps: {steps}, rows in them: {rows}");
    assert!(
        steps >= 1.0 && rows >= 2.0 * steps,
        "the shared decode steps ran through the rows kernels together ({steps} steps, {rows} rows)"
    );
    for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a.len(), reqs[i].max_tokens.min(a.len()));
        assert!(!a.is_empty());
        assert_eq!(a, t, "request {i}: concurrent tokens or logprobs differ from the request alone");
    }

    // The greedy ones against the plain engine loop: feed the prompt, argmax, feed it back.
    let mut engine = Engine::new(
        Device::host().expect("host"),
        &server_common::source(),
        EngineOptions { max_ctx: 256, ..EngineOptions::default() },
    )
    .expect("engine");
    let n_ids = Tokenizer::qwen35().expect("tokenizer").n_ids();
    for i in [0, 4] {
        let r = &reqs[i];
        engine.reset().expect("reset");
        let mut logits = Vec::new();
        for &t in &r.prompt {
            logits = engine.step(t as u32).expect("step");
        }
        let mut by_hand = Vec::new();
        for k in 0..r.max_tokens {
            logits[n_ids..].fill(f32::NEG_INFINITY);
            let id = sampling::greedy(&logits).expect("greedy");
            let (lp, _) = logprob::logprobs(&logits, id, 0);
            by_hand.push((u64::from(id), lp.to_bits()));
            if k + 1 < r.max_tokens {
                logits = engine.step(id).expect("step");
            }
        }
        let served: Vec<(u64, u64)> = alone[i].iter().map(|t| (t.0, t.1)).collect();
        assert_eq!(served, by_hand, "request {i}: the server differs from the m=1 engine loop");
    }
}
