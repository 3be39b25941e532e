//! The concrete shapes (values of the integer scalar parameters) the verifier executes.
//!
//! Every parameter gets the union of (the kernel's own `verify(...)` list *adds* to what is
//! derived, never replaces it):
//! 1. the values listed in the kernel's `verify_shapes`;
//! 2. a base by role: the sibling's `rows` parameter {1, 2, 3, 5} (one row, even, odd, a prime
//!    past 4); a parameter that feeds a reduction length (see `lengths`: directly, through
//!    let-bound variables followed transitively, and through integer arithmetic) lengths
//!    ragged and full against every granule g the kernel uses (lane count, chunk size, block
//!    size, `par_team` size): 1, g − 1, g, g + 1, 2g and 2·max + 6 (for `lanes(32)` alone
//!    {1, 31, 32, 33, 64, 70}), so every partial, the last partial chunk, lanes with no
//!    element, exactly full lane blocks and two full rounds are all exercised. When the path to
//!    the length divides by a constant c (`div(p, c)`, `shr` counting as a division by a power
//!    of two), the parameter gets c·v for every other such length v and c·v + c − 1 for the
//!    rest, so the *length* takes those values and the parameter also takes values that are
//!    not multiples of c (`nb = k / 32` under `lanes(32)`: nb ∈ {1, 31, 32, 33, 64, 70});
//!    any other size-like parameter {1, 3} unless it has listed values (a head count or a
//!    stride often must agree with others, which the author's list respects); a `bool`
//!    both values (a flag chooses a layout);
//! 3. its tiles: every constant c > 1 the parameter meets on its way into the kernel's
//!    control and indexing — a divisor (`(rows + 7) / 8`, `(n + 255) / 256`) or a constant it
//!    is compared with or clamped by (`min(8, rows - r0)`, `n - base < 256`) — gives c − 1,
//!    c, c + 1 and 2c: a partial tile, a full one, a full one plus a tail, two full ones.
//!
//! Derived values outside the range of a parameter's listed values are dropped (the list
//! states the domain and bounds the cost where its author chose to: `conv_kernel = [2, 4]`
//! means a ring of at least one, `k = [256, .., 8448]` a size the proof can afford); the row
//! count is exempt, every row count being valid; derived values of an axis are then thinned to
//! `MAX_AXIS_VALUES`, evenly spaced, smallest and largest kept, listed values always kept.
//! The cartesian product is capped at `MAX_SHAPES`, an evenly spaced subset that includes the
//! first and last combination, plus one shape per axis value the subset missed, so every
//! value of every axis runs at least once. Where the shapes' summed work (the product of a
//! shape's sizes) exceeds `MAX_WORK`, the cheapest shape holding each axis value is kept and
//! the rest are added cheapest first within the budget: every value still runs. This module
//! only chooses values; it runs nothing.
//! Whether the chosen shapes gave every reduction enough elements, and took every branch of
//! every reduction body, is checked after execution (`coverage`), so a poor choice here is an
//! error, never a vacuous proof.

use super::lengths::{feeds, merge, Definitions, Feeds};
use super::ordinals::{children, reduces, stmt_blocks, stmt_exprs};
use crate::ir::{BinOp, Expr, Kernel, ParamId, ParamKind, Reduce, ScalarType, Stmt};
use crate::schedule::Schedule;
use std::collections::{BTreeMap, BTreeSet};

/// Upper bound on the number of shapes tried per kernel.
pub const MAX_SHAPES: usize = 64;

/// Upper bound on the derived values tried for one parameter.
pub const MAX_AXIS_VALUES: usize = 10;

/// Largest tile constant that gives values (2c of larger ones would make shapes slow).
pub const MAX_TILE: u64 = 1024;

fn granules(s: &Schedule, out: &mut Vec<u64>) {
    match s {
        Schedule::Sequential | Schedule::Any => {}
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
        if let Stmt::ParFor { team: Some(t), .. } = s {
            lanes.push(*t as u64);
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
                v.extend([x - 1, *x, x + 1, 2 * x]);
            }
            v.push(2 * max + 6);
        }
    }
    v.retain(|&x| x > 0);
    v.sort_unstable();
    v.dedup();
    v
}

/// Values a tile constant gives: a partial tile, a full one, a full one plus a tail, two.
fn tile_values(c: u64) -> [u64; 4] {
    [c - 1, c, c + 1, 2 * c]
}

fn positive_const(e: &Expr) -> Option<u64> {
    match e {
        Expr::Const(c)
            if c.ty.is_int() && !(c.ty.is_signed() && c.as_i64() < 0) && c.bits > 1 && c.bits <= MAX_TILE =>
        {
            Some(c.bits)
        }
        _ => None,
    }
}

/// Every parameter's tiles (see the module docs): divisors on its way into any expression
/// of the kernel, and constants it is compared with or clamped by.
pub fn tiles(k: &Kernel) -> BTreeMap<ParamId, BTreeSet<u64>> {
    fn note(defs: &Definitions, e: &Expr, c: u64, out: &mut BTreeMap<ParamId, BTreeSet<u64>>) {
        for p in feeds(defs, e).0.into_keys() {
            out.entry(p).or_default().insert(c);
        }
    }
    fn walk(defs: &Definitions, e: &Expr, out: &mut BTreeMap<ParamId, BTreeSet<u64>>) {
        if let Expr::Binary { op, lhs, rhs } = e {
            let clamp = matches!(
                op,
                BinOp::Min | BinOp::Max | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
            );
            if clamp {
                if let Some(c) = positive_const(rhs) {
                    note(defs, lhs, c, out);
                }
                if let Some(c) = positive_const(lhs) {
                    note(defs, rhs, c, out);
                }
            }
        }
        for c in children(e) {
            walk(defs, c, out);
        }
    }
    fn root(defs: &Definitions, e: &Expr, out: &mut BTreeMap<ParamId, BTreeSet<u64>>) {
        for (p, ds) in feeds(defs, e).0 {
            let ds: Vec<u64> = ds.into_iter().filter(|&d| d > 1 && d <= MAX_TILE).collect();
            if !ds.is_empty() {
                out.entry(p).or_default().extend(ds);
            }
        }
        walk(defs, e, out);
    }
    fn block(defs: &Definitions, b: &[Stmt], out: &mut BTreeMap<ParamId, BTreeSet<u64>>) {
        for s in b {
            stmt_exprs(s, |e| root(defs, e, out));
            for blk in stmt_blocks(s) {
                block(defs, blk, out);
            }
        }
    }
    let defs = Definitions::of(k);
    let mut out = BTreeMap::new();
    for g in &k.grid {
        root(&defs, g, &mut out);
    }
    block(&defs, &k.body, &mut out);
    out
}

/// At most `n` of `v` (sorted), evenly spaced, first and last kept.
fn thin(v: Vec<u64>, n: usize) -> Vec<u64> {
    if v.len() <= n || n < 2 {
        return v;
    }
    let len = v.len();
    (0..n).map(|j| v[j * (len - 1) / (n - 1)]).collect()
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

/// `f` on every shape, the shapes spread over the machine's cores (`BARO_VERIFY_THREADS`
/// overrides their number; 1 runs them one after another here), the results in shape order.
/// Each shape's execution is independent of the others' (its own DAG), so the results, and
/// which shape's error comes first, are those of running them in sequence.
pub fn each_shape<R: Send>(shapes: &[Vec<(ParamId, u64)>], f: impl Fn(&[(ParamId, u64)]) -> R + Sync) -> Vec<R> {
    let threads = std::env::var("BARO_VERIFY_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    each_shape_on(threads, shapes, f)
}

/// `each_shape` on `threads` threads (at most one per shape).
pub fn each_shape_on<R: Send>(
    threads: usize,
    shapes: &[Vec<(ParamId, u64)>],
    f: impl Fn(&[(ParamId, u64)]) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, shapes.len().max(1));
    if threads == 1 {
        return shapes.iter().map(|s| f(s)).collect();
    }
    // Shape i goes to thread i % threads: the costly shapes (the largest values) are spread.
    let f = &f;
    let mut parts: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
        // The executor recurses over expression trees: the stack of the thread that called
        // (a test thread, rustc's for `#[kernel]`) may be larger than a spawned thread's
        // default, so these get 64 MiB (reserved, touched only as deep as they go).
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn_scoped(scope, move || {
                        shapes.iter().enumerate().skip(t).step_by(threads).map(|(i, s)| (i, f(s))).collect::<Vec<_>>()
                    })
                    .expect("a verifier thread starts")
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    let mut out: Vec<Option<R>> = (0..shapes.len()).map(|_| None).collect();
    for (i, r) in parts.drain(..).flatten() {
        out[i] = Some(r);
    }
    out.into_iter().map(|r| r.expect("every shape ran")).collect()
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
    let tiled = tiles(k);
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
        let listed: Vec<u64> =
            k.verify_shapes.values.iter().find(|(q, _)| *q == id).map(|(_, v)| v.clone()).unwrap_or_default();
        let is_rows = k.sibling.as_ref().is_some_and(|s| s.rows == id);
        let mut derived = if is_rows {
            vec![1, 2, 3, 5]
        } else if let Some(divisors) = fed.get(&id) {
            length_values(divisors, &ragged)
        } else if listed.is_empty() {
            vec![1, 3]
        } else {
            // A listed parameter with no length or row role (a head count, a stride) often
            // must agree with others (n_heads a multiple of n_kv_heads, a stride at least a
            // width): only its tiles are added to what its author chose.
            Vec::new()
        };
        // A length's own divisor is already scaled into its values (c − 1 would make the
        // length empty).
        let own = fed.get(&id);
        for c in tiled.get(&id).into_iter().flatten().filter(|c| !own.is_some_and(|d| d.contains(c))) {
            derived.extend(tile_values(*c));
        }
        if let (Some(&min), Some(&max), false) = (listed.iter().min(), listed.iter().max(), is_rows) {
            derived.retain(|v| (min..=max).contains(v));
        }
        derived.sort_unstable();
        derived.dedup();
        derived.retain(|v| !listed.contains(v));
        let mut vals = thin(derived, MAX_AXIS_VALUES.saturating_sub(listed.len()).max(2));
        vals.extend(listed);
        vals.sort_unstable();
        vals.dedup();
        axes.push((id, vals));
    }
    let axes: Vec<(ParamId, Vec<u64>)> = axes.into_iter().filter(|(_, v)| !v.is_empty()).collect();
    let total: usize = axes.iter().map(|(_, v)| v.len()).fold(1usize, |a, b| a.saturating_mul(b));
    let picks: Vec<usize> = if total <= MAX_SHAPES {
        (0..total).collect()
    } else {
        (0..MAX_SHAPES).map(|j| j * (total - 1) / (MAX_SHAPES - 1)).collect()
    };
    let shape = |mut n: usize| -> Vec<(ParamId, u64)> {
        axes.iter()
            .map(|(id, v)| {
                let x = v[n % v.len()];
                n /= v.len();
                (*id, x)
            })
            .collect()
    };
    let mut shapes: Vec<Vec<(ParamId, u64)>> = picks.into_iter().map(shape).collect();
    // Every value of every axis in some shape: the subset may have skipped one.
    for (a, (_, vs)) in axes.iter().enumerate() {
        for &v in vs {
            if !shapes.iter().any(|s| s[a].1 == v) {
                let mut s = shapes[0].clone();
                s[a].1 = v;
                shapes.push(s);
            }
        }
    }
    within_budget(shapes, &|p| is_size(k, &fed, &tiled, p))
}

/// Upper bound on the summed `cost` of one kernel's shapes: the proofs run while the user's
/// crate compiles.
pub const MAX_WORK: u64 = 1 << 18;

fn is_size(k: &Kernel, fed: &Feeds, tiled: &BTreeMap<ParamId, BTreeSet<u64>>, p: ParamId) -> bool {
    fed.contains_key(&p) || tiled.contains_key(&p) || k.sibling.as_ref().is_some_and(|s| s.rows == p)
}

/// A shape's work, roughly: the product of its sizes (lengths, tiled extents, rows).
fn cost(shape: &[(ParamId, u64)], is_size: &dyn Fn(ParamId) -> bool) -> u64 {
    shape.iter().filter(|(p, _)| is_size(*p)).fold(1u64, |a, (_, v)| a.saturating_mul((*v).max(1)))
}

/// Keeps, for every value of every axis, the cheapest shape holding it, then the other shapes
/// cheapest first while the summed cost stays within `MAX_WORK`; original order otherwise.
fn within_budget(shapes: Vec<Vec<(ParamId, u64)>>, is_size: &dyn Fn(ParamId) -> bool) -> Vec<Vec<(ParamId, u64)>> {
    let costs: Vec<u64> = shapes.iter().map(|s| cost(s, is_size)).collect();
    if costs.iter().fold(0u64, |a, c| a.saturating_add(*c)) <= MAX_WORK {
        return shapes;
    }
    let mut keep = vec![false; shapes.len()];
    let axes = shapes.first().map_or(0, Vec::len);
    for a in 0..axes {
        let mut best: BTreeMap<u64, usize> = BTreeMap::new();
        for (i, s) in shapes.iter().enumerate() {
            let e = best.entry(s[a].1).or_insert(i);
            if costs[i] < costs[*e] {
                *e = i;
            }
        }
        for i in best.into_values() {
            keep[i] = true;
        }
    }
    let mut work: u64 = (0..shapes.len()).filter(|&i| keep[i]).map(|i| costs[i]).fold(0, u64::saturating_add);
    let mut rest: Vec<usize> = (0..shapes.len()).filter(|&i| !keep[i]).collect();
    rest.sort_by_key(|&i| costs[i]);
    for i in rest {
        if work.saturating_add(costs[i]) > MAX_WORK {
            break;
        }
        work += costs[i];
        keep[i] = true;
    }
    shapes.into_iter().zip(keep).filter_map(|(s, k)| k.then_some(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Side by side, the results come back in shape order, every shape once, so the first
    /// error a caller meets is the one it meets running them in sequence.
    #[test]
    fn shapes_side_by_side_give_the_sequential_results_in_order() {
        let shapes: Vec<Vec<(ParamId, u64)>> = (0..11u64).map(|v| vec![(ParamId(0), v)]).collect();
        let f = |s: &[(ParamId, u64)]| -> Result<u64, u64> {
            let v = s[0].1;
            // Uneven work, so threads finish out of order; errors at shapes 4 and 9.
            std::thread::sleep(std::time::Duration::from_millis((11 - v) * 2));
            if v % 5 == 4 {
                Err(v)
            } else {
                Ok(v * v)
            }
        };
        let one = each_shape_on(1, &shapes, f);
        for threads in [2, 3, 16] {
            assert_eq!(each_shape_on(threads, &shapes, f), one, "{threads} threads");
        }
        assert_eq!(one.iter().find_map(|r| r.err()), Some(4));
        assert!(each_shape_on(4, &[], f).is_empty());
    }

    #[test]
    fn ragged_against_lane_count() {
        assert_eq!(ragged_values(&[32]), vec![1, 31, 32, 33, 64, 70]);
        assert_eq!(ragged_values(&[32, 8]), vec![1, 7, 8, 9, 16, 31, 32, 33, 64, 70]);
        assert_eq!(ragged_values(&[]), vec![1, 2, 7]);
    }

    #[test]
    fn divided_lengths_are_scaled_and_ragged() {
        let r = ragged_values(&[32]);
        assert_eq!(length_values(&BTreeSet::from([32]), &r), vec![32, 1023, 1024, 1087, 2048, 2271]);
        assert_eq!(length_values(&BTreeSet::from([1]), &r), r);
    }

    #[test]
    fn listed_values_add_to_derived_ones() {
        use crate::ir::{Access, Sibling};
        let mut k = Kernel::new("t");
        k.add_param("y", ParamKind::Buffer { elem: ScalarType::F32, access: Access::ReadWrite });
        let n = k.add_param("n", ParamKind::Scalar(ScalarType::INDEX));
        let rows = k.add_param("rows", ParamKind::Scalar(ScalarType::INDEX));
        // grid = [(n + 255) / 256, (rows + 7) / 8]: tiles 256 of n, 8 of rows.
        let tile = |p, c: u64| {
            Expr::bin(BinOp::Div, Expr::bin(BinOp::Add, Expr::Param(p), Expr::index(c - 1)), Expr::index(c))
        };
        k.grid = vec![tile(n, 256), tile(rows, 8)];
        k.sibling =
            Some(Sibling { of: "m".into(), rows, row_strides: Vec::new(), row_steps: Vec::new(), carried: Vec::new() });
        k.verify_shapes.values = vec![(n, vec![1, 600]), (rows, vec![2])];
        let shapes = default_shapes(&k);
        let axis = |p: ParamId| -> BTreeSet<u64> {
            shapes.iter().map(|s| s.iter().find(|(q, _)| *q == p).unwrap().1).collect()
        };
        assert_eq!(axis(n), BTreeSet::from([1, 255, 256, 257, 512, 600]));
        assert_eq!(axis(rows), BTreeSet::from([1, 2, 3, 5, 7, 8, 9, 16]));
    }
}
