//! Reading a request body as a typed JSON request. Every failure is an `ApiError` that says what
//! was expected and what was found: an empty body or a syntax error is 400, JSON of the wrong
//! shape (a missing field, a string where a number belongs) is 422 with serde's description
//! and position. Unknown fields are ignored, as the OpenAI and Ollama servers ignore them.

use serde::de::DeserializeOwned;

use crate::server::error::{ApiError, ErrorKind};

/// Parses `body` as the request of `route` (named in the message).
pub fn parse<T: DeserializeOwned>(body: &[u8], route: &str) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(ErrorKind::BadRequest, format!("{route}: expected a JSON object in the request body, found an empty body")));
    }
    let malformed = |e: serde_json::Error| ApiError::new(ErrorKind::BadRequest, format!("{route}: expected a JSON object in the request body, found malformed JSON ({e})"));
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        use serde_json::error::Category;
        let path = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            Category::Syntax | Category::Eof | Category::Io => malformed(inner),
            Category::Data if path == "." => ApiError::new(ErrorKind::Unprocessable, format!("{route}: request body: {inner}")),
            Category::Data => {
                let mut e = ApiError::new(ErrorKind::Unprocessable, format!("{route}: field `{path}`: {inner}"));
                e.param = Some(path);
                e
            }
        }
    })?;
    de.end().map_err(malformed)?;
    Ok(value)
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
