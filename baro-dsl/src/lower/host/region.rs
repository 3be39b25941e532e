//! `Lanes` regions on the host: lanes run in lockstep, one statement at a time.
//!
//! A statement with no shuffle (at any depth) runs as `for lane in 0..count { stmt }`. A
//! `For`/`If` containing a shuffle has uniform bounds/condition (evaluated as lane 0 sees
//! them) and runs once, its body handled by the same rule. A `Let`/`Assign`/`Store` whose
//! expressions contain `ShuffleXor { value, mask }` first evaluates `value` for every lane
//! into a temporary array, then computes each lane's result reading `tmp[lane ^ mask]`.
//! This module must never let one lane observe another lane's update of the same statement.
//!
//! A lane whose value no later statement reads is not computed (`lane_masks`): a butterfly's
//! last steps are needed by fewer and fewer lanes (the step with mask m by the lanes below
//! 2m where only lane 0's total is kept), so a 32-lane sum runs 31 additions instead of 160.
//! Only statements that cannot fault are narrowed (no loads, stores, divisions or checks):
//! every lane that is computed computes what it always did, and a lane that is not computed
//! is one whose value is never read, so the kernel's results and its error records are the
//! same bits.

use std::collections::{HashMap, HashSet};

use super::Cg;
use crate::ir::{BinOp, Const, Expr, Stmt, Var};
use crate::lower::expr::ExprLeaves;
use crate::lower::{fail, R};
use crate::verify::{stmt_blocks, stmt_exprs};

fn expr_has_shuffle(e: &Expr) -> bool {
    e.any(&|x| matches!(x, Expr::ShuffleXor { .. }))
}

fn stmt_has_shuffle(s: &Stmt) -> bool {
    match s {
        Stmt::Let { value, .. } | Stmt::Assign { value, .. } | Stmt::LetRows { value, .. } => expr_has_shuffle(value),
        Stmt::Store { index, value, .. } => expr_has_shuffle(index) || expr_has_shuffle(value),
        Stmt::For { start, end, step, body, .. } => {
            expr_has_shuffle(start)
                || expr_has_shuffle(end)
                || expr_has_shuffle(step)
                || body.iter().any(stmt_has_shuffle)
        }
        Stmt::ParFor { end, body, .. } => expr_has_shuffle(end) || body.iter().any(stmt_has_shuffle),
        Stmt::If { cond, then_body, else_body } => {
            expr_has_shuffle(cond) || then_body.iter().any(stmt_has_shuffle) || else_body.iter().any(stmt_has_shuffle)
        }
        Stmt::Lanes { body, .. } => body.iter().any(stmt_has_shuffle),
        Stmt::Barrier => false,
        Stmt::Check { cond, .. } => expr_has_shuffle(cond),
        Stmt::MmaI8(m) => m.exprs().into_iter().any(expr_has_shuffle),
    }
}

/// Shuffle nodes of `e`, inner ones first.
fn shuffles_post_order<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    let children: Vec<&'e Expr> = match e {
        Expr::Load { index, .. } => vec![index],
        Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Call { arg, .. } => {
            vec![arg]
        }
        Expr::Binary { lhs, rhs, .. } => vec![lhs, rhs],
        Expr::Select { cond, then, els } => vec![cond, then, els],
        Expr::Fma { a, b, c } | Expr::Dot4 { a, b, c, .. } => vec![a, b, c],
        Expr::Let { value, body, .. } => vec![value, body],
        Expr::Reduce(r) => vec![&r.len, &r.body],
        Expr::ShuffleXor { value, .. } => vec![value],
        Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_) => vec![],
    };
    for c in children {
        shuffles_post_order(c, out);
    }
    if matches!(e, Expr::ShuffleXor { .. }) {
        out.push(e);
    }
}

/// Lane masks wider than this are not narrowed.
const MASK_LANES: u32 = 128;

/// Whether `e` can be evaluated for a lane whose result nobody reads: no loads (a bounds
/// error), no integer division (a trap), no reductions, and shuffles only of shuffle-free
/// operands.
fn pure(e: &Expr, in_shuffle: bool) -> bool {
    match e {
        Expr::Load { .. } | Expr::Reduce(_) => false,
        Expr::Binary { op: BinOp::Div | BinOp::Rem, .. } => false,
        Expr::ShuffleXor { value, .. } => !in_shuffle && pure(value, true),
        _ => {
            let mut ok = true;
            e.for_each_child(|c| ok = ok && pure(c, in_shuffle));
            ok
        }
    }
}

/// Every variable `e` reads, with the xor masks of the shuffles it is read under (0: none).
fn reads(e: &Expr, mask: u32, out: &mut Vec<(Var, u32)>) {
    match e {
        Expr::Var(v) => out.push((*v, mask)),
        Expr::ShuffleXor { value, mask: m } => reads(value, *m, out),
        _ => e.for_each_child(|c| reads(c, mask, out)),
    }
}

/// Every variable a statement reads or writes, at any depth.
fn stmt_vars(s: &Stmt) -> Vec<Var> {
    fn read(s: &Stmt, out: &mut Vec<(Var, u32)>) {
        stmt_exprs(s, |e| reads(e, 0, out));
        stmt_blocks(s).into_iter().flatten().for_each(|t| read(t, out));
    }
    let (mut per_lane, mut vars) = (HashMap::new(), Vec::new());
    super::collect_defs(std::slice::from_ref(s), None, &mut per_lane, &mut vars);
    let mut rs = Vec::new();
    read(s, &mut rs);
    vars.extend(rs.into_iter().map(|(v, _)| v));
    vars
}

/// `{l ^ m : l in lanes}`, a partner past the region's last lane being the lane itself (as
/// `shuffle_xor` reads it).
fn xor_lanes(lanes: u128, m: u32, count: u32) -> u128 {
    let mut out = 0u128;
    for l in 0..count {
        if lanes >> l & 1 == 1 {
            let p = l ^ m;
            out |= 1u128 << if p < count { p } else { l };
        }
    }
    out
}

/// Whether `s` is `if lane == 0 { v = pure; .. }` with no else: only lane 0 runs its body.
fn lane_zero_only(s: &Stmt, lane: Var) -> bool {
    let Stmt::If { cond, then_body, else_body } = s else { return false };
    let zero = |e: &Expr| matches!(e, Expr::Const(c) if *c == Const::new(c.ty, 0));
    let is_lane = |e: &Expr| matches!(e, Expr::Var(v) if *v == lane);
    let Expr::Binary { op: BinOp::Eq, lhs, rhs } = cond else { return false };
    else_body.is_empty()
        && ((is_lane(lhs) && zero(rhs)) || (zero(lhs) && is_lane(rhs)))
        && then_body
            .iter()
            .all(|t| matches!(t, Stmt::Assign { value, .. } | Stmt::Let { value, .. } if pure(value, false) && !value.any(&|x| matches!(x, Expr::ShuffleXor { .. }))))
}

/// For each top-level statement of a `Lanes` region of `count` lanes, the lanes whose
/// results a later statement (or what the region leaves behind) reads, found walking the body
/// backwards; `None` for a statement that must run on every lane. A region-local variable is
/// read after the region by nobody; one defined outside it is written only by the lane-0
/// pattern (`if lane == 0 { red = v }`, which the expansion emits for a reduction's result) or
/// by a statement that runs on every lane.
pub(super) fn lane_masks(body: &[Stmt], lane: Var, count: u32) -> Vec<Option<u128>> {
    if count == 0 || count > MASK_LANES {
        return vec![None; body.len()];
    }
    let all: u128 = if count == 128 { u128::MAX } else { (1u128 << count) - 1 };
    // The region's own variables (`Let`s, loop variables): their values live per lane.
    let (mut per_lane, mut all_defs) = (HashMap::new(), Vec::new());
    super::collect_defs(body, Some(count), &mut per_lane, &mut all_defs);
    let locals: HashSet<Var> = per_lane.into_keys().collect();
    let mut need: HashMap<Var, u128> = HashMap::new();
    let mut out = vec![None; body.len()];
    for (i, s) in body.iter().enumerate().rev() {
        let narrow = match s {
            Stmt::Let { var, value } | Stmt::Assign { var, value } if locals.contains(var) && pure(value, false) => {
                let m = need.remove(var).unwrap_or(0);
                let mut rs = Vec::new();
                reads(value, 0, &mut rs);
                for (v, sh) in rs {
                    let lanes = if sh == 0 { m } else { xor_lanes(m, sh, count) };
                    *need.entry(v).or_insert(0) |= lanes;
                }
                Some(m)
            }
            _ if lane_zero_only(s, lane) => {
                for v in stmt_vars(s) {
                    *need.entry(v).or_insert(0) |= 1;
                }
                Some(1)
            }
            _ => {
                for v in stmt_vars(s) {
                    need.insert(v, all);
                }
                None
            }
        };
        out[i] = narrow;
    }
    out
}

/// The lanes `0..n` that cover `mask`.
pub(super) fn lanes_covering(mask: u128) -> u32 {
    128 - mask.leading_zeros()
}

impl<'a, 'ctx> Cg<'a, 'ctx> {
    pub(super) fn region(&mut self, lane: Var, count: u32, body: &'a [Stmt]) -> R<()> {
        if count == 0 {
            return fail("a `Lanes` region of 0 lanes");
        }
        self.region = Some(count);
        let n = self.ir.i64(count as u64);
        self.count_loop(n, &mut |cg, l| {
            cg.cur_lane = Some(l);
            let r = cg.store_var(lane, l.into());
            cg.cur_lane = None;
            r
        })?;
        for (s, m) in body.iter().zip(lane_masks(body, lane, count)) {
            if let Some(m) = m {
                self.lane_masks.insert(s as *const Stmt, m);
            }
        }
        let r = self.block(body);
        self.region = None;
        r
    }

    /// Runs `f` once per lane with `cur_lane` set: for lanes `0..lanes` where given, else for
    /// every lane of the region.
    fn lane_loop(&mut self, lanes: Option<u32>, f: &mut dyn FnMut(&mut Cg<'a, 'ctx>) -> R<()>) -> R<()> {
        let Some(count) = self.region else { return fail("lane loop outside a `Lanes` region") };
        let n = self.ir.i64(lanes.unwrap_or(count).min(count) as u64);
        self.count_loop(n, &mut |cg, l| {
            cg.cur_lane = Some(l);
            let r = f(cg);
            cg.cur_lane = None;
            r
        })
    }

    /// Evaluates a uniform expression as lane 0 sees it.
    fn uniform(&mut self, e: &'a Expr) -> R<inkwell::values::IntValue<'ctx>> {
        if expr_has_shuffle(e) {
            return fail("a shuffle in a loop bound or branch condition");
        }
        self.cur_lane = Some(self.ir.i64(0));
        let v = self.expr(e);
        self.cur_lane = None;
        Ok(v?.v.into_int_value())
    }

    pub(super) fn region_stmt(&mut self, s: &'a Stmt) -> R<()> {
        // The lanes whose results are read later (`lane_masks`), for a top-level statement.
        let mask = self.lane_masks.get(&(s as *const Stmt)).copied();
        let lanes = mask.map(lanes_covering);
        if !stmt_has_shuffle(s) {
            return self.lane_loop(lanes, &mut |cg| cg.stmt(s));
        }
        match s {
            Stmt::For { var, start, end, step, body } => {
                let ty = self.var_ty(*var)?;
                let (s0, e0, st) = (self.uniform(start)?, self.uniform(end)?, self.uniform(step)?);
                self.for_loop(ty, s0, e0, st, &mut |cg, i| {
                    cg.store_var(*var, i.into())?;
                    cg.block(body)
                })
            }
            Stmt::If { cond, then_body, else_body } => {
                let c = self.uniform(cond)?;
                self.if_else(c, then_body, else_body)
            }
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } | Stmt::LetRows { value, .. } => {
                self.precompute_shuffles(&[value], mask)?;
                let r = self.lane_loop(lanes, &mut |cg| cg.stmt(s));
                self.shuffles.clear();
                r
            }
            Stmt::Check { cond, .. } => {
                self.precompute_shuffles(&[cond], None)?;
                let r = self.lane_loop(None, &mut |cg| cg.stmt(s));
                self.shuffles.clear();
                r
            }
            Stmt::Store { index, value, .. } => {
                self.precompute_shuffles(&[index, value], None)?;
                let r = self.lane_loop(None, &mut |cg| cg.stmt(s));
                self.shuffles.clear();
                r
            }
            Stmt::ParFor { .. } => fail("a shuffle inside a `ParFor` inside a `Lanes` region"),
            Stmt::Lanes { .. } => fail("a `Lanes` region inside another `Lanes` region"),
            Stmt::Barrier => Ok(()),
            Stmt::MmaI8(_) => fail("a matrix step inside a `Lanes` region"),
        }
    }

    /// For every shuffle in `exprs` (inner first), stores its operand for every lane, or, for
    /// a statement whose results only the lanes in `mask` need, for the lanes those read.
    fn precompute_shuffles(&mut self, exprs: &[&'a Expr], mask: Option<u128>) -> R<()> {
        let Some(count) = self.region else { return fail("shuffle outside a `Lanes` region") };
        let mut nodes = Vec::new();
        for e in exprs {
            shuffles_post_order(e, &mut nodes);
        }
        for node in nodes {
            let Expr::ShuffleXor { value, mask: m } = node else { continue };
            let ty = self.expr_ty(value)?;
            let t = super::reg_ty(self.ir.cx, ty);
            let tmp = self.alloca_zeroed(inkwell::types::BasicType::array_type(&t, count).into(), "shuffle")?;
            // The partners of the needed lanes (a narrowed statement's shuffles are not nested).
            let lanes = mask.map(|l| lanes_covering(l | xor_lanes(l, *m, count)));
            self.lane_loop(lanes, &mut |cg| {
                let v = cg.expr(value)?;
                let l = cg.cur_lane.unwrap_or(cg.ir.i64(0));
                let p = cg.lane_ptr(tmp, t, count, l)?;
                cg.ir.b.build_store(p, v.v)?;
                Ok(())
            })?;
            self.shuffles.insert(node as *const Expr, tmp);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{lane_masks, lanes_covering};
    use crate::ir::Stmt;

    /// The top-level statements of the first `Lanes` region of `k` expanded (as `Debug` text),
    /// with the lanes each must run.
    fn first_region(k: &crate::ir::Kernel) -> (Vec<String>, Vec<Option<u128>>) {
        let e = crate::mathlib::expand_calls(&crate::lanes::expand(k).unwrap());
        fn find(b: &[Stmt]) -> Option<&Stmt> {
            b.iter().find_map(|s| match s {
                Stmt::Lanes { .. } => Some(s),
                Stmt::For { body, .. } | Stmt::ParFor { body, .. } => find(body),
                _ => None,
            })
        }
        let Some(Stmt::Lanes { lane, count, body, .. }) = find(&e.body) else { panic!("{}: no lanes region", k.name) };
        (body.iter().map(|s| format!("{s:?}")).collect(), lane_masks(body, *lane, *count))
    }

    #[test]
    fn a_butterfly_only_computes_the_lanes_its_total_reads() {
        let (text, masks) = first_region(&crate::testkernels::matvec());
        let n = text.len();
        assert!(n >= 7, "{text:#?}");
        // The per-lane accumulation reads memory: every lane. Then the five butterfly steps
        // (masks 16, 8, 4, 2, 1) for the lanes below 16, 8, 4, 2 and 1, and the lane-0 copy.
        let tail: Vec<Option<u32>> = masks[n - 6..].iter().map(|m| m.map(lanes_covering)).collect();
        assert_eq!(tail, [Some(16), Some(8), Some(4), Some(2), Some(1), Some(1)], "{text:#?}");
        assert!(text[n - 6].contains("ShuffleXor") && text[n - 1].starts_with("If"), "{text:#?}");
        assert!(masks[..n - 6].iter().all(|m| m.is_none_or(|m| lanes_covering(m) == 32)), "{text:#?}");
        assert_eq!(masks[n - 7], None, "the accumulation loads: {text:#?}");
        // The masks are exact: step 16 needs lanes 0..16, and its operands lanes 0..32.
        assert_eq!(masks[n - 6], Some((1u128 << 16) - 1));
    }

    #[test]
    fn a_region_that_stores_or_loads_runs_every_lane() {
        // softmax's regions load and store per lane: nothing there may be narrowed but the
        // butterfly steps of its reductions.
        let (text, masks) = first_region(&crate::testkernels::softmax());
        for (t, m) in text.iter().zip(&masks) {
            if t.contains("Load {") || t.starts_with("Store") || t.starts_with("For") {
                assert_eq!(*m, None, "{t}");
            }
        }
    }
}
