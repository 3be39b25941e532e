//! The OpenAI-compatible routes: `POST /v1/chat/completions`, `POST /v1/completions` (each
//! streaming as server-sent events ending in `data: [DONE]` when `stream` is true) and
//! `GET /v1/models`. Sampling fields follow OpenAI (temperature 1 and top_p 1 by default,
//! `seed`, `stop`, `max_tokens`, `logprobs`/`top_logprobs`, `stream_options.include_usage`) plus
//! vLLM's extensions (`top_k`, `min_p`, `repetition_penalty`, `return_tokens_as_token_ids`).
//! Only one choice (`n` = 1) is served; `presence_penalty`/`frequency_penalty` other than 0,
//! `echo` and `suffix` are refused with a 400 rather than ignored.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::sampling::SamplerConfig;
use crate::server::body::{self, Prompt};
use crate::server::constrain::Spec;
use crate::server::error::{json_response, ApiError, ErrorKind, Flavor};
use crate::server::job::{Event, TokenOut, Usage};
use crate::server::params::{self, Request};
use crate::server::routes::respond;
use crate::server::stream::{self, Format, SSE_DONE};
use crate::server::tools::{self, Call, Choice, Piece, ToolParser};
use crate::server::{unix_now, App};
use crate::tokenizer::{ChatMessage, TokenId};

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(Deserialize)]
struct MessageIn {
    role: String,
    content: Option<Value>,
    tool_calls: Option<Value>,
    tool_call_id: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
struct ChatRequest {
    model: Option<String>,
    messages: Vec<MessageIn>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<i64>,
    min_p: Option<f32>,
    repetition_penalty: Option<f32>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    seed: Option<serde_json::Number>,
    stop: Option<Value>,
    n: Option<i64>,
    logprobs: Option<bool>,
    top_logprobs: Option<i64>,
    #[serde(default)]
    return_tokens_as_token_ids: bool,
    response_format: Option<Value>,
    grammar: Option<String>,
    tools: Option<Value>,
    tool_choice: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionRequest {
    model: Option<String>,
    prompt: Option<Value>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<i64>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<i64>,
    min_p: Option<f32>,
    repetition_penalty: Option<f32>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    seed: Option<serde_json::Number>,
    stop: Option<Value>,
    n: Option<i64>,
    logprobs: Option<i64>,
    echo: Option<bool>,
    suffix: Option<String>,
    #[serde(default)]
    return_tokens_as_token_ids: bool,
    response_format: Option<Value>,
    grammar: Option<String>,
}

/// The sampling fields both requests share.
struct Sampling {
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<i64>,
    min_p: Option<f32>,
    repetition_penalty: Option<f32>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    seed: Option<serde_json::Number>,
}

/// OpenAI's bound on `temperature`: 0..=2; above it is refused, never clamped.
pub const MAX_TEMPERATURE: f32 = 2.0;

impl Sampling {
    /// OpenAI's defaults: temperature 1, top_p 1, no other filter; a random seed when none or
    /// a negative one. `top_p: 0` (the smallest nucleus, which clients send for "most likely
    /// only") keeps only the most likely token: top_k 1.
    fn config(self) -> Result<SamplerConfig, ApiError> {
        params::unsupported_penalty(self.presence_penalty, "presence_penalty")?;
        params::unsupported_penalty(self.frequency_penalty, "frequency_penalty")?;
        let temperature = self.temperature.unwrap_or(1.0);
        if temperature > MAX_TEMPERATURE {
            return Err(ApiError::bad_param("temperature", format!("a value in [0, {MAX_TEMPERATURE}]"), temperature));
        }
        let (mut top_k, mut top_p) = (params::top_k(self.top_k, "top_k")?, self.top_p.unwrap_or(1.0));
        if top_p == 0.0 {
            (top_k, top_p) = (1, 1.0);
        }
        let config = SamplerConfig {
            temperature,
            top_k,
            top_p,
            min_p: self.min_p.unwrap_or(0.0),
            repetition_penalty: self.repetition_penalty.unwrap_or(1.0),
            seed: body::seed(self.seed.as_ref(), "seed")?.unwrap_or_else(rand::random),
        };
        params::sampler(config, &|field| field)
    }
}

/// An OpenAI tool call: `call_<response id>_<index>`, the arguments as a JSON string.
fn call_json(id: &str, index: usize, call: &Call) -> Value {
    json!({ "id": format!("call_{}_{index}", id.trim_start_matches("chatcmpl-")), "type": "function", "function": { "name": call.name, "arguments": call.arguments.to_string() } })
}

/// The content and the OpenAI tool calls of `pieces`, calls numbered from `first`.
fn split_pieces(id: &str, pieces: Vec<Piece>, first: usize) -> (String, Vec<Value>) {
    let (mut content, mut calls) = (String::new(), Vec::new());
    for piece in pieces {
        match piece {
            Piece::Content(c) => content.push_str(&c),
            Piece::Call(call) => calls.push(call_json(id, first + calls.len(), &call)),
        }
    }
    (content, calls)
}

/// The streamed deltas of `pieces`: content as content, each call as one `tool_calls` delta
/// with its index, id, name and whole arguments.
fn deltas(id: &str, pieces: Vec<Piece>, first: usize) -> Vec<Value> {
    let mut index = first;
    pieces
        .into_iter()
        .map(|piece| match piece {
            Piece::Content(c) => json!({ "content": c }),
            Piece::Call(call) => {
                let mut v = call_json(id, index, &call);
                v["index"] = json!(index);
                index += 1;
                json!({ "tool_calls": [v] })
            }
        })
        .collect()
}

/// Whether the constraint came from `grammar` (for the field an error names).
fn r_has_grammar(spec: &Option<crate::server::constrain::Spec>) -> bool {
    matches!(spec, Some(crate::server::constrain::Spec::Lark(_)))
}

fn usage_json(u: &Usage) -> Value {
    json!({ "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.prompt_tokens + u.completion_tokens })
}

/// One token of a chat `logprobs.content` list.
fn chat_logprob(app: &App, t: &TokenOut, as_ids: bool) -> Value {
    let entry = |id: TokenId, lp: f64| {
        let text = app.token_text(id, as_ids);
        json!({ "token": text, "logprob": lp, "bytes": text.as_bytes() })
    };
    let mut v = entry(t.id, t.logprob.unwrap_or(f64::NEG_INFINITY));
    v["top_logprobs"] = Value::Array(t.top.iter().map(|&(id, lp)| entry(id, lp)).collect());
    v
}

/// The legacy completions `logprobs` object for `tokens`, text offsets from `start`.
fn completion_logprobs(app: &App, tokens: &[TokenOut], as_ids: bool, start: usize) -> Value {
    let mut offset = start;
    let (mut texts, mut lps, mut tops, mut offsets) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for t in tokens {
        let text = app.token_text(t.id, as_ids);
        offsets.push(offset);
        offset += text.len();
        texts.push(Value::from(text));
        lps.push(json!(t.logprob));
        let top: serde_json::Map<String, Value> =
            t.top.iter().map(|&(id, lp)| (app.token_text(id, as_ids), json!(lp))).collect();
        tops.push(Value::Object(top));
    }
    json!({ "tokens": texts, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets })
}

pub async fn chat(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let result = chat_inner(&app, &body).await;
    respond(&app, Flavor::OpenAi, result)
}

async fn chat_inner(app: &Arc<App>, body: &[u8]) -> Result<Response, ApiError> {
    let r: ChatRequest = body::parse(body, "/v1/chat/completions")?;
    app.check_model(r.model.as_deref())?;
    params::one_choice(r.n)?;
    let mut messages = Vec::with_capacity(r.messages.len());
    for (i, m) in r.messages.into_iter().enumerate() {
        let content = body::content(m.content, &format!("messages[{i}].content"))?;
        let tool_calls = tools::message_calls(m.tool_calls, &format!("messages[{i}].tool_calls"))?;
        messages.push(ChatMessage { role: m.role, content, tool_calls, tool_call_id: m.tool_call_id, name: m.name });
    }
    let (offered, tools_json) = tools::parse_tools(r.tools, "tools")?;
    let choice = tools::parse_choice(r.tool_choice, &offered)?;
    let limits = app.limits();
    let max_tokens =
        params::max_tokens(r.max_completion_tokens.or(r.max_tokens), "max_tokens", limits.max_tokens, &limits)?;
    let sampling = Sampling {
        temperature: r.temperature,
        top_p: r.top_p,
        top_k: r.top_k,
        min_p: r.min_p,
        repetition_penalty: r.repetition_penalty,
        presence_penalty: r.presence_penalty,
        frequency_penalty: r.frequency_penalty,
        seed: r.seed,
    };
    let sampler = sampling.config()?;
    let stops = params::stops(body::strings(r.stop, "stop")?, "stop")?;
    let top = params::top_logprobs(r.top_logprobs, "top_logprobs")?;
    let logprobs = r.logprobs.unwrap_or(false).then_some(top);
    if top > 0 && logprobs.is_none() {
        return Err(ApiError::bad_param("top_logprobs", "logprobs: true alongside it", "logprobs false or missing"));
    }
    let mut spec = params::openai_spec(r.response_format, r.grammar)?;
    let mut field = if r_has_grammar(&spec) { "grammar" } else { "response_format" };
    if let Some(grammar) =
        tools::constraint_grammar(&choice, &offered, app.token_id(tools::OPEN), app.token_id(tools::CLOSE))
    {
        if spec.is_some() {
            return Err(ApiError::bad_param(
                "tool_choice",
                format!("\"auto\" or \"none\" alongside `{field}`"),
                "a required tool call",
            ));
        }
        (spec, field) = (Some(Spec::Lark(grammar)), "tools");
    }
    let using_tools = choice != Choice::None;
    let prompt = app.chat_prompt_with_tools(&messages, tools_json.as_ref().filter(|_| using_tools), "messages")?;
    app.check_prompt(&prompt, "messages")?;
    let constraint = app.constraint(spec.as_ref(), field)?;
    let id = params::request_id("chatcmpl");
    let rx = app.start(Request {
        id: id.clone(),
        route: "/v1/chat/completions",
        prompt,
        sampler,
        max_tokens,
        stops,
        logprobs,
        constraint,
        show_specials: using_tools,
    })?;
    let (created, model, as_ids) = (unix_now(), app.name.clone(), r.return_tokens_as_token_ids);
    if !r.stream {
        let out = stream::collect(rx).await?;
        let lp = logprobs
            .map(|_| json!({ "content": out.tokens.iter().map(|t| chat_logprob(app, t, as_ids)).collect::<Vec<_>>() }));
        let mut message = json!({ "role": "assistant", "content": out.text });
        let mut finish = json!(out.finish.reason());
        if using_tools {
            let mut parser = ToolParser::default();
            let mut pieces = parser.push(&out.text);
            pieces.extend(parser.finish());
            let (content, calls) = split_pieces(&id, pieces, 0);
            if !calls.is_empty() {
                message["content"] = if content.is_empty() { Value::Null } else { json!(content) };
                message["tool_calls"] = Value::Array(calls);
                finish = json!("tool_calls");
            } else {
                message["content"] = json!(content);
            }
        }
        let body = json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{ "index": 0, "message": message, "logprobs": lp, "finish_reason": finish }],
            "usage": usage_json(&out.usage),
        });
        return Ok(json_response(StatusCode::OK, &body));
    }
    let mut parser = using_tools.then(ToolParser::default);
    let call_id = id.clone();
    let include_usage = r.stream_options.is_some_and(|o| o.include_usage);
    let app = Arc::clone(app);
    let mut first = true;
    let chunk = move |delta: Value, logprobs: Value, finish: Value| {
        json!({ "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{ "index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish }] })
    };
    Ok(stream::streaming(rx, Format::Sse, move |event| {
        let mut out = Vec::new();
        if std::mem::take(&mut first) {
            out.extend(Format::Sse.record(&chunk(
                json!({ "role": "assistant", "content": "" }),
                Value::Null,
                Value::Null,
            )));
        }
        match event {
            Event::Token { token, text } => {
                if let Some(p) = parser.as_mut() {
                    let calls_before = p.calls;
                    for delta in deltas(&call_id, p.push(&text), calls_before) {
                        out.extend(Format::Sse.record(&chunk(delta, Value::Null, Value::Null)));
                    }
                } else if !text.is_empty() || logprobs.is_some() {
                    let lp =
                        logprobs.map_or(Value::Null, |_| json!({ "content": [chat_logprob(&app, &token, as_ids)] }));
                    out.extend(Format::Sse.record(&chunk(json!({ "content": text }), lp, Value::Null)));
                }
            }
            Event::Done { text, finish, usage } => {
                let mut reason = json!(finish.reason());
                if let Some(p) = parser.as_mut() {
                    let calls_before = p.calls;
                    let mut pieces = p.push(&text);
                    pieces.extend(p.finish());
                    for delta in deltas(&call_id, pieces, calls_before) {
                        out.extend(Format::Sse.record(&chunk(delta, Value::Null, Value::Null)));
                    }
                    if p.calls > 0 {
                        reason = json!("tool_calls");
                    }
                } else if !text.is_empty() {
                    out.extend(Format::Sse.record(&chunk(json!({ "content": text }), Value::Null, Value::Null)));
                }
                out.extend(Format::Sse.record(&chunk(json!({}), Value::Null, reason)));
                if include_usage {
                    let mut u = chunk(json!({}), Value::Null, Value::Null);
                    u["choices"] = json!([]);
                    u["usage"] = usage_json(&usage);
                    out.extend(Format::Sse.record(&u));
                }
                out.extend(SSE_DONE);
            }
            Event::Failed(message) => {
                out.extend(Format::Sse.record(&ApiError::new(ErrorKind::Internal, message).body()));
                out.extend(SSE_DONE);
            }
        }
        out
    }))
}

pub async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let result = completions_inner(&app, &body).await;
    respond(&app, Flavor::OpenAi, result)
}

async fn completions_inner(app: &Arc<App>, body: &[u8]) -> Result<Response, ApiError> {
    let r: CompletionRequest = body::parse(body, "/v1/completions")?;
    app.check_model(r.model.as_deref())?;
    params::one_choice(r.n)?;
    if r.echo == Some(true) {
        return Err(ApiError::bad_param("echo", "false (echo is not served)", true));
    }
    if r.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::bad_param("suffix", "none (insertion is not served)", "a suffix"));
    }
    let prompt = match body::prompt(r.prompt, "prompt")? {
        Prompt::Text(t) => app.text_prompt(&t, "prompt")?,
        Prompt::Ids(ids) => ids,
    };
    let limits = app.limits();
    // OpenAI's default for this route is 16 tokens.
    let max_tokens = params::max_tokens(r.max_tokens, "max_tokens", 16, &limits)?;
    let sampling = Sampling {
        temperature: r.temperature,
        top_p: r.top_p,
        top_k: r.top_k,
        min_p: r.min_p,
        repetition_penalty: r.repetition_penalty,
        presence_penalty: r.presence_penalty,
        frequency_penalty: r.frequency_penalty,
        seed: r.seed,
    };
    let sampler = sampling.config()?;
    let stops = params::stops(body::strings(r.stop, "stop")?, "stop")?;
    let logprobs = r.logprobs.map(|n| params::top_logprobs(Some(n), "logprobs")).transpose()?;
    let spec = params::openai_spec(r.response_format, r.grammar)?;
    app.check_prompt(&prompt, "prompt")?;
    let constraint = app.constraint(spec.as_ref(), if r_has_grammar(&spec) { "grammar" } else { "response_format" })?;
    let id = params::request_id("cmpl");
    let rx = app.start(Request {
        id: id.clone(),
        route: "/v1/completions",
        prompt,
        sampler,
        max_tokens,
        stops,
        logprobs,
        constraint,
        show_specials: false,
    })?;
    let (created, model, as_ids) = (unix_now(), app.name.clone(), r.return_tokens_as_token_ids);
    if !r.stream {
        let out = stream::collect(rx).await?;
        let lp = logprobs.map_or(Value::Null, |_| completion_logprobs(app, &out.tokens, as_ids, 0));
        let body = json!({
            "id": id, "object": "text_completion", "created": created, "model": model,
            "choices": [{ "index": 0, "text": out.text, "logprobs": lp, "finish_reason": out.finish.reason() }],
            "usage": usage_json(&out.usage),
        });
        return Ok(json_response(StatusCode::OK, &body));
    }
    let include_usage = r.stream_options.is_some_and(|o| o.include_usage);
    let app = Arc::clone(app);
    let mut offset = 0;
    let chunk = move |text: &str, logprobs: Value, finish: Value| {
        json!({ "id": id, "object": "text_completion", "created": created, "model": model,
                "choices": [{ "index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish }] })
    };
    Ok(stream::streaming(rx, Format::Sse, move |event| {
        let mut out = Vec::new();
        match event {
            Event::Token { token, text } => {
                if !text.is_empty() || logprobs.is_some() {
                    let lp = logprobs.map_or(Value::Null, |_| {
                        completion_logprobs(&app, std::slice::from_ref(&token), as_ids, offset)
                    });
                    offset += app.token_text(token.id, as_ids).len();
                    out.extend(Format::Sse.record(&chunk(&text, lp, Value::Null)));
                }
            }
            Event::Done { text, finish, usage } => {
                out.extend(Format::Sse.record(&chunk(&text, Value::Null, json!(finish.reason()))));
                if include_usage {
                    let mut u = chunk("", Value::Null, Value::Null);
                    u["choices"] = json!([]);
                    u["usage"] = usage_json(&usage);
                    out.extend(Format::Sse.record(&u));
                }
                out.extend(SSE_DONE);
            }
            Event::Failed(message) => {
                out.extend(Format::Sse.record(&ApiError::new(ErrorKind::Internal, message).body()));
                out.extend(SSE_DONE);
            }
        }
        out
    }))
}

fn model_object(app: &App) -> Value {
    json!({ "id": app.name, "object": "model", "created": app.started, "owned_by": "baro" })
}

pub async fn models(State(app): State<Arc<App>>) -> Response {
    json_response(StatusCode::OK, &json!({ "object": "list", "data": [model_object(&app)] }))
}

/// `GET /v1/models/{id}`: the served model, or a 404 in OpenAI's shape.
pub async fn model(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let result = app.check_model(Some(&id)).map(|()| json_response(StatusCode::OK, &model_object(&app)));
    respond(&app, Flavor::OpenAi, result)
}

/// `POST /v1/embeddings`: refused with 501. The engine computes logits only; its final hidden
/// state is not read back, and an embedding from a chat model's last position is not one a
/// client could rely on.
pub async fn embeddings(State(app): State<Arc<App>>) -> Response {
    respond(&app, Flavor::OpenAi, Err(not_embedding_model()))
}

/// The 501 of both embedding routes.
pub fn not_embedding_model() -> ApiError {
    ApiError::new(ErrorKind::NotImplemented, "embeddings: expected an embedding model, found a generative qwen35moe model whose engine computes logits only (embeddings are not served)")
}
