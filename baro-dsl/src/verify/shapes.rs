//! The concrete shapes (values of the integer scalar parameters) the verifier executes.
//!
//! Choice, per integer scalar parameter, in this order:
//! 1. values listed in the kernel's `verify_shapes`;
//! 2. the sibling's `rows` parameter: {1, 2, 3, 5} (one row, even, odd, a prime past 4);
//! 3. a parameter that feeds a reduction length (see `lengths`: directly, through let-bound
//!    variables followed transitively, and through integer arithmetic): lengths ragged
//!    against every granule (lane count, chunk size, block size) the kernel's schedules use:
//!    1, g - 1 and g + 1 for each granule g, and 2·max + 6 (for `lanes(32)` alone:
//!    {1, 31, 33, 70}), so every partial, the last partial chunk, and lanes with no element
//!    at all are exercised. When the path to the length divides by a constant c
//!    (`div(p, c)`, possibly nested in other operations, `shr` counting as a division by a
//!    power of two), the parameter gets c·v for every other ragged length v and c·v + c - 1
//!    for the rest, so the *length* is ragged and the parameter also takes values that are
//!    not multiples of c, as real shapes do (`nb = k / 32` under `lanes(32)`:
//!    k ∈ {32, 1023, 1056, 2271}, nb ∈ {1, 31, 33, 70}). A parameter reaching lengths
//!    through several divisors gets the union; an axis keeps at most `MAX_AXIS_VALUES`,
//!    evenly spaced, smallest and largest included;
//! 4. any other size-like parameter: {1, 3};
//! 5. a `bool` parameter: both values (a flag chooses a layout, so it is part of the shape).
//!
//! The cartesian product is capped at `MAX_SHAPES`, keeping an evenly spaced subset that
//! includes the first and last combination. This module only chooses values; it runs nothing.
//! Whether the chosen shapes gave every reduction enough elements is checked after execution
//! (`coverage`), so a poor choice here is an error, never a vacuous proof.

use super::lengths::{feeds, merge, Definitions, Feeds};
use super::ordinals::{reduces, stmt_blocks};
use crate::ir::{Expr, Kernel, ParamId, ParamKind, Reduce, ScalarType, Stmt};
use crate::schedule::Schedule;
use std::collections::BTreeSet;

/// Upper bound on the number of shapes tried per kernel.
pub const MAX_SHAPES: usize = 64;

/// Upper bound on the values tried for one length parameter.
pub const MAX_AXIS_VALUES: usize = 8;

fn granules(s: &Schedule, out: &mut Vec<u64>) {
    match s {
        Schedule::Sequential => {}
        Schedule::Lanes { count, .. } => out.push(*count as u64),
        Schedule::Chunked { size, .. } => out.push(*size as u64),
        Schedule::Blocked { block, across } => {
            out.push(*block as u64);
            granules(across, out)
        }
    }
}

fn implemented<'a>(b: &'a [Stmt], out: &mut Vec<&'a Reduce>, lanes: &mut Vec<u64>) {
    for s in b {
        if let Stmt::Lanes { count, implements, .. } = s {
            lanes.push(*count as u64);
            if let Some(imp) = implements {
                out.push(&imp.reduce);
            }
        }
        for blk in stmt_blocks(s) {
            implemented(blk, out, lanes);
        }
    }
}

/// Values tried for a length parameter, given the kernel's granules.
pub fn ragged_values(granules: &[u64]) -> Vec<u64> {
    let mut v = vec![1u64];
    let mut g: Vec<u64> = granules.iter().copied().filter(|&g| g > 1).collect();
    g.sort_unstable();
    g.dedup();
    match g.last() {
        None => v.extend([2, 7]),
        Some(&max) => {
            for x in &g {
                v.extend([x - 1, x + 1]);
            }
            v.push(2 * max + 6);
        }
    }
    v.retain(|&x| x > 0);
    v.sort_unstable();
    v.dedup();
    if v.len() > 6 {
        let last = v[v.len() - 1];
        v.truncate(5);
        v.push(last);
    }
    v
}

/// Values for a parameter reaching reduction lengths through `divisors` (see the module docs).
pub fn length_values(divisors: &BTreeSet<u64>, ragged: &[u64]) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    for &d in divisors {
        if d <= 1 {
            v.extend_from_slice(ragged);
            continue;
        }
        // Alternate exact multiples and multiples plus d - 1: the lengths are the ragged
        // ones either way, and every other value is not a multiple of d. (Both for every
        // length would double the cost of the heaviest shapes for no new length.)
        for (i, &x) in ragged.iter().enumerate() {
            let extra = if i % 2 == 0 { 0 } else { d - 1 };
            v.push(d.saturating_mul(x).saturating_add(extra));
        }
    }
    v.sort_unstable();
    v.dedup();
    if v.len() > MAX_AXIS_VALUES {
        let n = v.len();
        v = (0..MAX_AXIS_VALUES).map(|j| v[j * (n - 1) / (MAX_AXIS_VALUES - 1)]).collect();
    }
    v
}

/// The parameters feeding any reduction length of `k` (source reductions and the ones
/// `Lanes` regions implement), with their divisors.
pub fn length_feeds(k: &Kernel) -> Feeds {
    let defs = Definitions::of(k);
    let mut lens: Vec<&Expr> = reduces(k).iter().map(|r| &r.len).collect();
    let mut imp = Vec::new();
    implemented(&k.body, &mut imp, &mut Vec::new());
    lens.extend(imp.iter().map(|r| &r.len));
    let mut all = Feeds::new();
    for e in lens {
        merge(&mut all, feeds(&defs, e).0);
    }
    all
}

/// The shapes the verifier executes `k` for (see the module docs for the choice).
pub fn default_shapes(k: &Kernel) -> Vec<Vec<(ParamId, u64)>> {
    let mut g = Vec::new();
    for r in reduces(k) {
        granules(&r.schedule, &mut g);
    }
    let mut imp = Vec::new();
    implemented(&k.body, &mut imp, &mut g);
    for r in &imp {
        granules(&r.schedule, &mut g);
    }
    let ragged = ragged_values(&g);
    let fed = length_feeds(k);
    let mut axes: Vec<(ParamId, Vec<u64>)> = Vec::new();
    for (i, p) in k.params.iter().enumerate() {
        let id = ParamId(i as u32);
        let ParamKind::Scalar(t) = p.kind else { continue };
        if t == ScalarType::Bool {
            // A flag is part of the shape (it chooses an index layout): both values run.
            axes.push((id, vec![0, 1]));
            continue;
        }
        if !t.is_int() {
            continue;
        }
        let vals = if let Some((_, v)) = k.verify_shapes.values.iter().find(|(q, _)| *q == id) {
            v.clone()
        } else if k.sibling.as_ref().is_some_and(|s| s.rows == id) {
            vec![1, 2, 3, 5]
        } else if let Some(divisors) = fed.get(&id) {
            length_values(divisors, &ragged)
        } else {
            vec![1, 3]
        };
        axes.push((id, vals));
    }
    let total: usize = axes.iter().map(|(_, v)| v.len().max(1)).product();
    let picks: Vec<usize> = if total <= MAX_SHAPES {
        (0..total).collect()
    } else {
        (0..MAX_SHAPES).map(|j| j * (total - 1) / (MAX_SHAPES - 1)).collect()
    };
    picks
        .into_iter()
        .map(|mut n| {
            axes.iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(id, v)| {
                    let x = v[n % v.len()];
                    n /= v.len();
                    (*id, x)
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_against_lane_count() {
        assert_eq!(ragged_values(&[32]), vec![1, 31, 33, 70]);
        assert_eq!(ragged_values(&[32, 8]), vec![1, 7, 9, 31, 33, 70]);
        assert_eq!(ragged_values(&[]), vec![1, 2, 7]);
    }

    #[test]
    fn divided_lengths_are_scaled_and_ragged() {
        let r = ragged_values(&[32]);
        assert_eq!(length_values(&BTreeSet::from([32]), &r), vec![32, 1023, 1056, 2271]);
        assert_eq!(length_values(&BTreeSet::from([1]), &r), r);
        assert_eq!(length_values(&BTreeSet::from([1, 4]), &r), vec![1, 4, 31, 33, 70, 127, 132, 283]);
        let many = length_values(&BTreeSet::from([1, 2, 4]), &r);
        assert_eq!(many.len(), MAX_AXIS_VALUES);
        assert_eq!((many[0], many[MAX_AXIS_VALUES - 1]), (1, 283));
    }
}
