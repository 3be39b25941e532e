//! The Ollama-compatible routes: `POST /api/generate`, `POST /api/chat` (streaming NDJSON by
//! default, one object with `done: true` last; `"stream": false` for one object), `GET
//! /api/tags`, `POST /api/show`, `GET /api/ps` and `GET /api/version` (`/api/embed` answers
//! 501: no embeddings). Sampling comes from `options` with Ollama's defaults (temperature 0.8,
//! top_k 40, top_p 0.9, repeat_penalty 1.1; no `num_predict`: the server's --max-tokens;
//! `num_predict` -1 or -2: until a stop or the context is full; a negative `seed`: random). A
//! request without a prompt or messages only "loads" the model, as Ollama's does. Durations
//! are nanoseconds; `created_at` is RFC 3339 in UTC.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::sampling::SamplerConfig;
use crate::server::body;
use crate::server::constrain::Spec;
use crate::server::error::{json_response, ApiError, Flavor};
use crate::server::job::{Event, Finish, Usage};
use crate::server::params::{self, Request};
use crate::server::routes::respond;
use crate::server::stream::{self, Format};
use crate::server::tools::{self, Call, Piece, ToolParser};
use crate::server::App;
use crate::tokenizer::ChatMessage;

#[derive(Deserialize, Default)]
struct Options {
    temperature: Option<f32>,
    top_k: Option<i64>,
    top_p: Option<f32>,
    min_p: Option<f32>,
    repeat_penalty: Option<f32>,
    seed: Option<serde_json::Number>,
    num_predict: Option<i64>,
    stop: Option<Value>,
}

#[derive(Deserialize)]
struct GenerateRequest {
    model: Option<String>,
    prompt: Option<String>,
    system: Option<String>,
    #[serde(default)]
    raw: bool,
    stream: Option<bool>,
    options: Option<Options>,
    format: Option<Value>,
    grammar: Option<String>,
    images: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct MessageIn {
    role: String,
    #[serde(default)]
    content: String,
    images: Option<Vec<Value>>,
    tool_calls: Option<Value>,
    tool_name: Option<String>,
}

#[derive(Deserialize)]
struct ChatRequest {
    model: Option<String>,
    #[serde(default)]
    messages: Vec<MessageIn>,
    stream: Option<bool>,
    options: Option<Options>,
    format: Option<Value>,
    grammar: Option<String>,
    tools: Option<Value>,
}

/// What both routes take from `options`.
struct Settings {
    sampler: SamplerConfig,
    max_tokens: usize,
    stops: Vec<String>,
    spec: Option<Spec>,
}

fn settings(
    app: &App,
    options: Option<Options>,
    format: Option<Value>,
    grammar: Option<String>,
) -> Result<Settings, ApiError> {
    let spec = params::ollama_spec(format, grammar)?;
    let o = options.unwrap_or_default();
    let limits = app.limits();
    // Ollama's -1 (generate until a stop or the context ends) and -2 (fill the context) are
    // the same here, where the context never shifts: the sequence ends at a stop or when its
    // context is full (`done_reason` "length"). They are bounded by the context, not by
    // --max-tokens, which bounds counts given and the default.
    let max_tokens = match o.num_predict {
        Some(-1 | -2) => limits.ctx,
        Some(n) if n < 0 => {
            return Err(ApiError::bad_param(
                "options.num_predict",
                "-1 (until a stop or the context ends), -2 (fill the context) or a count of at least 1",
                n,
            ))
        }
        n => params::max_tokens(n, "options.num_predict", limits.max_tokens, &limits)?,
    };
    let config = SamplerConfig {
        temperature: o.temperature.unwrap_or(0.8),
        top_k: params::top_k(o.top_k.or(Some(40)), "options.top_k")?,
        top_p: o.top_p.unwrap_or(0.9),
        min_p: o.min_p.unwrap_or(0.0),
        repetition_penalty: o.repeat_penalty.unwrap_or(1.1),
        seed: body::seed(o.seed.as_ref(), "options.seed")?.unwrap_or_else(rand::random),
    };
    let sampler = params::sampler(config, &|field| match field {
        "temperature" => "options.temperature",
        "top_p" => "options.top_p",
        "min_p" => "options.min_p",
        "repetition_penalty" => "options.repeat_penalty",
        other => other,
    })?;
    let stops = params::stops(body::strings(o.stop, "options.stop")?, "options.stop")?;
    Ok(Settings { sampler, max_tokens, stops, spec })
}

/// RFC 3339 UTC with microseconds, from the system clock.
fn created_at() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The counts and durations of the last object.
fn finished(v: &mut Value, finish: Finish, u: &Usage) {
    v["done"] = json!(true);
    v["done_reason"] = json!(finish.reason());
    v["total_duration"] = json!(nanos(u.prompt_time + u.gen_time));
    v["load_duration"] = json!(0);
    v["prompt_eval_count"] = json!(u.prompt_tokens);
    v["prompt_eval_duration"] = json!(nanos(u.prompt_time));
    v["eval_count"] = json!(u.completion_tokens);
    v["eval_duration"] = json!(nanos(u.gen_time));
}

/// Which route: `/api/generate` puts text in `response`, `/api/chat` in `message.content`.
#[derive(Clone, Copy)]
enum Route {
    Generate,
    Chat,
}

impl Route {
    fn object(self, model: &str, text: &str) -> Value {
        match self {
            Route::Generate => json!({ "model": model, "created_at": created_at(), "response": text, "done": false }),
            Route::Chat => {
                json!({ "model": model, "created_at": created_at(), "message": { "role": "assistant", "content": text }, "done": false })
            }
        }
    }
}

/// An Ollama tool call: the arguments as an object.
fn call_json(call: &Call) -> Value {
    json!({ "function": { "name": call.name, "arguments": call.arguments } })
}

/// The objects of `pieces` while streaming: content as content, each call in `tool_calls`.
fn tool_objects(route: Route, model: &str, pieces: Vec<Piece>) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces {
        let v = match piece {
            Piece::Content(c) => route.object(model, &c),
            Piece::Call(call) => {
                let mut v = route.object(model, "");
                v["message"]["tool_calls"] = json!([call_json(&call)]);
                v
            }
        };
        out.extend(Format::Ndjson.record(&v));
    }
    out
}

/// `tools`: parse `<tool_call>` blocks out of the output (the chat route with tools).
async fn generation(
    app: &Arc<App>,
    route: Route,
    prompt: Vec<u32>,
    s: Settings,
    stream: bool,
    tools: bool,
) -> Result<Response, ApiError> {
    let (field, path) = match route {
        Route::Generate => ("prompt", "/api/generate"),
        Route::Chat => ("messages", "/api/chat"),
    };
    app.check_prompt(&prompt, field)?;
    let constraint_field = if matches!(s.spec, Some(Spec::Lark(_))) { "grammar" } else { "format" };
    let constraint = app.constraint(s.spec.as_ref(), constraint_field)?;
    let id = params::request_id("ollama");
    let rx = app.start(Request {
        id,
        route: path,
        prompt,
        sampler: s.sampler,
        max_tokens: s.max_tokens,
        stops: s.stops,
        logprobs: None,
        constraint,
        show_specials: tools,
    })?;
    let model = app.name.clone();
    if !stream {
        let out = stream::collect(rx).await?;
        let mut v = route.object(&model, &out.text);
        if tools {
            let mut parser = ToolParser::default();
            let mut pieces = parser.push(&out.text);
            pieces.extend(parser.finish());
            let (mut content, mut calls) = (String::new(), Vec::new());
            for piece in pieces {
                match piece {
                    Piece::Content(c) => content.push_str(&c),
                    Piece::Call(call) => calls.push(call_json(&call)),
                }
            }
            v["message"]["content"] = json!(content);
            if !calls.is_empty() {
                v["message"]["tool_calls"] = Value::Array(calls);
            }
        }
        finished(&mut v, out.finish, &out.usage);
        return Ok(json_response(StatusCode::OK, &v));
    }
    let mut parser = tools.then(ToolParser::default);
    Ok(stream::streaming(rx, Format::Ndjson, move |event| match event {
        Event::Token { text, .. } if parser.is_some() => {
            tool_objects(route, &model, parser.as_mut().map(|p| p.push(&text)).unwrap_or_default())
        }
        Event::Done { text, finish, usage } if parser.is_some() => {
            let mut pieces = Vec::new();
            if let Some(p) = parser.as_mut() {
                pieces = p.push(&text);
                pieces.extend(p.finish());
            }
            let mut out = tool_objects(route, &model, pieces);
            let mut v = route.object(&model, "");
            finished(&mut v, finish, &usage);
            out.extend(Format::Ndjson.record(&v));
            out
        }
        Event::Token { text, .. } if text.is_empty() => Vec::new(),
        Event::Token { text, .. } => Format::Ndjson.record(&route.object(&model, &text)),
        Event::Done { text, finish, usage } => {
            let mut out =
                if text.is_empty() { Vec::new() } else { Format::Ndjson.record(&route.object(&model, &text)) };
            let mut v = route.object(&model, "");
            finished(&mut v, finish, &usage);
            out.extend(Format::Ndjson.record(&v));
            out
        }
        Event::Failed(message) => Format::Ndjson.record(&json!({ "error": message })),
    }))
}

/// Ollama's answer to a request that only loads the model.
fn loaded(app: &App, route: Route) -> Response {
    let mut v = route.object(&app.name, "");
    v["done"] = json!(true);
    v["done_reason"] = json!("load");
    json_response(StatusCode::OK, &v)
}

pub async fn generate(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let result = generate_inner(&app, &body).await;
    respond(&app, Flavor::Ollama, result)
}

async fn generate_inner(app: &Arc<App>, body: &[u8]) -> Result<Response, ApiError> {
    let r: GenerateRequest = body::parse(body, "/api/generate")?;
    app.check_model(r.model.as_deref())?;
    if r.images.is_some_and(|i| !i.is_empty()) {
        return Err(ApiError::bad_param("images", "none (this model reads text only)", "images"));
    }
    let s = settings(app, r.options, r.format, r.grammar)?;
    let text = r.prompt.unwrap_or_default();
    if text.is_empty() {
        return Ok(loaded(app, Route::Generate));
    }
    let prompt = if r.raw {
        app.text_prompt(&text, "prompt")?
    } else {
        let mut messages = Vec::new();
        if let Some(system) = r.system {
            messages.push(ChatMessage::new("system", &system));
        }
        messages.push(ChatMessage::new("user", &text));
        app.chat_prompt(&messages, "prompt")?
    };
    generation(app, Route::Generate, prompt, s, r.stream.unwrap_or(true), false).await
}

pub async fn chat(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let result = chat_inner(&app, &body).await;
    respond(&app, Flavor::Ollama, result)
}

async fn chat_inner(app: &Arc<App>, body: &[u8]) -> Result<Response, ApiError> {
    let r: ChatRequest = body::parse(body, "/api/chat")?;
    app.check_model(r.model.as_deref())?;
    let s = settings(app, r.options, r.format, r.grammar)?;
    if r.messages.is_empty() {
        return Ok(loaded(app, Route::Chat));
    }
    let mut messages = Vec::with_capacity(r.messages.len());
    for (i, m) in r.messages.into_iter().enumerate() {
        if m.images.is_some_and(|i| !i.is_empty()) {
            return Err(ApiError::bad_param(
                &format!("messages[{i}].images"),
                "none (this model reads text only)",
                "images",
            ));
        }
        let tool_calls = tools::message_calls(m.tool_calls, &format!("messages[{i}].tool_calls"))?;
        messages.push(ChatMessage {
            role: m.role,
            content: m.content,
            tool_calls,
            tool_call_id: None,
            name: m.tool_name,
        });
    }
    let (offered, tools_json) = tools::parse_tools(r.tools, "tools")?;
    let prompt = app.chat_prompt_with_tools(&messages, tools_json.as_ref(), "messages")?;
    generation(app, Route::Chat, prompt, s, r.stream.unwrap_or(true), !offered.is_empty()).await
}

fn details(app: &App) -> Value {
    json!({ "parent_model": "", "format": "gguf", "family": app.family, "families": [app.family], "parameter_size": "", "quantization_level": "" })
}

pub async fn tags(State(app): State<Arc<App>>) -> Response {
    let body = json!({ "models": [{
        "name": app.name, "model": app.name, "modified_at": created_at(), "size": app.size_bytes, "digest": "", "details": details(&app),
    }] });
    json_response(StatusCode::OK, &body)
}

#[derive(Deserialize)]
struct ShowRequest {
    model: Option<String>,
    /// The older spelling of `model`.
    name: Option<String>,
}

/// `POST /api/show`: the served model's details, template and default parameters.
pub async fn show(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let result = show_inner(&app, &body);
    respond(&app, Flavor::Ollama, result)
}

fn show_inner(app: &App, body: &[u8]) -> Result<Response, ApiError> {
    let r: ShowRequest = body::parse(body, "/api/show")?;
    let model = r.model.or(r.name).unwrap_or_default();
    if model.is_empty() {
        return Err(ApiError::bad_param("model", "the name of a model", "none"));
    }
    app.check_model(Some(&model))?;
    let ready = app.ready()?;
    let parameters = format!("temperature 0.8\ntop_k 40\ntop_p 0.9\nrepeat_penalty 1.1\nnum_ctx {}", app.ctx());
    let body = json!({
        "modelfile": format!("FROM {}\n", app.name),
        "parameters": parameters,
        "template": ready.template_source,
        "details": details(app),
        "model_info": { "general.architecture": app.family, format!("{}.context_length", app.family): app.ctx() },
        "capabilities": ["completion"],
        "modified_at": created_at(),
    });
    Ok(json_response(StatusCode::OK, &body))
}

/// `GET /api/ps`: the loaded model (none while loading); it never unloads.
pub async fn ps(State(app): State<Arc<App>>) -> Response {
    let models = if app.is_ready() {
        json!([{
            "name": app.name, "model": app.name, "size": app.size_bytes, "digest": "", "details": details(&app),
            "expires_at": "2999-01-01T00:00:00Z", "size_vram": 0, "context_length": app.ctx(),
        }])
    } else {
        json!([])
    };
    json_response(StatusCode::OK, &json!({ "models": models }))
}

/// `POST /api/embed` and `/api/embeddings`: 501 in Ollama's shape (see `openai::embeddings`).
pub async fn embed(State(app): State<Arc<App>>) -> Response {
    respond(&app, Flavor::Ollama, Err(crate::server::openai::not_embedding_model()))
}

pub async fn version() -> Response {
    json_response(StatusCode::OK, &json!({ "version": env!("CARGO_PKG_VERSION") }))
}
