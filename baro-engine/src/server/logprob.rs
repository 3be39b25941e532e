//! Log-probabilities of sampled tokens for the APIs' `logprobs` options: the log-softmax of the
//! raw logits (before penalties and temperature, as OpenAI and vLLM report them), in f64, with
//! the maximum subtracted first and the exponentials summed in index order. The result is a
//! pure function of the logits: the same bits whatever else the server runs (std's `exp`/`ln`,
//! so the same bits in every run of one binary; not promised across platforms' libms).

use crate::tokenizer::TokenId;

/// ln p(`id`) and the `n` most likely tokens with theirs (most likely first, lower id on ties).
/// `-inf` logits (masked ids) have probability 0 and are never among the top.
pub fn logprobs(logits: &[f32], id: TokenId, n: usize) -> (f64, Vec<(TokenId, f64)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut sum = 0.0f64;
    for &l in logits {
        sum += (l as f64 - max).exp();
    }
    let log_z = max + sum.ln();
    let lp = |i: usize| logits[i] as f64 - log_z;
    let chosen = logits.get(id as usize).map_or(f64::NEG_INFINITY, |_| lp(id as usize));
    (chosen, top_n(logits, n).into_iter().map(|i| (i as TokenId, lp(i))).collect())
}

/// The indices of the `n` largest logits other than `-inf`, largest first, lower index first
/// on ties. O(len · n), and n is small (the APIs allow at most 20).
fn top_n(logits: &[f32], n: usize) -> Vec<usize> {
    let mut top: Vec<usize> = Vec::with_capacity(n + 1);
    if n == 0 {
        return top;
    }
    for (i, &l) in logits.iter().enumerate() {
        if l == f32::NEG_INFINITY || (top.len() == n && l <= logits[top[n - 1]]) {
            continue;
        }
        // Insert after every entry that is at least as large (earlier indices win ties).
        let at = top.iter().position(|&j| l > logits[j]).unwrap_or(top.len());
        top.insert(at, i);
        top.truncate(n);
    }
    top
}
