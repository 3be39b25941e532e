//! Reading a request body as a typed JSON request. Every failure is a 400 `ApiError` that says
//! what was expected and what was found: an empty body, a syntax error, JSON of the wrong shape
//! (a missing field, a string where a number belongs, the field named). OpenAI answers 400 for
//! all of these, never 422. Fields that may take several shapes (a prompt, a message's
//! content, a stop list, a seed) are read here from a `serde_json::Value` with a message
//! naming every accepted shape, never serde's "did not match any variant". Unknown fields are
//! ignored, as the OpenAI and Ollama servers ignore them.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::server::error::{ApiError, ErrorKind};
use crate::tokenizer::TokenId;

/// Parses `body` as the request of `route` (named in the message).
pub fn parse<T: DeserializeOwned>(body: &[u8], route: &str) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            format!("{route}: expected a JSON object in the request body, found an empty body"),
        ));
    }
    // Syntax first, so malformed JSON is a 400 whatever its shape.
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorKind::BadRequest,
            format!("{route}: expected a JSON object in the request body, found malformed JSON ({e})"),
        )
    })?;
    if !value.is_object() {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            format!("{route}: expected a JSON object in the request body, found {}", kind_of(&value)),
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = plain(&e.into_inner().to_string());
        if path == "." {
            return ApiError::new(ErrorKind::BadRequest, format!("{route}: request body: {inner}"));
        }
        let mut e = ApiError::new(ErrorKind::BadRequest, format!("{path}: {inner}"));
        e.param = Some(path);
        e
    })
}

/// serde's "invalid type: string \"hot\", expected f32" as "expected a number, found string
/// \"hot\"", in the house's expected-then-found order and without Rust type names.
fn plain(message: &str) -> String {
    let rust_names = |s: &str| match s {
        "f32" | "f64" => "a number".to_string(),
        "i64" | "u64" | "i32" | "u32" | "usize" => "an integer".to_string(),
        "a boolean" | "a string" | "a sequence" | "a map" => s.to_string(),
        other => other.to_string(),
    };
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((found, expected)) = rest.rsplit_once(", expected ") {
                return format!("expected {}, found {found}", rust_names(expected));
            }
        }
    }
    message.to_string()
}

/// How a JSON value is described in a message.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A string or a list of strings (OpenAI's `stop`); null is none.
pub fn strings(v: Option<Value>, field: &str) -> Result<Vec<String>, ApiError> {
    let expected = "a string or a list of strings";
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s]),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s),
                other => Err(ApiError::bad_param(field, expected, format!("{} at index {i}", kind_of(&other)))),
            })
            .collect(),
        Some(other) => Err(ApiError::bad_param(field, expected, kind_of(&other))),
    }
}

/// A seed: any integer; a negative one (clients send -1) means a random seed, as no seed does.
pub fn seed(v: Option<&serde_json::Number>, field: &str) -> Result<Option<u64>, ApiError> {
    let Some(n) = v else { return Ok(None) };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    if n.as_i64().is_some() {
        return Ok(None);
    }
    Err(ApiError::bad_param(field, "an integer (negative: a random seed)", n))
}

/// One completions prompt: text, or token ids.
pub enum Prompt {
    Text(String),
    Ids(Vec<TokenId>),
}

/// OpenAI's `prompt`: a string, a list of token ids, or a batch of one of either (a longer
/// batch is refused: one request per prompt).
pub fn prompt(v: Option<Value>, field: &str) -> Result<Prompt, ApiError> {
    let expected = "a string, a list of token ids, or a list of one string or one token-id list";
    let ids = |items: &[Value]| -> Option<Vec<TokenId>> {
        items.iter().map(|x| x.as_u64().and_then(|n| TokenId::try_from(n).ok())).collect()
    };
    let one = |n: usize| -> Result<(), ApiError> {
        match n {
            1 => Ok(()),
            n => Err(ApiError::bad_param(field, "one prompt (send one request per prompt)", format!("a batch of {n}"))),
        }
    };
    match v {
        None | Some(Value::Null) => Err(ApiError::bad_param(field, expected, "none")),
        Some(Value::String(s)) => Ok(Prompt::Text(s)),
        Some(Value::Array(items)) => {
            if items.is_empty() {
                return Err(ApiError::bad_param(field, expected, "an empty list"));
            }
            if let Some(ids) = ids(&items) {
                return Ok(Prompt::Ids(ids));
            }
            match &items[0] {
                Value::String(_) if items.iter().all(Value::is_string) => {
                    one(items.len())?;
                    Ok(Prompt::Text(items[0].as_str().unwrap_or_default().to_string()))
                }
                Value::Array(inner) if items.iter().all(Value::is_array) => {
                    one(items.len())?;
                    ids(inner).map(Prompt::Ids).ok_or_else(|| {
                        ApiError::bad_param(field, "token ids (integers from 0)", "a list holding something else")
                    })
                }
                Value::Number(_) => {
                    Err(ApiError::bad_param(field, "token ids (integers from 0)", "a list holding something else"))
                }
                first => Err(ApiError::bad_param(
                    field,
                    expected,
                    format!("a list of {}s", kind_of(first).trim_start_matches("an ").trim_start_matches("a ")),
                )),
            }
        }
        Some(other) => Err(ApiError::bad_param(field, expected, kind_of(&other))),
    }
}

/// A message's content: text, a list of text parts, or null (empty).
pub fn content(v: Option<Value>, field: &str) -> Result<String, ApiError> {
    let expected = "a string or a list of text parts ({\"type\": \"text\", \"text\": ...})";
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (i, p) in parts.iter().enumerate() {
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    (Some(kind), _) if kind != "text" => {
                        return Err(ApiError::bad_param(
                            &format!("{field}[{i}]"),
                            "text parts (this model reads text only)",
                            format!("a part of type {kind:?}"),
                        ))
                    }
                    _ => return Err(ApiError::bad_param(&format!("{field}[{i}]"), expected, kind_of(p))),
                }
            }
            Ok(text)
        }
        Some(other) => Err(ApiError::bad_param(field, expected, kind_of(&other))),
    }
}
