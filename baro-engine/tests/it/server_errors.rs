//! The server under bad input and load, on loopback with the embedded tiny model: malformed
//! JSON, wrong types and bad parameters get a 400 saying what was expected and found (in each
//! API's error shape) and the server keeps serving; an unknown model or route is a 404; a full
//! queue is a 503 naming its limit; a client that hangs up mid-stream has its sequence freed.

use crate::server_common;

use serde_json::{json, Value};
use server_common::{metric, post, post_json, start, wait_metric};

/// The error message of an OpenAI-shaped error body.
fn openai_message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_else(|| panic!("expected an OpenAI error body, found {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_4xx_saying_what_was_wrong_and_the_server_keeps_serving() {
    let server = start(server_common::config(8)).await;
    let addr = server.addr;
    let chat = "/v1/chat/completions";
    let msgs = json!([{ "role": "user", "content": "hi" }]);
    // Malformed JSON and an empty body: 400.
    for body in ["{\"messages\": [", "not json", "", "{} trailing", "[1, 2]"] {
        let r = post(addr, chat, body).await;
        let status = r.status;
        let v: Value = serde_json::from_str(&r.text().await).expect("json error body");
        assert_eq!(status, 400, "{body:?}: {v}");
        let m = openai_message(&v);
        assert!(m.contains("expected a JSON object"), "{body:?}: {m}");
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }
    // Wrong types and missing fields: 400 (as OpenAI answers), naming the field.
    let cases: Vec<(Value, &str)> = vec![
        (json!({ "messages": msgs, "temperature": "hot" }), "temperature"),
        (json!({ "messages": msgs, "max_tokens": 1.5 }), "max_tokens"),
        (json!({ "model": "tiny" }), "messages"),
    ];
    for (body, field) in cases {
        let (status, v) = post_json(addr, chat, &body).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(openai_message(&v).contains(field), "{body}: {v}");
    }
    // Out-of-range parameters: 400 with expected and found.
    let long = "word ".repeat(400);
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (chat, json!({ "messages": msgs, "temperature": -1 }), "temperature", "found -1"),
        (chat, json!({ "messages": msgs, "temperature": 3 }), "temperature", "a value in [0, 2], found 3"),
        (chat, json!({ "messages": msgs, "max_tokens": 33 }), "max_tokens", "at most 32"),
        (chat, json!({ "messages": msgs, "max_tokens": 0 }), "max_tokens", "at least 1"),
        (chat, json!({ "messages": msgs, "n": 2 }), "n", "found 2"),
        (chat, json!({ "messages": msgs, "presence_penalty": 0.5 }), "presence_penalty", "found 0.5"),
        (chat, json!({ "messages": msgs, "top_logprobs": 50, "logprobs": true }), "top_logprobs", "found 50"),
        (chat, json!({ "messages": [] }), "messages", "at least one message"),
        (chat, json!({ "messages": [{ "role": "user", "content": long }] }), "messages", "at most 256 tokens"),
        ("/v1/completions", json!({ "prompt": [1, 2, 999_999] }), "prompt", "found 999999"),
        ("/v1/completions", json!({ "prompt": ["a", "b"] }), "prompt", "a batch of 2"),
        ("/v1/completions", json!({ "prompt": "a", "echo": true }), "echo", "found true"),
    ];
    for (path, body, field, found) in cases {
        let (status, v) = post_json(addr, path, &body).await;
        assert_eq!(status, 400, "{path} {body}: {v}");
        let m = openai_message(&v);
        assert!(m.starts_with(&format!("{field}: expected ")) && m.contains(found), "{path} {body}: {m}");
        assert_eq!(v["error"]["param"], field);
    }
    // Ollama's shape: {"error": "..."}.
    let (status, v) =
        post_json(addr, "/api/generate", &json!({ "prompt": "hi", "options": { "temperature": -2 } })).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "options.temperature: expected a finite value >= 0, found -2");
    let r = post(addr, "/api/chat", "{oops").await;
    assert_eq!(r.status, 400);
    let v: Value = serde_json::from_str(&r.text().await).expect("json");
    assert!(v["error"].as_str().is_some_and(|m| m.contains("malformed JSON")), "{v}");
    // Unknown model and unknown route: 404.
    let (status, v) = post_json(addr, chat, &json!({ "model": "gpt-9", "messages": msgs })).await;
    assert_eq!(status, 404, "{v}");
    assert!(openai_message(&v).contains("\"gpt-9\"") && openai_message(&v).contains("\"tiny\""), "{v}");
    let (status, v) = post_json(addr, "/api/generate", &json!({ "model": "llama3", "prompt": "hi" })).await;
    assert_eq!(status, 404, "{v}");
    assert!(v["error"].is_string());
    let r = post(addr, "/v1/nothing", "{}").await;
    assert_eq!(r.status, 404);
    assert!(r.text().await.contains("no such route"));
    // Nothing was queued, every error was counted, and the server still answers.
    assert_eq!(metric(addr, "baro_requests_admitted_total").await, 0.0);
    assert_eq!(metric(addr, "baro_requests_invalid_total").await, 25.0);
    let (status, v) = post_json(addr, chat, &json!({ "messages": msgs, "max_tokens": 3, "seed": 5 })).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_with_its_limit_and_a_client_that_hangs_up_frees_its_sequence() {
    let server = start(server_common::config(2)).await;
    let addr = server.addr;
    // Two long streaming generations take both places; each is known admitted once its first
    // token arrives.
    let long = |seed: u64| {
        json!({ "prompt": "count to a thousand", "max_tokens": 32, "seed": seed, "stream": true }).to_string()
    };
    let mut a = post(addr, "/v1/completions", &long(1)).await;
    let mut b = post(addr, "/v1/completions", &long(2)).await;
    assert_eq!((a.status, b.status), (200, 200));
    assert!(a.sse().await.is_some() && b.sse().await.is_some());
    assert_eq!(metric(addr, "baro_queue_depth").await, 2.0);
    for (path, body) in [
        ("/v1/chat/completions", json!({ "messages": [{ "role": "user", "content": "hi" }], "max_tokens": 2 })),
        ("/api/generate", json!({ "prompt": "hi" })),
    ] {
        let r = post(addr, path, &body.to_string()).await;
        assert_eq!(r.status, 503, "{path}");
        let text = r.text().await;
        assert!(text.contains("queue full") && text.contains("(limit 2)"), "{path}: {text}");
    }
    assert_eq!(metric(addr, "baro_requests_rejected_total").await, 2.0);
    // Both hang up mid-stream: the scheduler drops their sequences long before 32 tokens.
    a.disconnect();
    b.disconnect();
    wait_metric(addr, "baro_requests_active", 0.0).await;
    wait_metric(addr, "baro_queue_depth", 0.0).await;
    assert_eq!(metric(addr, "baro_requests_cancelled_total").await, 2.0);
    assert_eq!(metric(addr, "baro_requests_completed_total").await, 0.0);
    assert!(metric(addr, "baro_generated_tokens_total").await < 64.0, "the hung-up sequences ran to their end");
    // The places are free again.
    let (status, v) = post_json(addr, "/v1/completions", &json!({ "prompt": "hi", "max_tokens": 2, "seed": 3 })).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(metric(addr, "baro_requests_completed_total").await, 1.0);
}
