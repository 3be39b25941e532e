//! The checks every generation route shares, in the API's own field names: the token limit,
//! sampling settings, the prompt against the context, logprob counts; and `App::start`, which
//! takes a place in the bounded queue (503 when full) and hands the job to the scheduler.
//! A check never clamps a bad value silently: it is a 400 saying what was expected and found.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::sampling::{SampleError, SamplerConfig};
use crate::server::body::kind_of;
use crate::server::constrain::{Constraint, Spec};
use crate::server::error::{ApiError, ErrorKind};
use crate::server::job::{Event, Job, Ticket};
use crate::server::metrics;
use crate::server::App;
use crate::tokenizer::TokenId;
use serde_json::Value;

/// Per-request limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The most tokens one request may generate.
    pub max_tokens: usize,
    /// The most tokens a sequence holds (prompt and generated).
    pub ctx: usize,
}

/// The most `top_logprobs` the routes accept (OpenAI's bound).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The most stop strings one request may give.
pub const MAX_STOPS: usize = 16;

/// `requested` tokens (`None`: `default`, capped by the limit) against the server's limit.
pub fn max_tokens(requested: Option<i64>, field: &str, default: usize, limits: &Limits) -> Result<usize, ApiError> {
    match requested {
        None => Ok(default.min(limits.max_tokens).max(1)),
        Some(n) if n < 1 => Err(ApiError::bad_param(field, "at least 1", n)),
        Some(n) if n as u64 > limits.max_tokens as u64 => {
            Err(ApiError::bad_param(field, format!("at most {} (the server's --max-tokens)", limits.max_tokens), n))
        }
        Some(n) => Ok(n as usize),
    }
}

/// A top-k setting: 0 or a negative value (vLLM's -1) is off.
pub fn top_k(requested: Option<i64>, field: &str) -> Result<usize, ApiError> {
    match requested {
        None => Ok(0),
        Some(n) if n < -1 => Err(ApiError::bad_param(field, "-1 or 0 (off), or a positive count", n)),
        Some(n) => Ok(n.max(0) as usize),
    }
}

/// The sampler settings, checked; `name` turns the sampler's field name into the API's.
pub fn sampler(config: SamplerConfig, name: &dyn Fn(&'static str) -> &'static str) -> Result<SamplerConfig, ApiError> {
    match config.validate() {
        Ok(()) => Ok(config),
        Err(SampleError::BadConfig { field, expected, found }) => {
            Err(ApiError::bad_param(name(field), expected, found))
        }
        Err(e) => Err(ApiError::new(ErrorKind::BadRequest, e.to_string())),
    }
}

/// A penalty the engine does not implement: only its neutral value 0 is accepted.
pub fn unsupported_penalty(value: Option<f32>, field: &str) -> Result<(), ApiError> {
    match value {
        Some(v) if v != 0.0 => Err(ApiError::bad_param(field, "0 (not supported; use repetition_penalty)", v)),
        _ => Ok(()),
    }
}

/// The number of top log-probabilities asked for, checked.
pub fn top_logprobs(requested: Option<i64>, field: &str) -> Result<usize, ApiError> {
    match requested {
        None => Ok(0),
        Some(n) if n < 0 || n as u64 > MAX_TOP_LOGPROBS as u64 => {
            Err(ApiError::bad_param(field, format!("a count in 0..={MAX_TOP_LOGPROBS}"), n))
        }
        Some(n) => Ok(n as usize),
    }
}

/// The stop strings, checked.
pub fn stops(stops: Vec<String>, field: &str) -> Result<Vec<String>, ApiError> {
    if stops.len() > MAX_STOPS {
        return Err(ApiError::bad_param(field, format!("at most {MAX_STOPS} stop strings"), stops.len()));
    }
    Ok(stops)
}

/// `n` choices: only 1 is served.
pub fn one_choice(n: Option<i64>) -> Result<(), ApiError> {
    match n {
        Some(n) if n != 1 => Err(ApiError::bad_param("n", "1 (one choice per request)", n)),
        _ => Ok(()),
    }
}

/// OpenAI's `response_format` (`text`, `json_object`, or `json_schema` with its `schema`; the
/// schema is always enforced, `strict` or not) and the `grammar` extension (Lark), at most one.
pub fn openai_spec(response_format: Option<Value>, grammar: Option<String>) -> Result<Option<Spec>, ApiError> {
    let format = match response_format {
        None | Some(Value::Null) => None,
        Some(v) => match v.get("type").and_then(Value::as_str) {
            Some("text") => None,
            Some("json_object") => Some(Spec::JsonObject),
            Some("json_schema") => match v.get("json_schema").and_then(|j| j.get("schema")) {
                Some(schema) => Some(Spec::JsonSchema(schema.clone())),
                None => return Err(ApiError::bad_param("response_format.json_schema.schema", "a JSON schema", "none")),
            },
            Some(other) => {
                return Err(ApiError::bad_param(
                    "response_format.type",
                    "\"text\", \"json_object\" or \"json_schema\"",
                    format!("{other:?}"),
                ))
            }
            None => return Err(ApiError::bad_param("response_format", "an object with a `type`", kind_of(&v))),
        },
    };
    one_spec(format, grammar, "response_format")
}

/// Ollama's `format` (`"json"` or a JSON schema) and the `grammar` extension (Lark), at most one.
pub fn ollama_spec(format: Option<Value>, grammar: Option<String>) -> Result<Option<Spec>, ApiError> {
    let format = match format {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) if s == "json" => Some(Spec::JsonObject),
        Some(schema @ Value::Object(_)) => Some(Spec::JsonSchema(schema)),
        Some(other) => return Err(ApiError::bad_param("format", "\"json\" or a JSON schema", format!("{other}"))),
    };
    one_spec(format, grammar, "format")
}

fn one_spec(format: Option<Spec>, grammar: Option<String>, format_field: &str) -> Result<Option<Spec>, ApiError> {
    match (format, grammar.filter(|g| !g.is_empty())) {
        (Some(_), Some(_)) => {
            Err(ApiError::bad_param("grammar", format!("one constraint: `{format_field}` or `grammar`"), "both"))
        }
        (f, g) => Ok(f.or(g.map(Spec::Lark))),
    }
}

/// A request id: the prefix, the start time and a counter.
pub fn request_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{:x}{:04x}", crate::server::unix_now(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What a route asks the scheduler for.
pub struct Request {
    /// The response id (`request_id`).
    pub id: String,
    pub route: &'static str,
    pub prompt: Vec<TokenId>,
    pub sampler: SamplerConfig,
    pub max_tokens: usize,
    pub stops: Vec<String>,
    pub logprobs: Option<usize>,
    pub constraint: Option<Constraint>,
    /// Whether special tokens' text is shown (the route parses tool calls from it).
    pub show_specials: bool,
}

impl App {
    /// Checks `model` against the served name: missing, empty, the name itself or the name
    /// with Ollama's `:latest` tag are this model; anything else is a 404.
    pub fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            None | Some("") => Ok(()),
            Some(m) if m == self.name || m.strip_suffix(":latest") == Some(self.name.as_str()) => Ok(()),
            Some(m) => Err(ApiError::new(
                ErrorKind::NotFound,
                format!("model {m:?}: expected {:?} (the model this server serves), found no such model", self.name),
            )),
        }
    }

    /// Compiles the constraint a request asked for, if any (a bad one is a 400 naming `field`).
    pub fn constraint(&self, spec: Option<&Spec>, field: &str) -> Result<Option<Constraint>, ApiError> {
        spec.map(|s| self.ready()?.grammars.compile(s, field)).transpose()
    }

    /// A single token's id, if `text` is one in the vocabulary.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.ready.get().and_then(|r| r.tokenizer.token_to_id(text))
    }

    /// Checks `prompt` against the context and the vocabulary.
    pub fn check_prompt(&self, prompt: &[TokenId], field: &str) -> Result<(), ApiError> {
        let ctx = self.ctx();
        if prompt.is_empty() {
            return Err(ApiError::bad_param(field, "at least one token", "an empty prompt"));
        }
        if prompt.len() > ctx {
            return Err(ApiError::bad_param(
                field,
                format!("at most {ctx} tokens (the server's context)"),
                format!("{} tokens", prompt.len()),
            ));
        }
        let n_ids = self.ready()?.tokenizer.n_ids();
        if let Some(&id) = prompt.iter().find(|&&id| id as usize >= n_ids) {
            return Err(ApiError::bad_param(field, format!("token ids below {n_ids} (the vocabulary)"), id));
        }
        Ok(())
    }

    /// Queues `request`: 503 when the queue is full; otherwise the events of its generation.
    pub fn start(&self, request: Request) -> Result<UnboundedReceiver<Event>, ApiError> {
        let limit = self.config.max_queue;
        let ticket = Ticket::take(&self.metrics, limit).map_err(|limit| {
            ApiError::new(ErrorKind::QueueFull, format!("queue full: expected fewer than {limit} requests waiting or running (limit {limit}), found {limit}; retry later"))
        })?;
        metrics::add(&self.metrics.admitted, 1);
        let (events, rx) = unbounded_channel();
        let Request { id, route, prompt, sampler, max_tokens, stops, logprobs, constraint, show_specials } = request;
        self.submit(Job {
            id,
            route,
            prompt,
            sampler,
            max_tokens,
            stops,
            logprobs,
            constraint,
            show_specials,
            events,
            ticket,
            received: Instant::now(),
        })?;
        Ok(rx)
    }
}
