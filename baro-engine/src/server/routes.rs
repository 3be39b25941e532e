//! The route table, the health and metrics routes, the fallback for unknown paths, and
//! `respond`, through which every route's result passes: an error gets its API's shape and is
//! counted (4xx as invalid, 503 as rejected). Holds no API's logic.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;

use crate::server::error::{json_response, ApiError, ErrorKind, Flavor};
use crate::server::metrics;
use crate::server::{ollama, openai, App};

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai::chat))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/models", get(openai::models))
        .route("/api/chat", post(ollama::chat))
        .route("/api/generate", post(ollama::generate))
        .route("/api/tags", get(ollama::tags))
        .route("/api/version", get(ollama::version))
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .with_state(app)
}

/// A route's response, or its error in `flavor`'s shape (counted).
pub fn respond(app: &App, flavor: Flavor, result: Result<Response, ApiError>) -> Response {
    match result {
        Ok(r) => r,
        Err(e) => {
            match e.kind {
                ErrorKind::QueueFull => metrics::add(&app.metrics.rejected, 1),
                ErrorKind::BadRequest | ErrorKind::Unprocessable | ErrorKind::NotFound => metrics::add(&app.metrics.invalid, 1),
                ErrorKind::Internal => {}
            }
            e.in_flavor(flavor).into_response()
        }
    }
}

async fn health(State(app): State<Arc<App>>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let (in_flight, active) = (app.metrics.in_flight.load(Relaxed), app.metrics.active.load(Relaxed));
    let body = json!({
        "status": "ok", "model": app.name,
        "active": active, "waiting": in_flight.saturating_sub(active), "queue_limit": app.config.max_queue,
    });
    json_response(StatusCode::OK, &body)
}

async fn metrics_text(State(app): State<Arc<App>>) -> Response {
    let text = app.metrics.render(app.config.max_queue);
    (StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], text).into_response()
}

async fn not_found(State(app): State<Arc<App>>, method: Method, uri: Uri) -> Response {
    let message = format!(
        "{method} {}: expected one of POST /v1/chat/completions, POST /v1/completions, GET /v1/models, POST /api/chat, POST /api/generate, GET /api/tags, GET /health, GET /metrics; found no such route",
        uri.path()
    );
    let flavor = if uri.path().starts_with("/api/") { Flavor::Ollama } else { Flavor::OpenAi };
    respond(&app, flavor, Err(ApiError::new(ErrorKind::NotFound, message)))
}
