//! The server's log-probabilities on small hand-made logits: the log-softmax in f64 (against
//! a direct computation), the top list ordered by probability with the lower id first on
//! ties, `-inf` (masked) ids never listed, and the result independent of what else is asked.

use baro_engine::server::logprob::logprobs;

#[test]
fn logprobs_are_the_log_softmax_and_the_top_list_is_ordered_with_lower_ids_first() {
    let logits = [1.0f32, 3.0, f32::NEG_INFINITY, 3.0, -2.0, 0.5];
    let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
    let (lp, top) = logprobs(&logits, 4, 4);
    assert!((lp - (-2.0 - z.ln())).abs() < 1e-12, "{lp}");
    let ids: Vec<u32> = top.iter().map(|t| t.0).collect();
    assert_eq!(ids, vec![1, 3, 0, 5], "ties (ids 1 and 3) go to the lower id; -inf is never listed");
    assert_eq!(top[0].1.to_bits(), top[1].1.to_bits());
    let (masked, _) = logprobs(&logits, 2, 0);
    assert_eq!(masked, f64::NEG_INFINITY);
    // Asking for more top entries than there are finite logits lists the finite ones only.
    assert_eq!(logprobs(&logits, 0, 20).1.len(), 5);
    // The chosen token's value does not depend on the top count.
    assert_eq!(logprobs(&logits, 5, 0).0.to_bits(), logprobs(&logits, 5, 3).0.to_bits());
}
