//! What a route hands the scheduler (`Job`) and what comes back (`Event`), in terms of neither
//! API: token ids, sampling settings, text pieces, finish reasons and counts. A job holds a
//! `Ticket`, its place in the bounded queue, given back the moment its sequence is over
//! (before the final event goes out), whether it finished, failed or its client went away.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::sampling::SamplerConfig;
use crate::server::constrain::Constraint;
use crate::server::metrics::Metrics;
use crate::tokenizer::TokenId;

/// One generation request, checked against the server's limits.
pub struct Job {
    /// The response id the client sees (`chatcmpl-…`), for the request log.
    pub id: String,
    /// The route it came by, for the request log.
    pub route: &'static str,
    /// Not empty, at most the context.
    pub prompt: Vec<TokenId>,
    pub sampler: SamplerConfig,
    /// At least 1.
    pub max_tokens: usize,
    pub stops: Vec<String>,
    /// `Some(n)`: report the chosen token's log-probability and the `n` most likely tokens'.
    pub logprobs: Option<usize>,
    /// The grammar the output must match (`constrain`), compiled by the route.
    pub constraint: Option<Constraint>,
    /// Whether special tokens' text is shown (tool calls: `<tool_call>` is a special token).
    pub show_specials: bool,
    /// Closed when the client goes away: the scheduler then drops the sequence.
    pub events: UnboundedSender<Event>,
    pub ticket: Ticket,
    pub received: Instant,
}

/// A sampled token as the client sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenOut {
    pub id: TokenId,
    /// ln p(id) under the model's distribution (log-softmax of the raw logits, in f64);
    /// `None` unless the job asked for logprobs.
    pub logprob: Option<f64>,
    /// The most likely tokens and their log-probabilities, most likely first (lower id on ties).
    pub top: Vec<(TokenId, f64)>,
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-sequence token or a stop string.
    Stop,
    /// The request's token limit.
    Length,
    /// The context is full.
    ContextFull,
}

impl Finish {
    /// OpenAI's `finish_reason` and Ollama's `done_reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length | Finish::ContextFull => "length",
        }
    }
}

/// Counts and times of a finished generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// From arrival to the first sampled token (waiting and prefill).
    pub prompt_time: Duration,
    /// From the first sampled token to the last.
    pub gen_time: Duration,
}

/// What the scheduler sends a route, in order: tokens, then exactly one `Done` or `Failed`.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A token was sampled; `text` is what became safe to show with it (maybe empty while a
    /// character or a possible stop string is incomplete, maybe several tokens' worth).
    Token { token: TokenOut, text: String },
    /// The generation is over; `text` is the held-back tail, shown last.
    Done { text: String, finish: Finish, usage: Usage },
    /// The engine failed on this sequence (a device error, or a bug in baro).
    Failed(String),
}

/// A place in the bounded queue (waiting or running). Dropping it gives the place back.
pub struct Ticket {
    metrics: Arc<Metrics>,
}

impl Ticket {
    /// Takes a place if fewer than `limit` are taken; `Err(limit)` when the queue is full.
    pub fn take(metrics: &Arc<Metrics>, limit: usize) -> Result<Ticket, usize> {
        metrics
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
            .map_err(|_| limit)?;
        Ok(Ticket { metrics: Arc::clone(metrics) })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.metrics.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
