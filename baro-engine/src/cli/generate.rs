//! The generation loop of the CLI: feeds the prompt, then samples, streams and feeds back one
//! token at a time until EOS, a stop string, the token limit or a full context, timing the
//! prompt and the generation separately (wall clock around `Engine::step`, which returns only
//! after the device has finished). Text is written as soon as it is complete UTF-8 and known
//! not to be part of a stop string. Never decides what is sampled: that is `Sampler`'s.

use std::io::Write;
use std::time::{Duration, Instant};

use baro_engine::engine::{Engine, EngineError, Logits, PrefillMode, Prefilled};
use baro_engine::sampling::{Sampler, Step, StopChecker, StopReason};
use baro_engine::tokenizer::{Specials, TokenId, Tokenizer};

/// Why generation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    Stop(StopReason),
    MaxTokens,
    ContextFull,
}

/// What one generation did and how long it took.
#[derive(Clone, Debug)]
pub struct Report {
    pub prompt_tokens: usize,
    pub prompt_time: Duration,
    /// Which prefill path ran and how many rows went through it.
    pub prefill: Prefilled,
    pub generated: usize,
    /// From the first sample to the last token fed back.
    pub gen_time: Duration,
    pub ended: Ended,
}

/// Settings of one generation.
pub struct Settings<'a> {
    pub max_tokens: usize,
    pub stops: &'a [String],
    /// `None`: no tokenizer; tokens are written as ids.
    pub tokenizer: Option<&'a Tokenizer>,
    pub prefill: PrefillMode,
}

fn io(e: std::io::Error) -> String {
    format!("cannot write the output: {e}")
}

/// Runs one generation from `prompt` (not empty), writing the new text to `out`.
pub fn run(
    engine: &mut Engine,
    prompt: &[TokenId],
    sampler: &mut Sampler,
    settings: &Settings<'_>,
    out: &mut dyn Write,
) -> Result<Report, String> {
    if prompt.is_empty() {
        return Err("prompt: expected at least one token, found none".into());
    }
    let engine_err = |e: EngineError| format!("generation: {e}");
    engine.reset().map_err(engine_err)?;
    let start = Instant::now();
    let mut prefilled = engine.prefill(prompt, settings.prefill, Logits::Last).map_err(engine_err)?;
    let mut logits = std::mem::take(&mut prefilled.logits);
    let prompt_time = start.elapsed();

    let eos = settings.tokenizer.map(|t| t.special_ids().eos.clone()).unwrap_or_default();
    let mut stop = StopChecker::new(&eos, settings.stops);
    let mut decoder = settings.tokenizer.map(|t| t.stream(Specials::Without));
    // Ids past the tokenizer's (padding rows of a larger embedding) have no text: never sampled.
    let n_ids = settings.tokenizer.map_or(logits.len(), |t| t.n_ids());
    let mut history = prompt.to_vec();
    let mut generated = 0;
    let start = Instant::now();
    let ended = loop {
        if generated == settings.max_tokens {
            break Ended::MaxTokens;
        }
        if let Some(padding) = logits.get_mut(n_ids..) {
            padding.fill(f32::NEG_INFINITY);
        }
        let id = sampler.sample(&logits, &history).map_err(|e| format!("sampling: {e}"))?;
        history.push(id);
        generated += 1;
        let text = match decoder.as_mut() {
            Some(d) => d.push(id).map_err(|e| format!("decoding token {id}: {e}"))?,
            None => format!("{id} "),
        };
        match stop.push(id, &text) {
            Step::Text(t) => {
                out.write_all(t.as_bytes()).and_then(|()| out.flush()).map_err(io)?;
            }
            Step::Stop { text, reason } => {
                out.write_all(text.as_bytes()).map_err(io)?;
                break Ended::Stop(reason);
            }
        }
        logits = match engine.step(id) {
            Ok(l) => l,
            Err(EngineError::ContextFull { .. }) => break Ended::ContextFull,
            Err(e) => return Err(engine_err(e)),
        };
    };
    let gen_time = start.elapsed();
    if !matches!(ended, Ended::Stop(_)) {
        let mut tail =
            decoder.as_mut().map(|d| d.finish()).transpose().map_err(|e| format!("decoding: {e}"))?.unwrap_or_default();
        tail.push_str(&stop.finish());
        out.write_all(tail.as_bytes()).map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(Report { prompt_tokens: prompt.len(), prompt_time, prefill: prefilled, generated, gen_time, ended })
}
