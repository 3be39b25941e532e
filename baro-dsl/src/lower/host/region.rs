//! `Lanes` regions on the host: lanes run in lockstep, one statement at a time.
//!
//! A statement with no shuffle (at any depth) runs as `for lane in 0..count { stmt }`. A
//! `For`/`If` containing a shuffle has uniform bounds/condition (evaluated as lane 0 sees
//! them) and runs once, its body handled by the same rule. A `Let`/`Assign`/`Store` whose
//! expressions contain `ShuffleXor { value, mask }` first evaluates `value` for every lane
//! into a temporary array, then computes each lane's result reading `tmp[lane ^ mask]`.
//! This module must never let one lane observe another lane's update of the same statement.

use super::Cg;
use crate::ir::{Expr, Stmt, Var};
use crate::lower::expr::ExprLeaves;
use crate::lower::{fail, R};

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
        let r = self.block(body);
        self.region = None;
        r
    }

    /// Runs `f` once per lane with `cur_lane` set.
    fn lane_loop(&mut self, f: &mut dyn FnMut(&mut Cg<'a, 'ctx>) -> R<()>) -> R<()> {
        let Some(count) = self.region else { return fail("lane loop outside a `Lanes` region") };
        let n = self.ir.i64(count as u64);
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
        if !stmt_has_shuffle(s) {
            return self.lane_loop(&mut |cg| cg.stmt(s));
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
                self.precompute_shuffles(&[value])?;
                let r = self.lane_loop(&mut |cg| cg.stmt(s));
                self.shuffles.clear();
                r
            }
            Stmt::Check { cond, .. } => {
                self.precompute_shuffles(&[cond])?;
                let r = self.lane_loop(&mut |cg| cg.stmt(s));
                self.shuffles.clear();
                r
            }
            Stmt::Store { index, value, .. } => {
                self.precompute_shuffles(&[index, value])?;
                let r = self.lane_loop(&mut |cg| cg.stmt(s));
                self.shuffles.clear();
                r
            }
            Stmt::ParFor { .. } => fail("a shuffle inside a `ParFor` inside a `Lanes` region"),
            Stmt::Lanes { .. } => fail("a `Lanes` region inside another `Lanes` region"),
            Stmt::Barrier => Ok(()),
            Stmt::MmaI8(_) => fail("a matrix step inside a `Lanes` region"),
        }
    }

    /// For every shuffle in `exprs` (inner first), stores its operand for every lane.
    fn precompute_shuffles(&mut self, exprs: &[&'a Expr]) -> R<()> {
        let Some(count) = self.region else { return fail("shuffle outside a `Lanes` region") };
        let mut nodes = Vec::new();
        for e in exprs {
            shuffles_post_order(e, &mut nodes);
        }
        for node in nodes {
            let Expr::ShuffleXor { value, .. } = node else { continue };
            let ty = self.expr_ty(value)?;
            let t = super::reg_ty(self.ir.cx, ty);
            let tmp = self.alloca_zeroed(inkwell::types::BasicType::array_type(&t, count).into(), "shuffle")?;
            self.lane_loop(&mut |cg| {
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
