//! Both HTTP APIs against the embedded tiny model on loopback: OpenAI chat and completions,
//! streaming and not (the streamed pieces join to the non-streamed text, usage counts agree),
//! logprobs, stop strings, `/v1/models`; Ollama generate and chat, NDJSON and not, `/api/tags`;
//! `/health` and `/metrics`; and the prefix cache giving the same bytes as a cold run. One
//! server per test binary (the cache test has its own); every request carries a seed, so
//! every output is determined.

use crate::server_common;

use serde_json::{json, Value};
use server_common::{get, metric, post, post_json, shared};

fn chat_body(content: &str, seed: u64, extra: Value) -> Value {
    let mut v = json!({ "model": "tiny", "messages": [{ "role": "user", "content": content }], "max_tokens": 6, "seed": seed, "temperature": 0.9, "top_k": 50 });
    if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        v.extend(extra.clone());
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_streamed_pieces_join_to_the_non_streamed_text() {
    let addr = shared();
    let (status, whole) = post_json(addr, "/v1/chat/completions", &chat_body("Say hi", 11, json!({}))).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["object"], "chat.completion");
    assert_eq!(whole["model"], "tiny");
    let choice = &whole["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["finish_reason"], "length");
    let text = choice["message"]["content"].as_str().expect("content");
    assert!(!text.is_empty());
    let usage = &whole["usage"];
    assert_eq!(usage["completion_tokens"], 6);
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 3, "{usage}");
    assert_eq!(usage["total_tokens"].as_u64(), Some(usage["prompt_tokens"].as_u64().unwrap() + 6));

    let mut r = post(
        addr,
        "/v1/chat/completions",
        &chat_body("Say hi", 11, json!({ "stream": true, "stream_options": { "include_usage": true } })).to_string(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.content_type.starts_with("text/event-stream"), "{}", r.content_type);
    let events = r.sse_all().await;
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    let joined: String = events.iter().filter_map(|e| e["choices"].get(0)?["delta"]["content"].as_str()).collect();
    assert_eq!(joined, text, "the streamed pieces differ from the non-streamed text");
    let finish: Vec<&Value> = events
        .iter()
        .filter_map(|e| e["choices"].get(0))
        .map(|c| &c["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, vec![&json!("length")]);
    let last = events.last().expect("a usage event");
    assert_eq!(last["choices"], json!([]));
    assert_eq!(&last["usage"], usage, "streamed usage differs");
    assert!(events.iter().all(|e| e["object"] == "chat.completion.chunk"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_logprobs_report_the_chosen_token_and_the_top_ones() {
    let addr = shared();
    let body = chat_body("Tell me", 3, json!({ "logprobs": true, "top_logprobs": 3, "temperature": 0 }));
    let (status, v) = post_json(addr, "/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{v}");
    let content = v["choices"][0]["logprobs"]["content"].as_array().expect("logprobs.content");
    assert_eq!(content.len(), 6);
    for t in content {
        let lp = t["logprob"].as_f64().expect("logprob");
        assert!(lp < 0.0 && lp.is_finite(), "{t}");
        let top = t["top_logprobs"].as_array().expect("top_logprobs");
        assert_eq!(top.len(), 3);
        // Greedy: the chosen token is the most likely one.
        assert_eq!(top[0]["logprob"].as_f64(), Some(lp), "{t}");
        assert_eq!(top[0]["token"], t["token"]);
        assert!(top.windows(2).all(|w| w[0]["logprob"].as_f64() >= w[1]["logprob"].as_f64()), "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_completions_streaming_and_not_agree_and_stop_strings_cut_the_text() {
    let addr = shared();
    let body = json!({ "model": "tiny", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "logprobs": 1, "return_tokens_as_token_ids": true });
    let (status, whole) = post_json(addr, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["object"], "text_completion");
    let text = whole["choices"][0]["text"].as_str().expect("text").to_string();
    let lp = &whole["choices"][0]["logprobs"];
    let tokens = lp["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), 8);
    assert!(tokens.iter().all(|t| t.as_str().is_some_and(|s| s.starts_with("token_id:"))), "{tokens:?}");
    assert_eq!(lp["token_logprobs"].as_array().map(Vec::len), Some(8));

    let mut streaming = body.clone();
    streaming["stream"] = json!(true);
    let mut r = post(addr, "/v1/completions", &streaming.to_string()).await;
    let events = r.sse_all().await;
    let joined: String = events.iter().filter_map(|e| e["choices"][0]["text"].as_str()).collect();
    assert_eq!(joined, text);
    let streamed: Vec<Value> =
        events.iter().filter_map(|e| e["choices"][0]["logprobs"]["tokens"].as_array()).flatten().cloned().collect();
    assert_eq!(&streamed, tokens, "streamed token ids differ");

    // A stop string taken from the text: the output ends just before its first occurrence.
    let stop: String = text.chars().rev().find(|c| !c.is_whitespace()).expect("a visible character").to_string();
    let expected = &text[..text.find(&stop).expect("the stop occurs")];
    let mut stopped = body.clone();
    stopped["stop"] = json!([stop]);
    let (status, v) = post_json(addr, "/v1/completions", &stopped).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["text"], expected, "stop {stop:?} in {text:?}");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_generate_and_chat_stream_ndjson_matching_their_non_streamed_answers() {
    let addr = shared();
    let options = json!({ "num_predict": 5, "seed": 9, "temperature": 0.7 });
    for (path, body, field) in [
        ("/api/generate", json!({ "model": "tiny", "prompt": "Why is the sky blue?", "options": options }), "response"),
        (
            "/api/chat",
            json!({ "model": "tiny:latest", "messages": [{ "role": "user", "content": "Why?" }], "options": options }),
            "message",
        ),
    ] {
        let text_of = |v: &Value| {
            if field == "response" {
                v["response"].as_str().unwrap_or("").to_string()
            } else {
                v["message"]["content"].as_str().unwrap_or("").to_string()
            }
        };
        let mut r = post(addr, path, &body.to_string()).await;
        assert_eq!(r.status, 200, "{path}");
        assert!(r.content_type.starts_with("application/x-ndjson"), "{path}: {}", r.content_type);
        let lines = r.ndjson_all().await;
        let (last, pieces) = lines.split_last().expect("at least the final line");
        assert!(pieces.iter().all(|l| l["done"] == false), "{path}: {lines:?}");
        assert_eq!(last["done"], true);
        assert_eq!(last["done_reason"], "length");
        assert_eq!(last["eval_count"], 5);
        assert!(last["prompt_eval_count"].as_u64().unwrap() > 3);
        let joined: String = pieces.iter().map(text_of).collect();

        let mut whole = body.clone();
        whole["stream"] = json!(false);
        let (status, v) = post_json(addr, path, &whole).await;
        assert_eq!(status, 200, "{path}: {v}");
        assert_eq!(v["done"], true);
        assert_eq!(text_of(&v), joined, "{path}: streamed and whole text differ");
        assert!(v["created_at"].as_str().is_some_and(|s| s.ends_with('Z') && s.len() > 20), "{v}");
    }
    // No prompt: Ollama's load-only answer.
    let (status, v) = post_json(addr, "/api/generate", &json!({ "model": "tiny" })).await;
    assert_eq!((status, &v["done_reason"]), (200, &json!("load")), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_lists_health_and_metrics() {
    let addr = shared();
    let models: Value = serde_json::from_str(&get(addr, "/v1/models").await.text().await).expect("json");
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "tiny");
    let tags: Value = serde_json::from_str(&get(addr, "/api/tags").await.text().await).expect("json");
    assert_eq!(tags["models"][0]["name"], "tiny");
    assert_eq!(tags["models"][0]["details"]["family"], "qwen35moe");
    let health: Value = serde_json::from_str(&get(addr, "/health").await.text().await).expect("json");
    assert_eq!(health["status"], "ok");
    assert_eq!(health["queue_limit"], 64);
    let (status, _) = post_json(addr, "/v1/completions", &json!({ "prompt": "a", "max_tokens": 2, "seed": 1 })).await;
    assert_eq!(status, 200);
    assert!(metric(addr, "baro_generated_tokens_total").await >= 2.0);
    assert!(metric(addr, "baro_requests_completed_total").await >= 1.0);
    assert!(metric(addr, "baro_busy_seconds_total").await > 0.0);
    assert!(metric(addr, "baro_generated_tokens_per_second").await > 0.0);
    assert_eq!(metric(addr, "baro_queue_limit").await, 64.0);
    let hit_rate = metric(addr, "baro_prefix_cache_hit_rate").await;
    assert!((0.0..=1.0).contains(&hit_rate));
}

/// The tokens and logprobs of a greedy completion of `prompt` (ids), as (id, logprob bits).
async fn ids_and_logprobs(addr: std::net::SocketAddr, prompt: &[u64], max_tokens: usize) -> Vec<(u64, u64)> {
    let body = json!({ "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logprobs": 0, "return_tokens_as_token_ids": true });
    let (status, v) = post_json(addr, "/v1/completions", &body).await;
    assert_eq!(status, 200, "{v}");
    let lp = &v["choices"][0]["logprobs"];
    let ids = lp["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .map(|t| t.as_str().unwrap()["token_id:".len()..].parse().unwrap());
    let lps = lp["token_logprobs"].as_array().expect("logprobs").iter().map(|l| l.as_f64().unwrap().to_bits());
    ids.zip(lps).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_cache_hit_gives_the_bytes_of_a_cold_run() {
    // A server of its own, so no other test's sequence evicts a cache entry.
    let addr = server_common::start(server_common::config(4)).await.addr;
    // A: a prompt; B: A's prompt, then the three tokens A's state is fed before A ends after
    // four (the fourth is sampled, never fed), then more.
    let a_prompt = [151_644u64, 872, 198, 5_432, 77, 1_024];
    let mut b_prompt = a_prompt.to_vec();
    let first_a = ids_and_logprobs(addr, &a_prompt, 4).await;
    b_prompt.extend(first_a[..3].iter().map(|&(id, _)| id));
    b_prompt.extend([9_999, 42]);
    // B takes A's state (fed A's prompt and three tokens: 9 of B's 11 prompt tokens).
    let hits = metric(addr, "baro_prefix_cache_hits_total").await;
    let first_b = ids_and_logprobs(addr, &b_prompt, 5).await;
    assert_eq!(metric(addr, "baro_prefix_cache_hits_total").await, hits + 1.0, "B should reuse A's state");
    // Again: A (whose cached entries are all longer than its prompt: no hit), then B.
    let a = ids_and_logprobs(addr, &a_prompt, 4).await;
    assert_eq!(a, first_a, "A twice gave different bytes");
    let second_b = ids_and_logprobs(addr, &b_prompt, 5).await;
    assert_eq!(metric(addr, "baro_prefix_cache_hits_total").await, hits + 2.0);
    assert_eq!(metric(addr, "baro_prompt_tokens_cached_total").await, 18.0, "two hits of 9 tokens each");
    // And with the cache off: a server that feeds B's whole prompt.
    let mut config = server_common::config(4);
    config.scheduler.prefix_cache = 0;
    let off = server_common::start(config).await.addr;
    let uncached_b = ids_and_logprobs(off, &b_prompt, 5).await;
    assert_eq!(metric(off, "baro_prefix_cache_hits_total").await, 0.0);
    assert_eq!(first_b, uncached_b, "a prefix-cache hit changed tokens or logprobs");
    assert_eq!(second_b, uncached_b, "a prefix-cache hit changed tokens or logprobs");
}
