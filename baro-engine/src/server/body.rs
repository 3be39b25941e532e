//! Reading a request body as a typed JSON request. Every failure is an `ApiError` that says what
//! was expected and what was found: an empty body or a syntax error is 400, JSON of the wrong
//! shape (a missing field, a string where a number belongs) is 422 with serde's description
//! (the field named). Unknown fields are ignored, as the OpenAI and Ollama servers ignore them.

use serde::de::DeserializeOwned;

use crate::server::error::{ApiError, ErrorKind};

/// Parses `body` as the request of `route` (named in the message).
pub fn parse<T: DeserializeOwned>(body: &[u8], route: &str) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(ErrorKind::BadRequest, format!("{route}: expected a JSON object in the request body, found an empty body")));
    }
    // Syntax first, so malformed JSON is a 400 whatever its shape.
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("{route}: expected a JSON object in the request body, found malformed JSON ({e})")))?;
    if !value.is_object() {
        let found = match &value {
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return Err(ApiError::new(ErrorKind::BadRequest, format!("{route}: expected a JSON object in the request body, found {found}")));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            return ApiError::new(ErrorKind::Unprocessable, format!("{route}: request body: {inner}"));
        }
        let mut e = ApiError::new(ErrorKind::Unprocessable, format!("{route}: field `{path}`: {inner}"));
        e.param = Some(path);
        e
    })
}

/// A string or a list of strings (OpenAI's `stop`).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}
