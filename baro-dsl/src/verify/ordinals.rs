//! Source-order numbering of a kernel's reductions and stores (the ordinals `Location`
//! reports), shared by every verifier pass so they all count the same way.
//!
//! Pre-order: statements in order, a statement's expressions before its nested blocks,
//! sub-expressions left to right, an outer reduction before the ones inside it. The claim a
//! `Lanes` region `implements` is not code and is never counted.

use crate::ir::{Expr, Kernel, Reduce, Stmt};
use std::collections::HashMap;

/// Calls `f` on every expression of `s` itself (not of its nested blocks), in order.
pub fn stmt_exprs<'a>(s: &'a Stmt, mut f: impl FnMut(&'a Expr)) {
    match s {
        Stmt::Let { value, .. } | Stmt::Assign { value, .. } | Stmt::LetRows { value, .. } => f(value),
        Stmt::Store { index, value, .. } => {
            f(index);
            f(value)
        }
        Stmt::For { start, end, step, .. } => {
            f(start);
            f(end);
            f(step)
        }
        Stmt::If { cond, .. } | Stmt::Check { cond, .. } => f(cond),
        Stmt::ParFor { end, .. } => f(end),
        Stmt::MmaI8(m) => m.exprs().into_iter().for_each(f),
        Stmt::Lanes { .. } | Stmt::Barrier => {}
    }
}

/// The nested blocks of `s`, in order (`then` before `else`).
pub fn stmt_blocks(s: &Stmt) -> Vec<&Vec<Stmt>> {
    match s {
        Stmt::For { body, .. } | Stmt::ParFor { body, .. } | Stmt::Lanes { body, .. } => vec![body],
        Stmt::If { then_body, else_body, .. } => vec![then_body, else_body],
        _ => Vec::new(),
    }
}

/// The direct sub-expressions of `e`, left to right (`for_each_child` with lifetimes kept).
pub fn children(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_) => Vec::new(),
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
    }
}

fn expr_reduces<'a>(e: &'a Expr, out: &mut Vec<&'a Reduce>) {
    if let Expr::Reduce(r) = e {
        out.push(r);
    }
    for c in children(e) {
        expr_reduces(c, out);
    }
}

fn block_walk<'a>(b: &'a [Stmt], reduces: &mut Vec<&'a Reduce>, stores: &mut Vec<&'a Stmt>) {
    for s in b {
        if matches!(s, Stmt::Store { .. }) {
            stores.push(s);
        }
        stmt_exprs(s, |e| expr_reduces(e, reduces));
        for blk in stmt_blocks(s) {
            block_walk(blk, reduces, stores);
        }
    }
}

/// Every reduction of `k` in pre-order.
pub fn reduces(k: &Kernel) -> Vec<&Reduce> {
    let (mut r, mut s) = (Vec::new(), Vec::new());
    block_walk(&k.body, &mut r, &mut s);
    r
}

/// Ordinals of reductions and stores, keyed by address inside `k` (valid while `k` is borrowed).
pub struct Ordinals {
    pub reduce: HashMap<*const Reduce, u32>,
    pub store: HashMap<*const Stmt, u32>,
}

impl Ordinals {
    pub fn of(k: &Kernel) -> Ordinals {
        let (mut r, mut s) = (Vec::new(), Vec::new());
        block_walk(&k.body, &mut r, &mut s);
        Ordinals {
            reduce: r.into_iter().enumerate().map(|(i, x)| (x as *const Reduce, i as u32)).collect(),
            store: s.into_iter().enumerate().map(|(i, x)| (x as *const Stmt, i as u32)).collect(),
        }
    }
}
