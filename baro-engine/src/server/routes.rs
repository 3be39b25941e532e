//! The route table, the health, root and metrics routes, the fallbacks for unknown paths and
//! methods, the layers every request passes (the body limit, the API key, the loading gate,
//! and the last one, which gives any error still in another shape its API's JSON shape), and
//! `respond`, through which every route's result passes: an error gets its API's shape and is
//! counted (4xx as invalid, 503 as rejected). Holds no API's logic.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;

use crate::server::error::{json_response, ApiError, ErrorKind, Flavor};
use crate::server::metrics;
use crate::server::{ollama, openai, App};

/// Every route, as the not-found message lists them.
const ROUTES: &str = "POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /v1/models/{id}, POST /api/chat, POST /api/generate, \
    GET /api/tags, POST /api/show, GET /api/ps, GET /api/version, GET /, GET /health, GET /metrics";

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai::chat))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/models", get(openai::models))
        .route("/v1/models/{id}", get(openai::model))
        .route("/v1/embeddings", post(openai::embeddings))
        .route("/api/chat", post(ollama::chat))
        .route("/api/generate", post(ollama::generate))
        .route("/api/tags", get(ollama::tags))
        .route("/api/show", post(ollama::show))
        .route("/api/ps", get(ollama::ps))
        .route("/api/embed", post(ollama::embed))
        .route("/api/embeddings", post(ollama::embed))
        .route("/api/version", get(ollama::version))
        .route("/", get(root))
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&app), gate))
        .layer(DefaultBodyLimit::max(app.config.max_body))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), json_errors))
        .with_state(app)
}

/// The API a path belongs to, for its error shape.
pub fn flavor_of(path: &str) -> Flavor {
    if path.starts_with("/api/") {
        Flavor::Ollama
    } else {
        Flavor::OpenAi
    }
}

/// A route's response, or its error in `flavor`'s shape (counted).
pub fn respond(app: &App, flavor: Flavor, result: Result<Response, ApiError>) -> Response {
    match result {
        Ok(r) => r,
        Err(e) => {
            match e.kind {
                ErrorKind::QueueFull | ErrorKind::Loading => metrics::add(&app.metrics.rejected, 1),
                ErrorKind::BadRequest
                | ErrorKind::Unauthorized
                | ErrorKind::NotFound
                | ErrorKind::MethodNotAllowed
                | ErrorKind::PayloadTooLarge
                | ErrorKind::NotImplemented => metrics::add(&app.metrics.invalid, 1),
                ErrorKind::Internal => {}
            }
            e.in_flavor(flavor).into_response()
        }
    }
}

/// Paths open without the API key and while the model loads.
fn is_open(path: &str) -> bool {
    matches!(path, "/" | "/health" | "/metrics" | "/api/version")
}

/// The API key (on both APIs' paths) and then the loading gate: 401 without the right bearer
/// token, 503 "loading" until the model is ready, each in the path's API shape.
async fn gate(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if let Some(key) = app.config.api_key.as_deref() {
        if !is_open(&path) && !bearer_matches(request.headers().get(header::AUTHORIZATION), key) {
            let found = if request.headers().contains_key(header::AUTHORIZATION) {
                "a different credential"
            } else {
                "no Authorization header"
            };
            let e = ApiError::new(ErrorKind::Unauthorized, format!("authorization: expected the header `Authorization: Bearer <key>` with the server's --api-key, found {found}"));
            let mut response = respond(&app, flavor_of(&path), Err(e));
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    // `/api/ps` and `/api/tags` say what is loaded; they answer while loading.
    if !app.is_ready() && !is_open(&path) && path != "/api/ps" && path != "/api/tags" {
        return respond(&app, flavor_of(&path), app.ready().map(|_| Response::default()));
    }
    next.run(request).await
}

/// Whether `value` is `Bearer <key>`, compared in time independent of where they differ.
fn bearer_matches(value: Option<&HeaderValue>, key: &str) -> bool {
    let Some(token) = value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
    else {
        return false;
    };
    let (a, b) = (token.trim().as_bytes(), key.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Gives an error response that is not JSON (axum's own: a body over the limit, a rejected
/// extractor) its API's JSON shape, with the same status.
async fn json_errors(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    let is_json =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 64 << 10).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    };
    let (kind, message) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            ErrorKind::PayloadTooLarge,
            format!(
                "request body: expected at most {} bytes (the server's --max-body), found more",
                app.config.max_body
            ),
        ),
        s if s.is_client_error() => (ErrorKind::BadRequest, format!("{path}: {}", text.to_lowercase())),
        _ => (ErrorKind::Internal, format!("{path}: {text}")),
    };
    let mut response = respond(&app, flavor_of(&path), Err(ApiError::new(kind, message)));
    *response.status_mut() = status;
    response
}

/// `GET /` and `HEAD /`: liveness, answered as soon as the port is bound (as Ollama's `/`);
/// `/health` says whether the model is ready.
async fn root(State(app): State<Arc<App>>) -> Response {
    let text = if app.is_ready() { "baro-engine is running" } else { "baro-engine is running (model loading)" };
    (StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], text)
        .into_response()
}

/// Readiness: 200 once the model is loaded, 503 `"status": "loading"` before.
async fn health(State(app): State<Arc<App>>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    if !app.is_ready() {
        return json_response(StatusCode::SERVICE_UNAVAILABLE, &json!({ "status": "loading", "model": app.name }));
    }
    let (in_flight, active) = (app.metrics.in_flight.load(Relaxed), app.metrics.active.load(Relaxed));
    let body = json!({
        "status": "ok", "model": app.name,
        "active": active, "waiting": in_flight.saturating_sub(active), "queue_limit": app.config.max_queue,
    });
    json_response(StatusCode::OK, &body)
}

async fn metrics_text(State(app): State<Arc<App>>) -> Response {
    let text = app.metrics.render(app.config.max_queue);
    (StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], text)
        .into_response()
}

async fn not_found(State(app): State<Arc<App>>, method: Method, uri: Uri) -> Response {
    let message = format!("{method} {}: expected one of {ROUTES}; found no such route", uri.path());
    respond(&app, flavor_of(uri.path()), Err(ApiError::new(ErrorKind::NotFound, message)))
}

async fn method_not_allowed(State(app): State<Arc<App>>, method: Method, uri: Uri) -> Response {
    let path = uri.path();
    let expected = match path {
        "/v1/models" | "/api/tags" | "/api/ps" | "/api/version" | "/" | "/health" | "/metrics" => "GET",
        p if p.starts_with("/v1/models/") => "GET",
        _ => "POST",
    };
    let mut response = respond(
        &app,
        flavor_of(path),
        Err(ApiError::new(ErrorKind::MethodNotAllowed, format!("{path}: expected {expected}, found {method}"))),
    );
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(expected));
    response
}
