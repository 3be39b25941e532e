//! Choosing the next token from logits: greedy, or a seeded draw after repetition penalty,
//! temperature, top-k, top-p and min-p (`filter.rs`), and stopping on EOS ids or stop strings
//! (`stop.rs`).
//!
//! Deterministic given (config, seed, logits, history): the RNG is `ChaCha8Rng` (a named,
//! portable stream), probabilities use baro's own `exp` (IEEE basic operations only) and every
//! sum runs in a fixed order, so a seed gives the same tokens on every machine. Must never panic
//! on logits or config: NaN or +inf logits and out-of-range settings are `SampleError`s.

pub mod filter;
pub mod stop;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::tokenizer::TokenId;

pub use filter::{distribution, greedy, Candidate};
pub use stop::{Step, StopChecker, StopReason};

/// What went wrong choosing a token: bad logits are the model's (or a kernel's) fault, a bad
/// config or history id is the caller's.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SampleError {
    #[error("no logits to sample from")]
    Empty,
    #[error("bad logits: expected a number at index {index}, found NaN")]
    NaN { index: usize },
    #[error("bad logits: expected a finite value or -inf at index {index}, found +inf")]
    PositiveInfinity { index: usize },
    #[error("bad logits: every one of the {n} logits is -inf")]
    AllMasked { n: usize },
    #[error("too many logits: {n} do not fit 32-bit token ids")]
    TooMany { n: usize },
    #[error("bad sampler config: {field}: expected {expected}, found {found}")]
    BadConfig { field: &'static str, expected: &'static str, found: String },
    #[error("history token {id} is outside the {n} logits")]
    HistoryOutOfRange { id: TokenId, n: usize },
}

/// Sampling settings. The default is greedy with every filter off.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// 0 is greedy (argmax, lowest id on ties); otherwise logits are divided by it.
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 is off.
    pub top_k: usize,
    /// Keep the smallest most-likely set whose probability reaches p; 1 is off.
    pub top_p: f32,
    /// Keep tokens at least `min_p` times as likely as the most likely one; 0 is off.
    pub min_p: f32,
    /// Over the ids in the history: positive logits divided by it, negative ones multiplied;
    /// 1 is off.
    pub repetition_penalty: f32,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig { temperature: 0.0, top_k: 0, top_p: 1.0, min_p: 0.0, repetition_penalty: 1.0, seed: 0 }
    }
}

impl SamplerConfig {
    pub fn validate(&self) -> Result<(), SampleError> {
        let bad =
            |field, expected, found: f32| Err(SampleError::BadConfig { field, expected, found: found.to_string() });
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad("temperature", "a finite value >= 0", self.temperature);
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", "a value in (0, 1]", self.top_p);
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p", "a value in [0, 1]", self.min_p);
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad("repetition_penalty", "a finite value > 0", self.repetition_penalty);
        }
        Ok(())
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }
}

/// A sampler: a validated config and the RNG it seeds.
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplerConfig,
    rng: ChaCha8Rng,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Result<Sampler, SampleError> {
        config.validate()?;
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        Ok(Sampler { config, rng })
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Chooses the next token. `history` holds the ids the repetition penalty applies to
    /// (the prompt and what was generated, or a window of them). Greedy draws no random
    /// number; every other setting draws exactly one per call.
    pub fn sample(&mut self, logits: &[f32], history: &[TokenId]) -> Result<TokenId, SampleError> {
        let penalized = filter::penalize(logits, history, self.config.repetition_penalty)?;
        if self.config.is_greedy() {
            return greedy(&penalized);
        }
        let candidates = filter::distribution_of(&penalized, &self.config)?;
        let u: f32 = self.rng.gen();
        Ok(filter::draw(&candidates, u))
    }
}
