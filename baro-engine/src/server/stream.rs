//! Response bodies from a generation's events: a streaming body (server-sent events for the
//! OpenAI routes, NDJSON for the Ollama ones) that sends each event as soon as it arrives and
//! ends after the last, and `collect`, which waits for the whole generation. Dropping either
//! (the client went away) closes the event channel, which tells the scheduler to free the
//! sequence. Decides no wording: the routes render each event.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::server::error::{ApiError, ErrorKind};
use crate::server::job::{Event, Finish, TokenOut, Usage};

/// Everything a finished generation produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub text: String,
    pub tokens: Vec<TokenOut>,
    pub finish: Finish,
    pub usage: Usage,
}

/// Waits for the generation to end.
pub async fn collect(mut rx: UnboundedReceiver<Event>) -> Result<Outcome, ApiError> {
    let mut text = String::new();
    let mut tokens = Vec::new();
    while let Some(event) = rx.recv().await {
        match event {
            Event::Token { token, text: piece } => {
                tokens.push(token);
                text.push_str(&piece);
            }
            Event::Done { text: tail, finish, usage } => {
                text.push_str(&tail);
                return Ok(Outcome { text, tokens, finish, usage });
            }
            Event::Failed(message) => return Err(ApiError::new(ErrorKind::Internal, message)),
        }
    }
    Err(ApiError::new(
        ErrorKind::Internal,
        "generation: expected a final event, found the scheduler gone (a bug in baro)",
    ))
}

/// The media types of the two streaming formats.
#[derive(Clone, Copy, Debug)]
pub enum Format {
    /// `text/event-stream`: `data: {json}\n\n` records.
    Sse,
    /// `application/x-ndjson`: one JSON object per line.
    Ndjson,
}

impl Format {
    /// One record holding `value`.
    pub fn record(self, value: &serde_json::Value) -> Vec<u8> {
        let json = value.to_string();
        match self {
            Format::Sse => format!("data: {json}\n\n").into_bytes(),
            Format::Ndjson => format!("{json}\n").into_bytes(),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Sse => "text/event-stream",
            Format::Ndjson => "application/x-ndjson",
        }
    }
}

/// The end-of-stream record of OpenAI's server-sent events.
pub const SSE_DONE: &[u8] = b"data: [DONE]\n\n";

/// A streaming response: `render` turns each event into the bytes to send (maybe none); the
/// body ends after `Done` or `Failed`.
pub fn streaming<F>(rx: UnboundedReceiver<Event>, format: Format, render: F) -> Response
where
    F: FnMut(Event) -> Vec<u8> + Send + 'static,
{
    let stream = futures_util::stream::unfold((rx, render, false), |(mut rx, mut render, over)| async move {
        if over {
            return None;
        }
        loop {
            let event = rx.recv().await?;
            let last = matches!(event, Event::Done { .. } | Event::Failed(_));
            let bytes = render(event);
            if !bytes.is_empty() || last {
                return Some((Ok::<Bytes, Infallible>(Bytes::from(bytes)), (rx, render, last)));
            }
        }
    });
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(format.content_type())),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (StatusCode::OK, headers, Body::from_stream(stream)).into_response()
}
