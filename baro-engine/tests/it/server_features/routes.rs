//! The routes and answers clients reach for beyond generation, on loopback with the embedded
//! tiny model: `GET /v1/models/{id}`, Ollama's `/api/show`, `/api/ps` and the embedding routes
//! (501, in each API's shape); `GET /` and `HEAD /`; 405 and 413 as JSON in each API's shape;
//! the edge values clients send (`seed: -1`, `top_p: 0`, Ollama's `num_predict: -1`) and clear
//! messages for fields of several shapes; a server that answers 503 "loading" until its model
//! is loaded; and `--api-key`, checked on both APIs with 401 in each shape.

use std::sync::Arc;

use crate::server_common::{get, json_of, post, post_json, send_with, start};
use baro_engine::server::{Server, ServerConfig};
use serde_json::{json, Value};

fn openai_error(v: &Value) -> (&str, &str) {
    let e = &v["error"];
    (
        e["message"].as_str().unwrap_or_else(|| panic!("expected an OpenAI error body, found {v}")),
        e["type"].as_str().unwrap_or(""),
    )
}

fn ollama_error(v: &Value) -> &str {
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "expected Ollama's {{\"error\": ...}}, found {v}");
    v["error"].as_str().unwrap_or_else(|| panic!("expected an Ollama error body, found {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_clients_call_answer_in_each_apis_shape() {
    let mut config = crate::server_common::config(8);
    config.max_body = 4096;
    let server = start(config).await;
    let addr = server.addr;

    // Models.
    let (status, v) = json_of(get(addr, "/v1/models/tiny").await).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["id"].as_str(), v["object"].as_str()), (Some("tiny"), Some("model")));
    let (status, v) = json_of(get(addr, "/v1/models/gpt-9").await).await;
    assert_eq!(status, 404, "{v}");
    assert!(openai_error(&v).0.contains("\"gpt-9\""), "{v}");
    let (status, v) = post_json(addr, "/api/show", &json!({ "model": "tiny" })).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["details"]["family"], "qwen35moe");
    assert_eq!(v["model_info"]["qwen35moe.context_length"], 256);
    assert!(
        v["template"].as_str().is_some() && v["parameters"].as_str().is_some_and(|p| p.contains("num_ctx 256")),
        "{v}"
    );
    let (status, v) = post_json(addr, "/api/show", &json!({ "name": "llama3" })).await;
    assert_eq!(status, 404, "{v}");
    ollama_error(&v);
    let (status, v) = json_of(get(addr, "/api/ps").await).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["models"][0]["name"], "tiny");
    assert_eq!(v["models"][0]["context_length"], 256);
    // Embeddings: 501, saying why, in each shape.
    let (status, v) = post_json(addr, "/api/embed", &json!({ "model": "tiny", "input": "hi" })).await;
    assert_eq!(status, 501, "{v}");
    assert!(ollama_error(&v).contains("embeddings are not served"), "{v}");
    let (status, v) = post_json(addr, "/v1/embeddings", &json!({ "model": "tiny", "input": "hi" })).await;
    assert_eq!(status, 501, "{v}");
    assert_eq!(openai_error(&v).1, "not_implemented_error");

    // Root and its HEAD.
    let r = get(addr, "/").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text().await, "baro-engine is running");
    let r = send_with(addr, "HEAD", "/", None, &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text().await, "", "HEAD has no body");

    // 405 as JSON, with Allow.
    let (status, v) = json_of(get(addr, "/v1/chat/completions").await).await;
    assert_eq!(status, 405, "{v}");
    assert_eq!(openai_error(&v).0, "/v1/chat/completions: expected POST, found GET");
    let (status, v) = json_of(post(addr, "/api/tags", "{}").await).await;
    assert_eq!(status, 405, "{v}");
    assert_eq!(ollama_error(&v), "/api/tags: expected GET, found POST");

    // 413 as JSON, naming the limit.
    let big = json!({ "prompt": "x".repeat(5000) }).to_string();
    for (path, ollama) in [("/v1/completions", false), ("/api/generate", true)] {
        let (status, v) = json_of(post(addr, path, &big).await).await;
        assert_eq!(status, 413, "{path}: {v}");
        let m = if ollama { ollama_error(&v) } else { openai_error(&v).0 };
        assert_eq!(m, "request body: expected at most 4096 bytes (the server's --max-body), found more", "{path}");
    }

    // Fields of several shapes: a message naming every shape, never serde's "untagged enum".
    let msgs = json!([{ "role": "user", "content": "hi" }]);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/v1/completions", json!({ "prompt": { "text": "hi" } }), "prompt: expected a string, a list of token ids, or a list of one string or one token-id list, found an object"),
        ("/v1/completions", json!({ "prompt": [1.5, 2] }), "prompt: expected token ids (integers from 0), found a list holding something else"),
        ("/v1/completions", json!({}), "prompt: expected a string, a list of token ids, or a list of one string or one token-id list, found none"),
        ("/v1/completions", json!({ "prompt": "hi", "stop": 5 }), "stop: expected a string or a list of strings, found a number"),
        ("/v1/completions", json!({ "prompt": "hi", "seed": 1.5 }), "seed: expected an integer (negative: a random seed), found 1.5"),
        ("/v1/chat/completions", json!({ "messages": [{ "role": "user", "content": 5 }] }), "messages[0].content: expected a string or a list of text parts"),
        ("/v1/chat/completions", json!({ "messages": msgs, "temperature": "hot" }), "temperature: expected a number, found string \"hot\""),
    ];
    for (path, body, message) in cases {
        let (status, v) = post_json(addr, path, &body).await;
        assert_eq!(status, 400, "{path} {body}: {v}");
        let m = openai_error(&v).0;
        assert!(m.starts_with(message), "{path} {body}: {m}");
        assert!(!m.contains("untagged"), "{m}");
    }

    // Edge values clients send: a negative seed is a random one; top_p 0 keeps the most likely
    // token only (the same tokens as greedy); OpenAI's temperature stops at 2, Ollama's does not.
    let (status, v) = post_json(addr, "/v1/completions", &json!({ "prompt": "hi", "max_tokens": 2, "seed": -1 })).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = post_json(
        addr,
        "/api/generate",
        &json!({ "prompt": "hi", "stream": false, "options": { "num_predict": 2, "seed": -1, "temperature": 3 } }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let ids = |v: &Value| v["choices"][0]["logprobs"]["tokens"].clone();
    let base = json!({ "prompt": "the sky is", "max_tokens": 6, "logprobs": 0, "return_tokens_as_token_ids": true });
    let mut greedy = base.clone();
    greedy["temperature"] = json!(0);
    let mut nucleus0 = base.clone();
    nucleus0["top_p"] = json!(0);
    nucleus0["seed"] = json!(12345);
    let (s1, g) = post_json(addr, "/v1/completions", &greedy).await;
    let (s2, n) = post_json(addr, "/v1/completions", &nucleus0).await;
    assert_eq!((s1, s2), (200, 200), "{g} {n}");
    assert_eq!(ids(&g), ids(&n), "top_p 0 should pick the most likely token each step");
    assert_eq!(ids(&g).as_array().map(Vec::len), Some(6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_num_predict_minus_one_runs_until_a_stop_or_the_context_is_full() {
    let mut config = crate::server_common::config(4);
    config.limits.ctx = 40;
    let server = start(config).await;
    let addr = server.addr;
    for n in [-1, -2] {
        let (status, v) = post_json(
            addr,
            "/api/generate",
            &json!({ "prompt": "hi", "raw": true, "stream": false, "options": { "num_predict": n, "temperature": 0 } }),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let (p, e) =
            (v["prompt_eval_count"].as_u64().expect("prompt count"), v["eval_count"].as_u64().expect("eval count"));
        match v["done_reason"].as_str() {
            // Past --max-tokens (32): the context, not the server's default, bounded it.
            Some("length") => assert_eq!(p + e, 41, "{v}"),
            Some("stop") => assert!(p + e <= 41, "{v}"),
            other => panic!("done_reason {other:?}: {v}"),
        }
    }
    let (status, v) =
        post_json(addr, "/api/generate", &json!({ "prompt": "hi", "stream": false, "options": { "num_predict": -3 } }))
            .await;
    assert_eq!(status, 400, "{v}");
    assert!(ollama_error(&v).starts_with("options.num_predict: expected -1 (until a stop or the context ends), -2 (fill the context) or a count of at least 1, found -3"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answers_loading_until_its_model_is_in_and_checks_the_api_key_on_both_apis() {
    let config = ServerConfig { api_key: Some("sekrit".into()), ..crate::server_common::config(8) };
    let server = Server::new("tiny".into(), 0, config);
    let app = Arc::clone(server.app());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(server.serve(listener));
    let key = [("authorization", "Bearer sekrit")];
    let chat = json!({ "messages": [{ "role": "user", "content": "hi" }], "max_tokens": 2 }).to_string();

    // Loading: /health 503, / 200, generation 503 in each shape, /api/ps empty.
    let (status, v) = json_of(get(addr, "/health").await).await;
    assert_eq!((status, v["status"].as_str()), (503, Some("loading")), "{v}");
    assert_eq!(get(addr, "/").await.status, 200);
    let (status, v) = json_of(send_with(addr, "POST", "/v1/chat/completions", Some(&chat), &key).await).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(openai_error(&v).1, "server_loading");
    let (status, v) = json_of(send_with(addr, "POST", "/api/generate", Some("{\"prompt\": \"hi\"}"), &key).await).await;
    assert_eq!(status, 503, "{v}");
    assert!(ollama_error(&v).contains("is loading"), "{v}");
    let (status, v) = json_of(send_with(addr, "GET", "/api/ps", None, &key).await).await;
    assert_eq!((status, v["models"].as_array().map(Vec::len)), (200, Some(0)), "{v}");

    let model = tokio::task::spawn_blocking(|| crate::server_common::model(256)).await.expect("building the model");
    app.load(model).expect("load");
    let (status, v) = json_of(get(addr, "/health").await).await;
    assert_eq!((status, v["status"].as_str()), (200, Some("ok")), "{v}");

    // The key: missing or wrong is 401 in each API's shape; right is served; /health is open.
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..], &[("authorization", "sekrit")][..]] {
        let (status, v) = json_of(send_with(addr, "POST", "/v1/chat/completions", Some(&chat), headers).await).await;
        assert_eq!(status, 401, "{headers:?}: {v}");
        let (m, kind) = openai_error(&v);
        assert_eq!(kind, "authentication_error");
        assert!(m.starts_with("authorization: expected the header `Authorization: Bearer <key>`"), "{m}");
        let (status, v) = json_of(send_with(addr, "GET", "/api/tags", None, headers).await).await;
        assert_eq!(status, 401, "{headers:?}: {v}");
        ollama_error(&v);
    }
    let (status, v) = json_of(send_with(addr, "POST", "/v1/chat/completions", Some(&chat), &key).await).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = json_of(send_with(addr, "GET", "/api/tags", None, &key).await).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = json_of(send_with(addr, "GET", "/api/ps", None, &key).await).await;
    assert_eq!((status, v["models"][0]["name"].as_str()), (200, Some("tiny")), "{v}");
}
