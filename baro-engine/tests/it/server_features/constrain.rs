//! Constrained decoding on loopback with the embedded tiny model (random weights, so only the
//! grammar makes its output JSON): OpenAI `response_format` (`json_schema`, `json_object`),
//! Ollama `format` (`"json"` and a schema) and the Lark `grammar` on both APIs give outputs
//! that parse and validate against their schema (a small validator here, independent of the
//! library that constrains); bad schemas and grammars are a 400 before anything is queued; and
//! constrained requests mixed into a concurrent batch with unconstrained ones get the bytes
//! (token ids, log-probabilities) of the same requests sent one at a time.

use std::net::SocketAddr;

use crate::server_common::{metric, post, post_json, start};
use serde_json::{json, Value};

/// The schema the tests ask for: every value bounded, so a random model completes it.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "ok": { "type": "boolean" },
            "color": { "enum": ["red", "green", "blue"] },
            "n": { "type": "integer", "minimum": 0, "maximum": 99 },
            "tags": { "type": "array", "items": { "enum": ["a", "b"] }, "maxItems": 2 }
        },
        "required": ["ok", "color", "n", "tags"],
        "additionalProperties": false
    })
}

/// Whether `v` satisfies `schema` (the keywords the tests use).
fn validates(v: &Value, schema: &Value) -> Result<(), String> {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return if options.contains(v) { Ok(()) } else { Err(format!("{v} not in {options:?}")) };
    }
    let ty = schema.get("type").and_then(Value::as_str);
    match ty {
        Some("boolean") if v.is_boolean() => Ok(()),
        Some("integer") if v.is_i64() || v.is_u64() => {
            let n = v.as_f64().unwrap_or(f64::NAN);
            let lo = schema.get("minimum").and_then(Value::as_f64).unwrap_or(f64::MIN);
            let hi = schema.get("maximum").and_then(Value::as_f64).unwrap_or(f64::MAX);
            if (lo..=hi).contains(&n) {
                Ok(())
            } else {
                Err(format!("{n} outside [{lo}, {hi}]"))
            }
        }
        Some("array") if v.is_array() => {
            let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
            if schema.get("maxItems").and_then(Value::as_u64).is_some_and(|m| items.len() as u64 > m) {
                return Err(format!("{v}: too many items"));
            }
            items.iter().try_for_each(|item| validates(item, &schema["items"]))
        }
        Some("object") if v.is_object() => {
            let o = v.as_object().expect("an object");
            let props = schema.get("properties").and_then(Value::as_object);
            for key in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                let key = key.as_str().expect("a key");
                if !o.contains_key(key) {
                    return Err(format!("{v}: missing {key}"));
                }
            }
            for (key, value) in o {
                match props.and_then(|p| p.get(key)) {
                    Some(s) => validates(value, s)?,
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return Err(format!("{v}: extra key {key}"))
                    }
                    None => {}
                }
            }
            Ok(())
        }
        Some(t) => Err(format!("{v}: expected {t}")),
        None => Ok(()),
    }
}

fn check_json(text: &str, schema: &Value) -> Value {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("output {text:?} is not JSON: {e}"));
    validates(&v, schema).unwrap_or_else(|e| panic!("output {text:?} does not match the schema: {e}"));
    v
}

fn message(v: &Value) -> &str {
    v["error"]["message"]
        .as_str()
        .or_else(|| v["error"].as_str())
        .unwrap_or_else(|| panic!("expected an error body, found {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_outputs_match_their_schema_or_grammar_on_both_apis() {
    let mut config = crate::server_common::config(16);
    config.limits.max_tokens = 128;
    let addr = start(config).await.addr;
    let msgs = json!([{ "role": "user", "content": "describe the sky as JSON" }]);
    let strict = json!({ "type": "json_schema", "json_schema": { "name": "sky", "strict": true, "schema": schema() } });
    for seed in [1, 2] {
        let (status, v) = post_json(
            addr,
            "/v1/chat/completions",
            &json!({ "messages": msgs, "response_format": strict, "seed": seed, "max_tokens": 128 }),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
        check_json(v["choices"][0]["message"]["content"].as_str().expect("content"), &schema());
    }
    // Streamed: the pieces join to a valid document.
    let mut r = post(
        addr,
        "/v1/chat/completions",
        &json!({ "messages": msgs, "response_format": strict, "seed": 3, "max_tokens": 128, "stream": true })
            .to_string(),
    )
    .await;
    let text: String = r
        .sse_all()
        .await
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str().map(str::to_string))
        .collect();
    check_json(&text, &schema());
    // json_object: any object.
    let (status, v) = post_json(
        addr,
        "/v1/chat/completions",
        &json!({ "messages": msgs, "response_format": { "type": "json_object" }, "temperature": 0, "max_tokens": 128 }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    if v["choices"][0]["finish_reason"] == "stop" {
        check_json(v["choices"][0]["message"]["content"].as_str().expect("content"), &json!({ "type": "object" }));
    } else {
        assert!(v["choices"][0]["message"]["content"].as_str().is_some_and(|t| t.trim_start().starts_with('{')), "{v}");
    }
    // Ollama: a schema in `format`, streamed and not; "json".
    let (status, v) = post_json(
        addr,
        "/api/chat",
        &json!({ "messages": msgs, "format": schema(), "stream": false, "options": { "seed": 4, "num_predict": 128 } }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["done_reason"], "stop", "{v}");
    check_json(v["message"]["content"].as_str().expect("content"), &schema());
    let mut r = post(
        addr,
        "/api/generate",
        &json!({ "prompt": "sky?", "format": schema(), "options": { "seed": 5, "num_predict": 128 } }).to_string(),
    )
    .await;
    let text: String = r.ndjson_all().await.iter().filter_map(|l| l["response"].as_str().map(str::to_string)).collect();
    check_json(&text, &schema());
    // A Lark grammar on both APIs.
    let lark = r#"start: "answer: " ("yes" | "no") "." "#;
    let (status, v) =
        post_json(addr, "/v1/completions", &json!({ "prompt": "well?", "grammar": lark, "max_tokens": 16, "seed": 6 }))
            .await;
    assert_eq!(status, 200, "{v}");
    let t = v["choices"][0]["text"].as_str().expect("text");
    assert!(t == "answer: yes." || t == "answer: no.", "{t:?}");
    let (status, v) = post_json(
        addr,
        "/api/generate",
        &json!({ "prompt": "well?", "grammar": lark, "stream": false, "options": { "seed": 7 } }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let t = v["response"].as_str().expect("response");
    assert!(t == "answer: yes." || t == "answer: no.", "{t:?}");
    // GBNF, as llama.cpp's server takes it: names with dashes, classes, repetition, comments.
    let gbnf = "# a yes/no answer and a number\nroot ::= \"answer: \" yes-no \" \" num \".\"\nyes-no ::= (\"yes\" | \"no\")\nnum ::= [1-9] [0-9]{0,2}\n";
    for seed in [8, 9] {
        let (status, v) = post_json(
            addr,
            "/v1/completions",
            &json!({ "prompt": "well?", "grammar": gbnf, "max_tokens": 16, "seed": seed }),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let t = v["choices"][0]["text"].as_str().expect("text");
        let rest =
            t.strip_prefix("answer: yes ").or_else(|| t.strip_prefix("answer: no ")).unwrap_or_else(|| panic!("{t:?}"));
        let num = rest.strip_suffix('.').unwrap_or_else(|| panic!("{t:?}"));
        assert!(num.parse::<u32>().is_ok_and(|n| (1..1000).contains(&n)) && !num.starts_with('0'), "{t:?}");
    }

    // Bad constraints: 400 naming the field, nothing queued.
    let admitted = metric(addr, "baro_requests_admitted_total").await;
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/v1/chat/completions", json!({ "messages": msgs, "response_format": { "type": "xml" } }), "response_format.type: expected \"text\", \"json_object\" or \"json_schema\", found \"xml\""),
        ("/v1/chat/completions", json!({ "messages": msgs, "response_format": { "type": "json_schema", "json_schema": { "name": "x" } } }), "response_format.json_schema.schema: expected a JSON schema"),
        ("/v1/chat/completions", json!({ "messages": msgs, "response_format": { "type": "json_schema", "json_schema": { "schema": { "type": "nope" } } } }), "response_format: expected a valid schema or grammar, found an error"),
        ("/v1/completions", json!({ "prompt": "x", "grammar": "root ::= \"a" }), "grammar: expected a GBNF or Lark grammar, found GBNF it cannot read: at character 9: expected a closing `\"`, found the end"),
        ("/v1/completions", json!({ "prompt": "x", "grammar": "start: undefined_rule" }), "grammar: expected a valid schema or grammar, found an error"),
        ("/api/generate", json!({ "prompt": "x", "format": "yaml" }), "format: expected \"json\" or a JSON schema, found \"yaml\""),
        ("/api/generate", json!({ "prompt": "x", "format": "json", "grammar": lark }), "grammar: expected one constraint: `format` or `grammar`, found both"),
    ];
    for (path, body, expected) in cases {
        let (status, v) = post_json(addr, path, &body).await;
        assert_eq!(status, 400, "{path} {body}: {v}");
        assert!(message(&v).starts_with(expected), "{path} {body}: {}", message(&v));
    }
    assert_eq!(metric(addr, "baro_requests_admitted_total").await, admitted);
}

/// One token as the client saw it: id and logprob bits.
type Token = (u64, u64);

fn tokens(lp: &Value) -> Vec<Token> {
    let ids = lp["tokens"].as_array().expect("tokens");
    let lps = lp["token_logprobs"].as_array().expect("token_logprobs");
    ids.iter()
        .zip(lps)
        .map(|(id, l)| {
            (
                id.as_str().and_then(|s| s.strip_prefix("token_id:")).expect("an id").parse().expect("an id"),
                l.as_f64().expect("a logprob").to_bits(),
            )
        })
        .collect()
}

fn batch_requests() -> Vec<Value> {
    let strict = json!({ "type": "json_schema", "json_schema": { "name": "sky", "schema": schema() } });
    (0..8)
        .map(|i| {
            let temperature = [0.0, 0.8, 1.1][i % 3];
            let mut v = json!({ "prompt": format!("request {i}: the weather today is"), "max_tokens": 12 + 4 * (i % 3), "logprobs": 1, "return_tokens_as_token_ids": true, "seed": 100 + i, "temperature": temperature });
            match i % 4 {
                0 => v["response_format"] = strict.clone(),
                1 => {}
                2 => v["grammar"] = json!("start: (\"yes\" | \"no\" | \"maybe\") \" \" WORD \".\"\nWORD: /[a-z]{1,8}/"),
                _ => v["response_format"] = json!({ "type": "json_object" }),
            }
            v
        })
        .collect()
}

async fn completion(addr: SocketAddr, body: &Value) -> Vec<Token> {
    let (status, v) = post_json(addr, "/v1/completions", body).await;
    assert_eq!(status, 200, "{v}");
    tokens(&v["choices"][0]["logprobs"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_requests_in_a_concurrent_batch_get_the_bytes_they_get_alone() {
    let mut config = crate::server_common::config(16);
    config.scheduler.prefix_cache = 0;
    let addr = start(config).await.addr;
    let reqs = batch_requests();
    let mut alone = Vec::new();
    for r in &reqs {
        alone.push(completion(addr, r).await);
    }
    let before = metric(addr, "baro_decode_batched_steps_total").await;
    assert_eq!(before, 0.0, "one at a time: no decode step carries two rows");
    let tasks: Vec<_> = reqs.iter().cloned().map(|r| tokio::spawn(async move { completion(addr, &r).await })).collect();
    let mut together = Vec::new();
    for t in tasks {
        together.push(t.await.expect("a request task"));
    }
    let steps = metric(addr, "baro_decode_batched_steps_total").await;
    assert!(steps >= 1.0, "the concurrent requests never shared a decode step");
    for (i, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert!(!a.is_empty());
        assert_eq!(a, t, "request {i} ({}): concurrent tokens or logprobs differ from the request alone", reqs[i]);
    }
    // The constraint changed the choice: the schema request's text is JSON that starts the object.
    let (_, v) = post_json(addr, "/v1/completions", &reqs[0]).await;
    assert!(v["choices"][0]["text"].as_str().is_some_and(|t| t.starts_with('{')), "{v}");
}
