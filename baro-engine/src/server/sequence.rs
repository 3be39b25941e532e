//! One request inside the scheduler: its own engine state, sampler, stop checker and streaming
//! decoder, the prompt tokens still to feed and the token sampled last. Turns each step's
//! logits into a sampled token, its log-probability, the text that became safe to show, and
//! at the end the finish reason and counts, sent to the route as `Event`s. Never touches
//! another sequence and never steps the engine itself (that is `batch`'s).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;

use crate::engine::{EngineError, State};
use crate::sampling::{Sampler, Step, StopChecker};
use crate::server::constrain::Constraint;
use crate::server::job::{Event, Finish, Job, Ticket, TokenOut, Usage};
use crate::server::logprob;
use crate::server::metrics::{self, Metrics};
use crate::tokenizer::{Specials, StreamDecoder, TokenId, Tokenizer};

/// Where a sequence is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Prompt tokens remain to feed.
    Prefill,
    /// The token sampled last is to be fed.
    Decode(TokenId),
    /// Finished, failed or cancelled: to be dropped.
    Over,
}

pub struct Sequence<'t> {
    pub state: State,
    /// Prompt then generated tokens (the repetition penalty's history); the first
    /// `state.pos` have been fed.
    history: Vec<TokenId>,
    prompt_len: usize,
    phase: Phase,
    sampler: Sampler,
    stop: StopChecker,
    decoder: StreamDecoder<'t>,
    /// Ids past the tokenizer's (padding rows of a larger embedding) are never sampled.
    n_ids: usize,
    max_tokens: usize,
    logprobs: Option<usize>,
    constraint: Option<Constraint>,
    generated: usize,
    events: UnboundedSender<Event>,
    received: Instant,
    first_sample: Option<Instant>,
    /// Whether it ran to its end (its state may go to the prefix cache).
    pub completed: bool,
    /// Given back the moment the sequence is over, before the client hears of it.
    ticket: Option<Ticket>,
    metrics: Arc<Metrics>,
    /// The response id and route, for the log line.
    id: String,
    route: &'static str,
    /// `Some(cached prompt tokens)`: write one line to stderr when the sequence ends.
    pub log: Option<usize>,
}

impl<'t> Sequence<'t> {
    /// A sequence for `job` in `state`, which has been fed the first `state.pos` prompt tokens
    /// (0, or a prefix-cache hit's length, always less than the prompt's), drawing with
    /// `sampler` (built from `job.sampler`).
    pub fn new(
        job: Job,
        sampler: Sampler,
        state: State,
        tokenizer: &'t Tokenizer,
        metrics: Arc<Metrics>,
    ) -> Sequence<'t> {
        let stop = StopChecker::new(&tokenizer.special_ids().eos, &job.stops);
        Sequence {
            state,
            prompt_len: job.prompt.len(),
            history: job.prompt,
            phase: Phase::Prefill,
            sampler,
            stop,
            decoder: tokenizer.stream(if job.show_specials { Specials::With } else { Specials::Without }),
            n_ids: tokenizer.n_ids(),
            max_tokens: job.max_tokens,
            logprobs: job.logprobs,
            constraint: job.constraint,
            generated: 0,
            events: job.events,
            received: job.received,
            first_sample: None,
            completed: false,
            ticket: Some(job.ticket),
            metrics,
            id: job.id,
            route: job.route,
            log: None,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether the client has gone away.
    pub fn is_abandoned(&self) -> bool {
        self.events.is_closed()
    }

    /// Marks the sequence over without a word to the client (who is gone).
    pub fn cancel(&mut self) {
        self.ticket = None;
        self.phase = Phase::Over;
        self.log_line("cancelled");
    }

    /// The request's log line: id, route, prompt tokens (and how many came from the prefix
    /// cache), generated tokens, time to first token, decode tokens/s, and how it ended.
    pub fn log_line(&self, finish: &str) {
        let Some(cached) = self.log else { return };
        eprintln!("{}", self.log_text(finish, cached));
    }

    fn log_text(&self, finish: &str, cached: usize) -> String {
        let now = Instant::now();
        let ttft = self.first_sample.map_or("-".to_string(), |t| {
            format!("{:.1}", t.saturating_duration_since(self.received).as_secs_f64() * 1e3)
        });
        let rate = match self.first_sample {
            Some(t) if self.generated > 1 && now > t => {
                format!("{:.2}", (self.generated - 1) as f64 / now.saturating_duration_since(t).as_secs_f64())
            }
            _ => "-".to_string(),
        };
        format!(
            "request id={} route={} prompt_tokens={} cached_tokens={cached} generated_tokens={} ttft_ms={ttft} tok_s={rate} finish={finish} total_ms={:.1}",
            self.id,
            self.route,
            self.prompt_len,
            self.generated,
            now.saturating_duration_since(self.received).as_secs_f64() * 1e3
        )
    }

    /// The state, for the prefix cache (the sequence is over).
    pub fn into_state(self) -> State {
        self.state
    }

    /// The prompt tokens not yet fed.
    pub fn unfed_prompt(&self) -> &[TokenId] {
        &self.history[self.state.pos.min(self.prompt_len)..self.prompt_len]
    }

    /// The tokens the state has been fed.
    pub fn fed(&self) -> &[TokenId] {
        &self.history[..self.state.pos.min(self.history.len())]
    }

    /// The state and token of this sequence's decode row, when it is decoding.
    pub fn decode_row(&mut self) -> Option<(&mut State, TokenId)> {
        match self.phase {
            Phase::Decode(t) => Some((&mut self.state, t)),
            _ => None,
        }
    }

    /// Takes the result of feeding this sequence's next tokens: the logits after them, once
    /// the prompt is in (`None` while prefill chunks remain).
    pub fn on_logits(&mut self, result: Result<Option<Vec<f32>>, EngineError>) {
        match result {
            Ok(None) => {}
            Ok(Some(logits)) => self.sample(logits),
            Err(EngineError::ContextFull { .. }) => self.finish(Finish::ContextFull),
            Err(e) => self.fail(format!("generation: {e}")),
        }
    }

    /// Samples from `logits` and reports the token.
    fn sample(&mut self, mut logits: Vec<f32>) {
        if let Some(padding) = logits.get_mut(self.n_ids..) {
            padding.fill(f32::NEG_INFINITY);
        }
        // The grammar masks a copy: the logprobs reported stay the model's.
        let mut masked = None;
        if let Some(c) = self.constraint.as_mut() {
            let mut m = logits.clone();
            if let Err(e) = c.mask(&mut m) {
                self.fail(e);
                return;
            }
            masked = Some(m);
        }
        let id = match self.sampler.sample(masked.as_ref().unwrap_or(&logits), &self.history) {
            Ok(id) => id,
            Err(e) => {
                self.fail(format!("sampling: {e}"));
                return;
            }
        };
        self.first_sample.get_or_insert_with(Instant::now);
        let (logprob, top) = match self.logprobs {
            Some(n) => {
                let (lp, top) = logprob::logprobs(&logits, id, n);
                (Some(lp), top)
            }
            None => (None, Vec::new()),
        };
        if let Some(c) = self.constraint.as_mut() {
            if let Err(e) = c.consume(id) {
                self.fail(e);
                return;
            }
        }
        self.history.push(id);
        self.generated += 1;
        metrics::add(&self.metrics.generated_tokens, 1);
        let piece = match self.decoder.push(id) {
            Ok(p) => p,
            Err(e) => {
                self.fail(format!("decoding token {id}: {e}"));
                return;
            }
        };
        let token = TokenOut { id, logprob, top };
        match self.stop.push(id, &piece) {
            Step::Text(text) => {
                let _ = self.events.send(Event::Token { token, text });
                if self.constraint.as_ref().is_some_and(Constraint::is_finished) {
                    self.finish(Finish::Stop);
                } else if self.generated == self.max_tokens {
                    self.finish(Finish::Length);
                } else {
                    self.phase = Phase::Decode(id);
                }
            }
            Step::Stop { text, .. } => {
                let _ = self.events.send(Event::Token { token, text });
                self.end(String::new(), Finish::Stop);
            }
        }
    }

    /// Ends for a reason other than a stop: the held-back text goes out first.
    fn finish(&mut self, finish: Finish) {
        let mut tail = self.decoder.finish().unwrap_or_default();
        tail.push_str(&self.stop.finish());
        self.end(tail, finish);
    }

    fn end(&mut self, text: String, finish: Finish) {
        let now = Instant::now();
        let first = self.first_sample.unwrap_or(now);
        let usage = Usage {
            prompt_tokens: self.prompt_len,
            completion_tokens: self.generated,
            prompt_time: first.saturating_duration_since(self.received),
            gen_time: now.saturating_duration_since(first),
        };
        self.ticket = None;
        self.phase = Phase::Over;
        self.completed = true;
        metrics::add(&self.metrics.completed, 1);
        self.log_line(finish.reason());
        let _ = self.events.send(Event::Done { text, finish, usage });
    }

    fn fail(&mut self, message: String) {
        self.ticket = None;
        metrics::add(&self.metrics.failed, 1);
        self.phase = Phase::Over;
        self.log_line("failed");
        let _ = self.events.send(Event::Failed(message));
    }
}
