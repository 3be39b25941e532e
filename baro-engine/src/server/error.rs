//! The errors a request can get back, and how each API spells them: OpenAI's
//! `{"error": {"message", "type", "param", "code"}}` or Ollama's `{"error": "message"}`.
//! Every message says what was expected and what was found, in lowercase; the kind says whose
//! fault it is (the client's request or credentials, a full queue, a model still loading, or
//! the server). Never panics.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Whose fault an error is, and so its status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// 400: the body is not JSON, a field has the wrong type or is missing, or a parameter is
    /// out of range (OpenAI answers 400 for all of these, never 422).
    BadRequest,
    /// 401: `--api-key` is set and the request's bearer token is missing or wrong.
    Unauthorized,
    /// 404: no such model or route.
    NotFound,
    /// 405: the route exists but not with this method.
    MethodNotAllowed,
    /// 413: the body is larger than `--max-body`.
    PayloadTooLarge,
    /// 501: the route exists but the server cannot serve it (embeddings).
    NotImplemented,
    /// 503 while the model is still loading; the client may retry.
    Loading,
    /// 503: the bounded queue is full; the client may retry later.
    QueueFull,
    /// 500: the engine failed (a device error, or a bug in baro).
    Internal,
}

impl ErrorKind {
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            ErrorKind::Loading => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::QueueFull => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// OpenAI's `error.type`.
    fn openai_type(self) -> &'static str {
        match self {
            ErrorKind::BadRequest | ErrorKind::MethodNotAllowed | ErrorKind::PayloadTooLarge => "invalid_request_error",
            ErrorKind::Unauthorized => "authentication_error",
            ErrorKind::NotFound => "not_found_error",
            ErrorKind::NotImplemented => "not_implemented_error",
            ErrorKind::Loading => "server_loading",
            ErrorKind::QueueFull => "server_overloaded",
            ErrorKind::Internal => "server_error",
        }
    }
}

/// Which API's error shape a response uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    OpenAi,
    Ollama,
}

/// An error response.
#[derive(Clone, Debug)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
    /// The request field at fault, when there is one (OpenAI's `param`).
    pub param: Option<String>,
    pub flavor: Flavor,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError { kind, message: message.into(), param: None, flavor: Flavor::OpenAi }
    }

    /// A parameter out of range: `{param}: expected {expected}, found {found}`.
    pub fn bad_param(param: &str, expected: impl std::fmt::Display, found: impl std::fmt::Display) -> ApiError {
        ApiError {
            kind: ErrorKind::BadRequest,
            message: format!("{param}: expected {expected}, found {found}"),
            param: Some(param.to_string()),
            flavor: Flavor::OpenAi,
        }
    }

    pub fn in_flavor(mut self, flavor: Flavor) -> ApiError {
        self.flavor = flavor;
        self
    }

    /// The JSON body of this error in its flavor.
    pub fn body(&self) -> serde_json::Value {
        match self.flavor {
            Flavor::OpenAi => serde_json::json!({
                "error": {
                    "message": self.message,
                    "type": self.kind.openai_type(),
                    "param": self.param,
                    "code": self.kind.status().as_u16(),
                }
            }),
            Flavor::Ollama => serde_json::json!({ "error": self.message }),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_response(self.kind.status(), &self.body());
        if matches!(self.kind, ErrorKind::QueueFull | ErrorKind::Loading) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// A JSON response with `status`.
pub fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    let body = serde_json::to_vec(value)
        .unwrap_or_else(|e| format!("{{\"error\":\"cannot serialize the response: {e}\"}}").into_bytes());
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}
