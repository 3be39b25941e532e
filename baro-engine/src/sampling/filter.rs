//! The distribution a sampler draws from: repetition penalty, temperature, then top-k, top-p
//! and min-p in Hugging Face's order (top-p measured on the top-k set renormalised; min-p
//! relative to the most likely token, which the other two never remove).
//!
//! Work is O(n + m log n) for m kept tokens (a heap instead of a full sort), since this runs on
//! the host once per generated token over the whole vocabulary. Ties are broken by the lower
//! id, every sum runs in one fixed order (in f64), and `exp` is baro's, so results are bit-identical on
//! every machine. Never panics on logits.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

use baro_dsl::mathlib;

use crate::sampling::{SampleError, SamplerConfig};
use crate::tokenizer::TokenId;

/// A token kept for sampling and its probability (the kept set sums to 1 up to rounding).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: TokenId,
    pub p: f32,
}

/// Rejects NaN and +inf logits, an empty slice, an all -inf slice and a vocabulary past u32.
fn check(logits: &[f32]) -> Result<(), SampleError> {
    if logits.is_empty() {
        return Err(SampleError::Empty);
    }
    if u32::try_from(logits.len()).is_err() {
        return Err(SampleError::TooMany { n: logits.len() });
    }
    if let Some(index) = logits.iter().position(|l| l.is_nan()) {
        return Err(SampleError::NaN { index });
    }
    if let Some(index) = logits.iter().position(|&l| l == f32::INFINITY) {
        return Err(SampleError::PositiveInfinity { index });
    }
    if logits.iter().all(|&l| l == f32::NEG_INFINITY) {
        return Err(SampleError::AllMasked { n: logits.len() });
    }
    Ok(())
}

/// Argmax; the lowest id wins a tie; NaN is an error.
pub fn greedy(logits: &[f32]) -> Result<TokenId, SampleError> {
    check(logits)?;
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    Ok(best as TokenId)
}

/// The logits after the repetition penalty over the distinct ids of `history`.
pub(crate) fn penalize(logits: &[f32], history: &[TokenId], penalty: f32) -> Result<Vec<f32>, SampleError> {
    check(logits)?;
    let mut out = logits.to_vec();
    if penalty == 1.0 {
        return Ok(out);
    }
    let mut seen = HashSet::new();
    for &id in history {
        let Some(l) = out.get_mut(id as usize) else {
            return Err(SampleError::HistoryOutOfRange { id, n: logits.len() });
        };
        if seen.insert(id) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
    Ok(out)
}

/// The distribution `config` samples from given `logits` and `history`, in draw order (most
/// likely first when top-k or top-p is on, id order otherwise). Greedy configs give the argmax
/// alone with p = 1.
pub fn distribution(
    logits: &[f32],
    history: &[TokenId],
    config: &SamplerConfig,
) -> Result<Vec<Candidate>, SampleError> {
    config.validate()?;
    let penalized = penalize(logits, history, config.repetition_penalty)?;
    if config.is_greedy() {
        return Ok(vec![Candidate { id: greedy(&penalized)?, p: 1.0 }]);
    }
    distribution_of(&penalized, config)
}

/// An entry of the heap: larger weight first, then lower id.
#[derive(PartialEq)]
struct Ranked(f32, TokenId);

impl Eq for Ranked {}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then_with(|| other.1.cmp(&self.1))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `distribution` after the penalty, for a non-greedy config; logits already checked.
pub(crate) fn distribution_of(logits: &[f32], config: &SamplerConfig) -> Result<Vec<Candidate>, SampleError> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // Weights relative to the most likely token (which gets exactly 1): e^((l - max) / T).
    // (l - max) / T is never NaN: l - max is <= 0 or -inf, T > 0.
    let weights: Vec<f32> = logits.iter().map(|&l| mathlib::exp((l - max) / config.temperature)).collect();

    let mut kept: Vec<(f32, TokenId)> = if config.top_k > 0 || config.top_p < 1.0 {
        let mut heap: BinaryHeap<Ranked> =
            weights.iter().enumerate().filter(|(_, &w)| w > 0.0).map(|(i, &w)| Ranked(w, i as TokenId)).collect();
        let mut sorted = Vec::new();
        if config.top_k > 0 {
            while sorted.len() < config.top_k {
                let Some(Ranked(w, id)) = heap.pop() else { break };
                sorted.push((w, id));
            }
        }
        if config.top_p < 1.0 {
            // Top-p over the top-k set when there is one, else over every token.
            let total =
                if config.top_k > 0 { sum(sorted.iter().map(|&(w, _)| w)) } else { sum(weights.iter().copied()) };
            let limit = f64::from(config.top_p) * total;
            let mut nucleus = Vec::new();
            let mut mass = 0.0f64;
            let mut next = sorted.into_iter();
            // Keep a token while the mass before it is below p · total.
            while mass < limit {
                let item = if config.top_k > 0 { next.next() } else { heap.pop().map(|Ranked(w, id)| (w, id)) };
                let Some((w, id)) = item else { break };
                nucleus.push((w, id));
                mass += f64::from(w);
            }
            nucleus
        } else {
            sorted
        }
    } else {
        weights.iter().enumerate().filter(|(_, &w)| w > 0.0).map(|(i, &w)| (w, i as TokenId)).collect()
    };
    if config.min_p > 0.0 {
        let most = kept.iter().map(|&(w, _)| w).fold(0.0f32, f32::max);
        kept.retain(|&(w, _)| w >= config.min_p * most);
    }
    let total = sum(kept.iter().map(|&(w, _)| w));
    Ok(kept.into_iter().map(|(w, id)| Candidate { id, p: (f64::from(w) / total) as f32 }).collect())
}

/// A sequential sum in f64: exact enough over a whole vocabulary (an f32 running sum of 250k
/// weights drifts by about 1e-4 relative, enough to move the top-p boundary), and still one
/// fixed order of IEEE additions.
fn sum(weights: impl Iterator<Item = f32>) -> f64 {
    weights.fold(0.0f64, |acc, w| acc + f64::from(w))
}

/// The candidate where the running sum of probabilities first exceeds `u` in [0, 1); the last
/// one when rounding leaves the sum short of `u`.
pub(crate) fn draw(candidates: &[Candidate], u: f32) -> TokenId {
    let mut mass = 0.0f64;
    for c in candidates {
        mass += f64::from(c.p);
        if f64::from(u) < mass {
            return c.id;
        }
    }
    // Non-empty: the most likely token has weight 1 and survives every filter.
    candidates.last().map_or(0, |c| c.id)
}
