//! Loop versioning of bounds checks. For an innermost loop whose buffer accesses include some
//! with an index affine in the loop variable (`a + c·i`, `a` invariant in the loop, `c` a
//! constant or a constant times one invariant value, such as a runtime row stride), the first
//! and last index of each such access are checked against its buffer once
//! before the loop; when every one is in range for every iteration, a copy of the loop runs in
//! which those accesses carry no check, and otherwise the loop as always (every access checked).
//!
//! Nothing observable changes: in the unchecked copy no versioned access could have failed, so
//! its loads read the same elements, its stores write the same ones, and the thread's failure
//! record (kept only by the other, still checked accesses) is the one the checked loop makes.
//! Only loops without barriers, shuffles or parallel loops are versioned: the two copies may
//! be taken by different lanes (the check can depend on the lane). A sequential loop inside
//! one is allowed (the lane-strided loop of a reduction over rows holds the fixed loop over a
//! block's words): its accesses stay out of the outer plan, versioned by its own, so code
//! grows 2× per level of nesting.
//!
//! Why two indices suffice: with `i` running over `first..=last` (a subset, stepped), the index
//! is `(a + c·i) mod 2^64`. When `c·last` does not overflow, the true values `a + c·i` increase
//! with `i` and span less than 2^64, so the wrapped values are all within `[v(first), v(last)]`
//! exactly when `v(first) <= v(last)` (a wrap between the two ends makes `v(last) < v(first)`).
//! So: `c·last` fits, `v(first) <= v(last)`, and `v(last) < len` (unsigned, as every check).
//! A runtime coefficient `k·x` is checked the same way in the preheader, in 128 bits: the true
//! `k·x` fits 64 bits and `k·x·last` fits (or stays within the piece span below).
//!
//! Two widenings, both for the quantized matvecs' weight words:
//! - **Monotone pieces.** An index may also add terms `A / d` with `A` affine (`a' + c'·i`) and
//!   `d` a constant (`w[base + (t + 2) / 4]`). Each piece is non-decreasing where `A` does not
//!   wrap (`c'·last` fits and `A(first) <= A(last)`, as above), and its span is at most `A`'s;
//!   with `A(last) − A(first) <= 2^60` per piece (at most 7 pieces) and `c·last <= 2^60` for the
//!   direct term, the whole index is a non-decreasing true value of span below 2^64, so the
//!   same two-end test holds for it.
//! - **Loads in the invariant part** of read-only buffers (`&[T]` parameters, which no thread of
//!   the kernel writes), such as the expert id in `w[(ids[s]·n + o)·nb + …]`. The preheader
//!   evaluates them without recording a failure (an out-of-range one only sends the thread to
//!   the checked loop, which records it in program order), and the unchecked copy uses exactly
//!   the values the preheader checked, so its accesses are in range by construction.

use std::collections::HashSet;

use inkwell::values::IntValue;
use inkwell::IntPredicate as P;

use super::Gpu;
use crate::ir::{BinOp, Buf, Expr, ScalarType, Stmt, Var};
use crate::lower::expr::ExprLeaves;
use crate::lower::R;

/// The accesses of one loop body that the versioned copy runs unchecked.
pub(super) struct Plan<'a> {
    var: Var,
    accesses: Vec<Affine<'a>>,
    /// The body holds a sequential loop (whose accesses the inner loop's own plan versions).
    nested: bool,
    /// The variables the body assigns (outside inner loops): the independent accumulator
    /// chains one iteration advances, e.g. R for a reduction over R rows in `seq` order.
    chains: u32,
}

/// `buf[index]` with `index ≡ a + coef·var + Σ A_k / d_k (mod 2^64)`, each piece `A_k` affine
/// in `var` with its own coefficient (no pieces: the plain affine index).
struct Affine<'a> {
    buf: Buf,
    index: &'a Expr,
    coef: u64,
    /// The coefficient is `coef · x` for this invariant `x` (a runtime stride), checked in the
    /// preheader; `None`: `coef` alone.
    coef_by: Option<&'a Expr>,
    pieces: Vec<(&'a Expr, u64)>,
}

/// The coefficient of the loop variable in an index: a constant, or a constant times one
/// invariant expression.
type Coef<'a> = (u64, Option<&'a Expr>);

fn coef_add<'a>(a: Coef<'a>, b: Coef<'a>) -> Option<Coef<'a>> {
    match (a, b) {
        ((0, None), x) | (x, (0, None)) => Some(x),
        ((a, None), (b, None)) => Some((a.checked_add(b)?, None)),
        _ => None,
    }
}

/// The most pieces an index may have: their spans (each at most 2^60) and the direct term's
/// then add up to less than 2^64.
const MAX_PIECES: usize = 7;
/// The span a piece or the direct term may have when an index has pieces.
pub(super) const PIECE_SPAN: u64 = 1 << 60;

/// Which buffers the kernel only reads (their loads may sit in an invariant index part).
pub(super) type ReadOnly<'r> = &'r dyn Fn(Buf) -> bool;

impl<'a> Plan<'a> {
    /// The plan for `for var in … { body }` over a loop variable of type `ty`, or `None` when
    /// the loop is not versioned (no affine access, not innermost, or a barrier or shuffle in it).
    pub(super) fn new(var: Var, ty: ScalarType, body: &'a [Stmt], read_only: ReadOnly<'_>) -> Option<Plan<'a>> {
        if ty != ScalarType::U64 {
            return None;
        }
        let mut varying = HashSet::from([var]);
        if !simple_body(body, &mut varying) {
            return None;
        }
        let nested = has_loop(body);
        let mut assigned = HashSet::new();
        assigned_vars(body, &mut assigned);
        let chains = assigned.len().max(1) as u32;
        let cx = Cx { var, varying: &varying, read_only };
        let mut accesses = Vec::new();
        for s in body {
            collect_stmt(s, &cx, &mut accesses);
        }
        if accesses.is_empty() {
            return None;
        }
        Some(Plan { var, accesses, nested, chains })
    }

    /// The accumulator chains one iteration advances (at least 1).
    pub(super) fn chains(&self) -> u32 {
        self.chains
    }

    /// True when the loop has no inner loop.
    pub(super) fn innermost(&self) -> bool {
        !self.nested
    }

    /// The index expressions the versioned copy does not check (by node identity).
    pub(super) fn unchecked(&self) -> impl Iterator<Item = *const Expr> + '_ {
        self.accesses.iter().map(|a| a.index as *const Expr)
    }

    #[cfg(test)]
    fn coefs(&self) -> Vec<u64> {
        self.accesses.iter().map(|a| a.coef).collect()
    }

    #[cfg(test)]
    fn runtime_coefs(&self) -> Vec<bool> {
        self.accesses.iter().map(|a| a.coef_by.is_some()).collect()
    }

    #[cfg(test)]
    fn piece_coefs(&self) -> Vec<Vec<u64>> {
        self.accesses.iter().map(|a| a.pieces.iter().map(|p| p.1).collect()).collect()
    }
}

/// What the index analysis of one loop needs to know.
struct Cx<'v, 'r> {
    var: Var,
    varying: &'v HashSet<Var>,
    read_only: ReadOnly<'r>,
}

/// True when `body` has no parallel loop, lane region, barrier or shuffle (sequential loops
/// whose bodies are simple too are allowed: the accesses inside them are left to their own
/// plans); adds every variable it defines or assigns to `varying`, those bound by an
/// expression's `let` and inner loop variables included (such a variable may stand for a
/// value of the loop variable inside an index).
fn simple_body(body: &[Stmt], varying: &mut HashSet<Var>) -> bool {
    let plain = |e: &Expr, varying: &mut HashSet<Var>| {
        let_vars(e, varying);
        !e.any(&|x| matches!(x, Expr::ShuffleXor { .. } | Expr::Reduce(_) | Expr::Call { .. }))
    };
    body.iter().all(|s| match s {
        Stmt::Let { var, value } | Stmt::Assign { var, value } => {
            varying.insert(*var);
            plain(value, varying)
        }
        Stmt::Store { index, value, .. } => plain(index, varying) && plain(value, varying),
        Stmt::If { cond, then_body, else_body } => {
            plain(cond, varying) && simple_body(then_body, varying) && simple_body(else_body, varying)
        }
        Stmt::Check { cond, .. } => plain(cond, varying),
        Stmt::For { var, start, end, step, body } => {
            varying.insert(*var);
            plain(start, varying) && plain(end, varying) && plain(step, varying) && simple_body(body, varying)
        }
        // A matrix step is a whole wave's, with its own accesses and loop.
        Stmt::ParFor { .. } | Stmt::Lanes { .. } | Stmt::LetRows { .. } | Stmt::Barrier | Stmt::MmaI8(_) => false,
    })
}

/// True when `body` (a simple one) holds a sequential loop, inside an `if` or not.
fn has_loop(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::For { .. } => true,
        Stmt::If { then_body, else_body, .. } => has_loop(then_body) || has_loop(else_body),
        _ => false,
    })
}

/// The variables `body` assigns, inside `if`s but not inside inner loops.
fn assigned_vars(body: &[Stmt], out: &mut HashSet<Var>) {
    for s in body {
        match s {
            Stmt::Assign { var, .. } => {
                out.insert(*var);
            }
            Stmt::If { then_body, else_body, .. } => {
                assigned_vars(then_body, out);
                assigned_vars(else_body, out);
            }
            _ => {}
        }
    }
}

fn let_vars(e: &Expr, out: &mut HashSet<Var>) {
    if let Expr::Let { var, .. } = e {
        out.insert(*var);
    }
    e.for_each_child(|c| let_vars(c, out));
}

fn collect_stmt<'a>(s: &'a Stmt, cx: &Cx, out: &mut Vec<Affine<'a>>) {
    match s {
        Stmt::Let { value, .. } | Stmt::Assign { value, .. } => collect_expr(value, cx, out),
        Stmt::Store { buf, index, value } => {
            collect_expr(index, cx, out);
            collect_expr(value, cx, out);
            push_access(*buf, index, cx, out);
        }
        Stmt::Check { cond, .. } => collect_expr(cond, cx, out),
        Stmt::If { cond, then_body, else_body } => {
            collect_expr(cond, cx, out);
            for s in then_body.iter().chain(else_body) {
                collect_stmt(s, cx, out);
            }
        }
        Stmt::For { .. }
        | Stmt::ParFor { .. }
        | Stmt::Lanes { .. }
        | Stmt::LetRows { .. }
        | Stmt::Barrier
        | Stmt::MmaI8(_) => {}
    }
}

/// Plans `buf[index]` when its index is affine or monotone (see the module comment).
fn push_access<'a>(buf: Buf, index: &'a Expr, cx: &Cx, out: &mut Vec<Affine<'a>>) {
    let mut pieces = Vec::new();
    if let Some((coef, coef_by)) = monotone(index, cx, &mut pieces) {
        if pieces.len() <= MAX_PIECES {
            out.push(Affine { buf, index, coef, coef_by, pieces });
        }
    }
}

fn collect_expr<'a>(e: &'a Expr, cx: &Cx, out: &mut Vec<Affine<'a>>) {
    if let Expr::Load { buf, index } = e {
        push_access(*buf, index, cx, out);
    }
    // `for_each_child` takes a closure over `&Expr` of the child's own lifetime; walk by hand
    // so the collected references live as long as the kernel.
    match e {
        Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_) => {}
        Expr::Load { index, .. } => collect_expr(index, cx, out),
        Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Call { arg, .. } => {
            collect_expr(arg, cx, out)
        }
        Expr::Binary { lhs, rhs, .. } => {
            collect_expr(lhs, cx, out);
            collect_expr(rhs, cx, out);
        }
        Expr::Select { cond, then, els } => {
            collect_expr(cond, cx, out);
            collect_expr(then, cx, out);
            collect_expr(els, cx, out);
        }
        Expr::Fma { a, b, c } | Expr::Dot4 { a, b, c, .. } => {
            collect_expr(a, cx, out);
            collect_expr(b, cx, out);
            collect_expr(c, cx, out);
        }
        Expr::Let { value, body, .. } => {
            collect_expr(value, cx, out);
            collect_expr(body, cx, out);
        }
        Expr::Reduce(_) | Expr::ShuffleXor { .. } => {}
    }
}

/// `Some(c)` when `e ≡ a + c·var (mod 2^64)` for every value of `var`, with `a` invariant in
/// the loop (no variable of `varying` but `var` itself as the linear term; loads only of
/// read-only buffers) and `c` an exact (non-wrapping) constant, or a constant times one
/// invariant expression (whose true product the preheader checks).
fn affine<'a>(e: &'a Expr, cx: &Cx) -> Option<Coef<'a>> {
    match e {
        Expr::Var(v) if *v == cx.var => Some((1, None)),
        _ if invariant(e, cx) => Some((0, None)),
        Expr::Binary { op: BinOp::Add, lhs, rhs } => coef_add(affine(lhs, cx)?, affine(rhs, cx)?),
        Expr::Binary { op: BinOp::Sub, lhs, rhs } if invariant(rhs, cx) => affine(lhs, cx),
        Expr::Binary { op: BinOp::Mul, lhs, rhs } => match (&**lhs, &**rhs) {
            (Expr::Const(k), x) | (x, Expr::Const(k)) if k.ty == ScalarType::U64 => {
                let (c, by) = affine(x, cx)?;
                Some((c.checked_mul(k.bits)?, by))
            }
            (x, y) | (y, x) if invariant(y, cx) => match affine(x, cx)? {
                (c, None) => Some((c, Some(y))),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// `Some(c)` when `e ≡ a + c·var + Σ A_k / d_k (mod 2^64)`: an affine index, or sums (and
/// invariant differences) of affine terms and pieces `A / d` (`A` affine with a non-zero
/// coefficient, `d` a positive u64 constant), each piece pushed to `pieces` with its `A`.
fn monotone<'a>(e: &'a Expr, cx: &Cx, pieces: &mut Vec<(&'a Expr, u64)>) -> Option<Coef<'a>> {
    if let Some(c) = affine(e, cx) {
        return Some(c);
    }
    match e {
        Expr::Binary { op: BinOp::Add, lhs, rhs } => coef_add(monotone(lhs, cx, pieces)?, monotone(rhs, cx, pieces)?),
        Expr::Binary { op: BinOp::Sub, lhs, rhs } if invariant(rhs, cx) => monotone(lhs, cx, pieces),
        Expr::Binary { op: BinOp::Div, lhs, rhs } => match &**rhs {
            Expr::Const(d) if d.ty == ScalarType::U64 && d.bits > 0 => {
                // A piece's coefficient is a constant.
                let (c, None) = affine(lhs, cx)? else { return None };
                pieces.push((&**lhs, c));
                Some((0, None))
            }
            _ => None,
        },
        _ => None,
    }
}

/// A value the loop cannot change and the preheader can compute without side effects: no
/// shuffle, no variable the body defines or assigns (nor the loop variable), and loads only of
/// buffers the kernel never writes (the preheader reads them without recording a failure).
fn invariant(e: &Expr, cx: &Cx) -> bool {
    !e.any(&|x| match x {
        Expr::Var(v) => cx.varying.contains(v),
        Expr::Load { buf, .. } => !(cx.read_only)(*buf),
        Expr::ShuffleXor { .. } | Expr::Reduce(_) | Expr::Call { .. } => true,
        _ => false,
    })
}

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    /// True (i1) when every access of `plan` is in range for the loop variable at `first` and
    /// at `last` (and so, by the module's argument, at every iteration between), with the
    /// values of the loads the indices' invariant parts read (by index node): the unchecked
    /// copy must use exactly these. Those loads record no failure here (`silent`): one out of
    /// range only makes the result false.
    pub(super) fn in_range_throughout(
        &mut self,
        plan: &Plan<'a>,
        first: IntValue<'ctx>,
        last: IntValue<'ctx>,
    ) -> R<(IntValue<'ctx>, Hoisted<'ctx>)> {
        let outer = std::mem::take(&mut self.hoisted);
        let was = self.silent.replace(Vec::new());
        let r = self.ends_in_range(plan, first, last);
        let loads_ok = std::mem::replace(&mut self.silent, was).unwrap_or_default();
        let loads = std::mem::replace(&mut self.hoisted, outer);
        let mut ok = r?;
        for l in loads_ok {
            ok = self.ir.and(ok, l)?;
        }
        Ok((ok, loads))
    }

    fn ends_in_range(&mut self, plan: &Plan<'a>, first: IntValue<'ctx>, last: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        let mut ok = self.ir.cx.bool_type().const_int(1, false);
        // `e` with the loop variable at `i`.
        let at = |g: &mut Self, e: &'a Expr, i: IntValue<'ctx>| -> R<IntValue<'ctx>> {
            let old = g.lets.insert(plan.var, i.into());
            let r = g.index(e);
            match old {
                Some(o) => g.lets.insert(plan.var, o),
                None => g.lets.remove(&plan.var),
            };
            Ok(r?.0)
        };
        // `c·last` fits (`limit` = u64::MAX) or stays within `limit`.
        let coef_fits = |g: &mut Self, c: u64, limit: u64| -> R<Option<IntValue<'ctx>>> {
            if c == 0 || (c == 1 && limit == u64::MAX) {
                return Ok(None);
            }
            Ok(Some(g.ir.icmp(P::ULE, last, g.ir.i64(limit / c))?))
        };
        // The same for a runtime coefficient `c·x`, in 128 bits: `c·x` fits 64 bits and
        // `(c·x)·last` is within `limit` (neither 128-bit product can wrap).
        let runtime_coef_fits = |g: &mut Self, c: u64, x: &'a Expr, limit: u64| -> R<IntValue<'ctx>> {
            let wide = g.ir.cx.i128_type();
            let x = g.index(x)?.0;
            let cx = g.ir.mul(g.ir.zext(x, wide)?, wide.const_int(c, false))?;
            let fits = g.ir.icmp(P::ULE, cx, g.ir.zext(g.ir.i64(u64::MAX), wide)?)?;
            let span = g.ir.mul(cx, g.ir.zext(last, wide)?)?;
            let within = g.ir.icmp(P::ULE, span, g.ir.zext(g.ir.i64(limit), wide)?)?;
            g.ir.and(fits, within)
        };
        for a in &plan.accesses {
            let (_, len, _, _) = self.access(a.buf, false)?;
            let (lo, hi) = (at(self, a.index, first)?, at(self, a.index, last)?);
            let mut fits = self.ir.and(self.ir.icmp(P::ULE, lo, hi)?, self.ir.icmp(P::ULT, hi, len)?)?;
            let limit = if a.pieces.is_empty() { u64::MAX } else { PIECE_SPAN };
            if let Some(x) = a.coef_by {
                let c = runtime_coef_fits(self, a.coef, x, limit)?;
                fits = self.ir.and(fits, c)?;
            } else if let Some(c) = coef_fits(self, a.coef, limit)? {
                fits = self.ir.and(fits, c)?;
            }
            for &(piece, c) in &a.pieces {
                let (plo, phi) = (at(self, piece, first)?, at(self, piece, last)?);
                let span = self.ir.sub(phi, plo)?;
                fits = self.ir.and(fits, self.ir.icmp(P::ULE, plo, phi)?)?;
                fits = self.ir.and(fits, self.ir.icmp(P::ULE, span, self.ir.i64(PIECE_SPAN))?)?;
                if let Some(c) = coef_fits(self, c, u64::MAX)? {
                    fits = self.ir.and(fits, c)?;
                }
            }
            ok = self.ir.and(ok, fits)?;
        }
        Ok(ok)
    }
}

/// Values of loads in invariant index parts, by their index node (`in_range_throughout`).
pub(super) type Hoisted<'ctx> = std::collections::HashMap<*const Expr, inkwell::values::BasicValueEnum<'ctx>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u32) -> Expr {
        Expr::Var(Var(n))
    }
    fn add(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Add, a, b)
    }
    fn mul(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Mul, a, b)
    }
    fn load(index: Expr) -> Expr {
        Expr::load(Buf::Param(crate::ir::ParamId(0)), index)
    }
    fn acc(value: Expr) -> Stmt {
        Stmt::Assign { var: Var(9), value: Expr::bin(BinOp::Add, Expr::Var(Var(9)), value) }
    }

    #[test]
    fn affine_indices_are_versioned_with_their_coefficient() {
        // i = v0; v1 is defined outside the loop.
        let body =
            vec![acc(load(add(mul(v(1), Expr::index(144)), v(0)))), acc(load(add(v(1), mul(v(0), Expr::index(32)))))];
        let plan = Plan::new(Var(0), ScalarType::U64, &body, &|_| false).expect("two affine loads");
        assert_eq!(plan.coefs(), vec![1, 32]);
    }

    #[test]
    fn chains_count_the_accumulators_an_iteration_assigns() {
        let one = vec![acc(load(v(0))), acc(load(add(v(0), Expr::index(1))))];
        assert_eq!(Plan::new(Var(0), ScalarType::U64, &one, &|_| false).expect("affine").chains(), 1);
        // Four rows' partials, two of them under a guard (the second loop of a reduction over
        // rows with a length per row), as `lanes::expand` writes them.
        let row =
            |r: u32| Stmt::Assign { var: Var(10 + r), value: add(v(10 + r), load(add(v(0), Expr::index(r as u64)))) };
        let guarded =
            |r: u32| Stmt::If { cond: Expr::bin(BinOp::Lt, v(0), v(20)), then_body: vec![row(r)], else_body: vec![] };
        let rows = vec![row(0), row(1), guarded(2), guarded(3)];
        assert_eq!(Plan::new(Var(0), ScalarType::U64, &rows, &|_| false).expect("affine").chains(), 4);
    }

    #[test]
    fn a_runtime_stride_is_a_coefficient_checked_at_run_time() {
        // v[t · row + kv + d] (row, kv, d defined outside the loop) and (v1 + i)·v2·4.
        let body = vec![
            acc(load(add(add(mul(v(0), v(1)), v(2)), v(3)))),
            acc(load(mul(mul(add(v(1), v(0)), v(2)), Expr::index(4)))),
        ];
        let plan = Plan::new(Var(0), ScalarType::U64, &body, &|_| false).expect("runtime strides");
        assert_eq!(plan.coefs(), vec![1, 4]);
        assert_eq!(plan.runtime_coefs(), vec![true, true]);
        // A runtime stride is not a piece's coefficient.
        let piece = vec![acc(load(div(mul(v(0), v(1)), Expr::index(4))))];
        assert!(Plan::new(Var(0), ScalarType::U64, &piece, &|_| false).is_none());
    }

    #[test]
    fn non_affine_or_varying_indices_are_not() {
        let cases = [
            mul(add(v(1), v(9)), v(0)),                  // i times a variable the body assigns
            Expr::bin(BinOp::Div, v(0), Expr::index(8)), // i / 8: a monotone piece
            add(load(v(1)), v(0)),                       // a load in the invariant part
            add(v(9), v(0)),                             // a variable the body assigns
            Expr::bin(BinOp::Sub, v(1), v(0)),           // a negative coefficient
            mul(v(0), Expr::index(u64::MAX)),            // the largest coefficient
        ];
        for (n, index) in cases.into_iter().enumerate() {
            let body = vec![acc(load(index))];
            let coefs = Plan::new(Var(0), ScalarType::U64, &body, &|_| false).map(|p| p.coefs());
            let expected = match n {
                1 => Some(vec![0]),        // the piece i / 8, no direct term
                2 => Some(vec![0]),        // only the inner load `x[v1]`, not `x[x[v1] + i]`
                5 => Some(vec![u64::MAX]), // kept: its trip bound is checked at run time
                _ => None,
            };
            assert_eq!(coefs, expected, "case {n}");
        }
        let overflow = vec![acc(load(mul(mul(v(0), Expr::index(u64::MAX)), Expr::index(2))))];
        assert!(Plan::new(Var(0), ScalarType::U64, &overflow, &|_| false).is_none(), "a coefficient that wraps");
        // Two runtime coefficients, or a runtime one plus a constant one: not taken.
        for index in [add(mul(v(0), v(1)), mul(v(0), v(2))), add(mul(v(0), v(1)), v(0))] {
            assert!(Plan::new(Var(0), ScalarType::U64, &[acc(load(index))], &|_| false).is_none());
        }
    }

    #[test]
    fn loops_with_barriers_shuffles_parallel_loops_or_narrow_counters_are_not_versioned() {
        let affine_load = || acc(load(v(0)));
        let par = Stmt::ParFor { var: Var(5), end: Expr::index(4), team: None, body: vec![] };
        let shuffle = acc(Expr::ShuffleXor { value: Box::new(Expr::f32(1.0)), mask: 1 });
        let inner_barrier = Stmt::For {
            var: Var(5),
            start: Expr::index(0),
            end: Expr::index(4),
            step: Expr::index(1),
            body: vec![Stmt::Barrier],
        };
        for (n, extra) in [par, Stmt::Barrier, shuffle, inner_barrier].into_iter().enumerate() {
            let body = vec![affine_load(), extra];
            assert!(Plan::new(Var(0), ScalarType::U64, &body, &|_| false).is_none(), "case {n} was versioned");
        }
        assert!(Plan::new(Var(0), ScalarType::U32, &[affine_load()], &|_| false).is_none());
        let one = [affine_load()];
        let plain = Plan::new(Var(0), ScalarType::U64, &one, &|_| false).expect("an affine load");
        assert!(plain.innermost());
    }

    #[test]
    fn an_inner_sequential_loop_leaves_its_own_accesses_to_its_own_plan() {
        // for v0 { acc(x[v0]); for v5 in 0..4 { acc(x[v0 + v5]) } }: the outer plan takes x[v0]
        // only, and a load indexed by the inner variable is not taken for an invariant.
        let inner = Stmt::For {
            var: Var(5),
            start: Expr::index(0),
            end: Expr::index(4),
            step: Expr::index(1),
            body: vec![acc(load(add(v(0), v(5))))],
        };
        let body = vec![acc(load(v(0))), inner];
        let plan = Plan::new(Var(0), ScalarType::U64, &body, &|_| false).expect("the outer affine load");
        assert_eq!(plan.coefs(), vec![1]);
        assert!(!plan.innermost());
        // An outer index reading the inner loop's variable (after the loop) is not invariant.
        let inner =
            Stmt::For { var: Var(5), start: Expr::index(0), end: Expr::index(4), step: Expr::index(1), body: vec![] };
        let body = vec![inner, acc(load(add(v(0), v(5))))];
        assert!(Plan::new(Var(0), ScalarType::U64, &body, &|_| false).is_none());
    }

    #[test]
    fn a_let_bound_variable_is_never_taken_for_an_invariant() {
        // `let t = i * 2 in x[t + 1]`: t stands for a value of the loop variable.
        let e = Expr::let_in(Var(3), mul(v(0), Expr::index(2)), load(add(v(3), Expr::index(1))));
        assert!(Plan::new(Var(0), ScalarType::U64, &[acc(e)], &|_| false).is_none());
    }

    fn div(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Div, a, b)
    }

    #[test]
    fn word_indices_divided_by_a_constant_are_monotone_pieces() {
        // w[v1 + (v0 + 2) / 4] and w[v1 · 36 + v0 / 4 + v0]: the quantized matvecs' word reads.
        let body = vec![
            acc(load(add(v(1), div(add(v(0), Expr::index(2)), Expr::index(4))))),
            acc(load(add(add(mul(v(1), Expr::index(36)), div(v(0), Expr::index(4))), v(0)))),
        ];
        let plan = Plan::new(Var(0), ScalarType::U64, &body, &|_| false).expect("monotone word reads");
        assert_eq!(plan.coefs(), vec![0, 1]);
        assert_eq!(plan.piece_coefs(), vec![vec![1], vec![1]]);
        // Not monotone: a remainder, a division by a variable or by zero, a piece times a constant.
        for index in [
            Expr::bin(BinOp::Rem, v(0), Expr::index(4)),
            div(v(0), v(1)),
            div(v(0), Expr::index(0)),
            mul(div(v(0), Expr::index(4)), Expr::index(2)),
        ] {
            assert!(Plan::new(Var(0), ScalarType::U64, &[acc(load(index))], &|_| false).is_none());
        }
        // At most MAX_PIECES pieces in one index.
        let many = (0..=MAX_PIECES).fold(v(1), |e, _| add(e, div(v(0), Expr::index(4))));
        assert!(Plan::new(Var(0), ScalarType::U64, &[acc(load(many))], &|_| false).is_none());
    }

    #[test]
    fn loads_of_read_only_buffers_may_sit_in_the_invariant_part() {
        // w[ids[v1] · 8 + v0]: versioned with the expert id's load when `ids` is read-only.
        let ids = |i: Expr| Expr::load(Buf::Param(crate::ir::ParamId(1)), i);
        let body = vec![acc(load(add(mul(ids(v(1)), Expr::index(8)), v(0))))];
        let read_only = |b: Buf| b == Buf::Param(crate::ir::ParamId(1));
        let plan = Plan::new(Var(0), ScalarType::U64, &body, &read_only).expect("read-only id");
        assert_eq!(plan.coefs(), vec![1, 0], "the weight read and the id read");
        let plan = Plan::new(Var(0), ScalarType::U64, &body, &|_| false).expect("the id read alone");
        assert_eq!(plan.coefs(), vec![0], "a written buffer's load is not invariant");
    }
}
