//! Tool calls: the parser that splits output into content and `<tool_call>` blocks (the JSON
//! and the XML forms, at any chunking), the built-in template's rendering of tools, calls and
//! tool results, and the server on loopback with the embedded tiny model: `tool_choice`
//! `required` and a named function constrain the output to a call whose arguments match the
//! function's schema, returned as `tool_calls` (and streamed as a delta); a conversation
//! carrying the call and a `tool` message back is accepted; Ollama's `tools` parse the same
//! blocks (forced here with a grammar, since random weights never call a tool on their own).

use crate::server_common::{post, post_json, start};
use baro_engine::server::tools::{Call, Piece, ToolParser};
use baro_engine::tokenizer::{ChatMessage, ChatOptions, ChatTemplate, Tokenizer};
use serde_json::{json, Value};

#[test]
fn content_and_calls_split_at_any_chunking() {
    let text = "ok <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n<function=g>\n<parameter=city>\nParis\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call> <tool_x>";
    for step in [1, 2, 5, 1000] {
        let mut p = ToolParser::default();
        let mut pieces = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        for chunk in chars.chunks(step) {
            pieces.extend(p.push(&chunk.iter().collect::<String>()));
        }
        pieces.extend(p.finish());
        let content: String =
            pieces.iter().filter_map(|p| if let Piece::Content(c) = p { Some(c.as_str()) } else { None }).collect();
        let calls: Vec<&Call> =
            pieces.iter().filter_map(|p| if let Piece::Call(c) = p { Some(c) } else { None }).collect();
        assert_eq!(content, "ok \n <tool_x>", "step {step}");
        assert_eq!(
            calls,
            [
                &Call { name: "f".into(), arguments: json!({ "x": 1 }) },
                &Call { name: "g".into(), arguments: json!({ "city": "Paris", "n": 3 }) }
            ],
            "step {step}"
        );
    }
    // A block that is not a call stays text.
    let mut p = ToolParser::default();
    let mut pieces = p.push("<tool_call>not json</tool_call>");
    pieces.extend(p.finish());
    assert_eq!(pieces, [Piece::Content("<tool_call>not json</tool_call>".into())]);
    assert_eq!(p.calls, 0);
}

fn weather_tool() -> Value {
    json!({ "type": "function", "function": { "name": "get_weather", "description": "weather in a city",
        "parameters": { "type": "object", "properties": { "city": { "enum": ["Paris", "Oslo"] }, "days": { "type": "integer", "minimum": 1, "maximum": 7 } }, "required": ["city", "days"], "additionalProperties": false } } })
}

fn time_tool() -> Value {
    json!({ "type": "function", "function": { "name": "get_time", "parameters": { "type": "object", "properties": { "zone": { "enum": ["UTC", "CET"] } }, "required": ["zone"], "additionalProperties": false } } })
}

#[test]
fn the_built_in_template_renders_tools_calls_and_results() {
    let messages = [
        ChatMessage::new("system", "be brief"),
        ChatMessage::new("user", "weather?"),
        ChatMessage {
            role: "assistant".into(),
            tool_calls: vec![
                json!({ "type": "function", "function": { "name": "get_weather", "arguments": { "city": "Paris" } } }),
            ],
            ..ChatMessage::default()
        },
        ChatMessage::new("tool", "18C"),
        ChatMessage::new("tool", "sunny"),
    ];
    let options = ChatOptions { add_generation_prompt: true, ..ChatOptions::default() };
    let tools = json!([weather_tool()]);
    let text = ChatTemplate::qwen35().render_with_tools(&messages, &options, Some(&tools)).expect("render");
    // Python's json.dumps separators, as Hugging Face's `tojson` writes them (keys sorted).
    let tool_line = r#"{"function": {"description": "weather in a city", "name": "get_weather", "parameters": {"additionalProperties": false, "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"maximum": 7, "minimum": 1, "type": "integer"}}, "required": ["city", "days"], "type": "object"}}, "type": "function"}"#;
    assert!(text.starts_with("<|im_start|>system\nbe brief\n\n# Tools\n"), "{text}");
    assert!(text.contains(&format!("<tools>\n{tool_line}\n</tools>")), "{text}");
    assert!(text.contains("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"), "{text}");
    assert!(text.contains("<|im_start|>user\n<tool_response>\n18C\n</tool_response>\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"), "{text}");
    // Without tools the conversation renders as before.
    let plain = ChatTemplate::qwen35().render(&messages[..2], &options).expect("render");
    assert_eq!(
        plain,
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n"
    );
}

fn check_weather(args: &Value) {
    assert!(args["city"] == "Paris" || args["city"] == "Oslo", "{args}");
    assert!(args["days"].as_u64().is_some_and(|d| (1..=7).contains(&d)), "{args}");
    assert_eq!(args.as_object().map(|o| o.len()), Some(2), "{args}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_and_named_tool_choices_return_calls_matching_the_schema_on_both_apis() {
    let mut config = crate::server_common::config(8);
    config.limits.max_tokens = 96;
    config.limits.ctx = 768;
    let addr = start(config).await.addr;
    let chat = "/v1/chat/completions";
    let msgs = json!([{ "role": "user", "content": "weather in Paris for 3 days?" }]);
    let tools = json!([weather_tool(), time_tool()]);

    // Named: that function, arguments matching its schema.
    let named = json!({ "type": "function", "function": { "name": "get_weather" } });
    let (status, v) = post_json(
        addr,
        chat,
        &json!({ "messages": msgs, "tools": tools, "tool_choice": named, "seed": 1, "max_tokens": 96 }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    assert!(choice["message"]["content"].is_null(), "{v}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(
        (call["type"].as_str(), call["function"]["name"].as_str()),
        (Some("function"), Some("get_weather")),
        "{v}"
    );
    assert!(call["id"].as_str().is_some_and(|id| id.starts_with("call_")), "{v}");
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments as a string"))
        .expect("arguments JSON");
    check_weather(&args);

    // Required, streamed: one tool_calls delta with index, id, name and arguments.
    let mut r = post(addr, chat, &json!({ "messages": msgs, "tools": tools, "tool_choice": "required", "seed": 2, "max_tokens": 96, "stream": true }).to_string()).await;
    let events = r.sse_all().await;
    let calls: Vec<&Value> =
        events.iter().filter_map(|e| e["choices"][0]["delta"]["tool_calls"].as_array()).flatten().collect();
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0]["index"], 0);
    let name = calls[0]["function"]["name"].as_str().expect("a name");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().expect("arguments")).expect("arguments JSON");
    match name {
        "get_weather" => check_weather(&args),
        "get_time" => assert!(args == json!({ "zone": "UTC" }) || args == json!({ "zone": "CET" }), "{args}"),
        other => panic!("called {other:?}"),
    }
    assert_eq!(events.iter().rev().find_map(|e| e["choices"][0]["finish_reason"].as_str()), Some("tool_calls"));
    assert!(
        events.iter().all(|e| !e["choices"][0]["delta"]["content"].as_str().is_some_and(|c| c.contains("tool_call"))),
        "{events:?}"
    );

    // The call and its result sent back: accepted and answered.
    let back = json!([
        { "role": "user", "content": "weather in Paris?" },
        { "role": "assistant", "content": null, "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}" } }] },
        { "role": "tool", "tool_call_id": "call_1", "content": "18C and sunny" },
    ]);
    let (status, v) =
        post_json(addr, chat, &json!({ "messages": back, "tools": tools, "max_tokens": 4, "seed": 3 })).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usage"]["completion_tokens"].as_u64().map(|n| n <= 4), Some(true), "{v}");

    // Ollama: the same blocks parsed into message.tool_calls (forced with a grammar here).
    let tokenizer = Tokenizer::qwen35().expect("tokenizer");
    let (open, close) = (
        tokenizer.token_to_id("<tool_call>").expect("<tool_call>"),
        tokenizer.token_to_id("</tool_call>").expect("</tool_call>"),
    );
    let grammar = format!(
        "start: <[{open}]> \"\\n\" %json {} \"\\n\" <[{close}]>",
        json!({ "type": "object", "properties": { "name": { "const": "get_time" }, "arguments": time_tool()["function"]["parameters"] }, "required": ["name", "arguments"], "additionalProperties": false, "x-guidance": { "whitespace_flexible": false } })
    );
    let body = json!({ "messages": msgs, "tools": tools, "grammar": grammar, "stream": false, "options": { "seed": 4, "num_predict": 64 } });
    let (status, v) = post_json(addr, "/api/chat", &body).await;
    assert_eq!(status, 200, "{v}");
    let calls = v["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("no tool_calls: {v}"));
    assert_eq!(calls.len(), 1, "{v}");
    assert_eq!(calls[0]["function"]["name"], "get_time");
    assert!(calls[0]["function"]["arguments"]["zone"].is_string(), "arguments are an object in Ollama's shape: {v}");
    assert_eq!(v["message"]["content"], "", "{v}");
    let mut body = body;
    body["stream"] = json!(true);
    let mut r = post(addr, "/api/chat", &body.to_string()).await;
    let lines = r.ndjson_all().await;
    let streamed: Vec<&Value> = lines.iter().filter_map(|l| l["message"]["tool_calls"].as_array()).flatten().collect();
    assert_eq!(streamed.len(), 1, "{lines:?}");
    assert_eq!(streamed[0]["function"]["name"], "get_time");

    // Bad tool requests: 400 naming the field.
    let cases: Vec<(Value, &str)> = vec![
        (json!({ "messages": msgs, "tool_choice": "required" }), "tool_choice: expected tools to choose from"),
        (
            json!({ "messages": msgs, "tools": tools, "tool_choice": { "type": "function", "function": { "name": "nope" } } }),
            "tool_choice: expected one of the offered functions [\"get_weather\", \"get_time\"], found \"nope\"",
        ),
        (json!({ "messages": msgs, "tools": { "a": 1 } }), "tools: expected a list of tools, found an object"),
        (json!({ "messages": msgs, "tools": [{ "type": "function" }] }), "tools[0]: expected {\"type\": \"function\""),
        (
            json!({ "messages": msgs, "tools": tools, "tool_choice": "required", "response_format": { "type": "json_object" } }),
            "tool_choice: expected \"auto\" or \"none\" alongside `response_format`",
        ),
        (
            json!({ "messages": [{ "role": "assistant", "tool_calls": [{ "function": { "name": "f", "arguments": "{oops" } }] }] }),
            "messages[0].tool_calls[0].function.arguments: expected a JSON object (as a string)",
        ),
    ];
    for (body, expected) in cases {
        let (status, v) = post_json(addr, chat, &body).await;
        assert_eq!(status, 400, "{body}: {v}");
        let m = v["error"]["message"].as_str().expect("message");
        assert!(m.starts_with(expected), "{body}: {m}");
    }
}
