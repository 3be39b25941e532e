//! Loop versioning of bounds checks. For an innermost loop whose buffer accesses include some
//! with an index affine in the loop variable (`a + c·i`, `a` invariant in the loop, `c` a
//! constant), the first and last index of each such access are checked against its buffer once
//! before the loop; when every one is in range for every iteration, a copy of the loop runs in
//! which those accesses carry no check, and otherwise the loop as always (every access checked).
//!
//! Nothing observable changes: in the unchecked copy no versioned access could have failed, so
//! its loads read the same elements, its stores write the same ones, and the thread's failure
//! record (kept only by the other, still checked accesses) is the one the checked loop makes.
//! Only loops without barriers, shuffles or inner loops are versioned: the two copies may be
//! taken by different lanes (the check can depend on the lane), and code grows at most 2×.
//!
//! Why two indices suffice: with `i` running over `first..=last` (a subset, stepped), the index
//! is `(a + c·i) mod 2^64`. When `c·last` does not overflow, the true values `a + c·i` increase
//! with `i` and span less than 2^64, so the wrapped values are all within `[v(first), v(last)]`
//! exactly when `v(first) <= v(last)` (a wrap between the two ends makes `v(last) < v(first)`).
//! So: `c·last` fits, `v(first) <= v(last)`, and `v(last) < len` (unsigned, as every check).

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
}

/// `buf[index]` with `index ≡ a + coef·var (mod 2^64)`.
struct Affine<'a> {
    buf: Buf,
    index: &'a Expr,
    coef: u64,
}

impl<'a> Plan<'a> {
    /// The plan for `for var in … { body }` over a loop variable of type `ty`, or `None` when
    /// the loop is not versioned (no affine access, not innermost, or a barrier or shuffle in it).
    pub(super) fn new(var: Var, ty: ScalarType, body: &'a [Stmt]) -> Option<Plan<'a>> {
        if ty != ScalarType::U64 {
            return None;
        }
        let mut varying = HashSet::from([var]);
        if !simple_body(body, &mut varying) {
            return None;
        }
        let mut accesses = Vec::new();
        for s in body {
            collect_stmt(s, var, &varying, &mut accesses);
        }
        if accesses.is_empty() {
            return None;
        }
        Some(Plan { var, accesses })
    }

    /// The index expressions the versioned copy does not check (by node identity).
    pub(super) fn unchecked(&self) -> impl Iterator<Item = *const Expr> + '_ {
        self.accesses.iter().map(|a| a.index as *const Expr)
    }

    #[cfg(test)]
    fn coefs(&self) -> Vec<u64> {
        self.accesses.iter().map(|a| a.coef).collect()
    }
}

/// True when `body` has no loop, lane region, barrier or shuffle; adds every variable it
/// defines or assigns to `varying`, those bound by an expression's `let` included (such a
/// variable may stand for a value of the loop variable inside an index).
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
        Stmt::If { cond, then_body, else_body } => plain(cond, varying) && simple_body(then_body, varying) && simple_body(else_body, varying),
        Stmt::For { .. } | Stmt::ParFor { .. } | Stmt::Lanes { .. } | Stmt::Barrier => false,
    })
}

fn let_vars(e: &Expr, out: &mut HashSet<Var>) {
    if let Expr::Let { var, .. } = e {
        out.insert(*var);
    }
    e.for_each_child(|c| let_vars(c, out));
}

fn collect_stmt<'a>(s: &'a Stmt, var: Var, varying: &HashSet<Var>, out: &mut Vec<Affine<'a>>) {
    match s {
        Stmt::Let { value, .. } | Stmt::Assign { value, .. } => collect_expr(value, var, varying, out),
        Stmt::Store { buf, index, value } => {
            collect_expr(index, var, varying, out);
            collect_expr(value, var, varying, out);
            if let Some(coef) = affine(index, var, varying) {
                out.push(Affine { buf: *buf, index, coef });
            }
        }
        Stmt::If { cond, then_body, else_body } => {
            collect_expr(cond, var, varying, out);
            for s in then_body.iter().chain(else_body) {
                collect_stmt(s, var, varying, out);
            }
        }
        Stmt::For { .. } | Stmt::ParFor { .. } | Stmt::Lanes { .. } | Stmt::Barrier => {}
    }
}

fn collect_expr<'a>(e: &'a Expr, var: Var, varying: &HashSet<Var>, out: &mut Vec<Affine<'a>>) {
    if let Expr::Load { buf, index } = e {
        if let Some(coef) = affine(index, var, varying) {
            out.push(Affine { buf: *buf, index, coef });
        }
    }
    // `for_each_child` takes a closure over `&Expr` of the child's own lifetime; walk by hand
    // so the collected references live as long as the kernel.
    match e {
        Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_) => {}
        Expr::Load { index, .. } => collect_expr(index, var, varying, out),
        Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Call { arg, .. } => collect_expr(arg, var, varying, out),
        Expr::Binary { lhs, rhs, .. } => {
            collect_expr(lhs, var, varying, out);
            collect_expr(rhs, var, varying, out);
        }
        Expr::Select { cond, then, els } => {
            collect_expr(cond, var, varying, out);
            collect_expr(then, var, varying, out);
            collect_expr(els, var, varying, out);
        }
        Expr::Let { value, body, .. } => {
            collect_expr(value, var, varying, out);
            collect_expr(body, var, varying, out);
        }
        Expr::Reduce(_) | Expr::ShuffleXor { .. } => {}
    }
}

/// `Some(c)` when `e ≡ a + c·var (mod 2^64)` for every value of `var`, with `a` invariant in
/// the loop (no load, no variable of `varying` but `var` itself as the linear term) and `c` an
/// exact (non-wrapping) constant.
fn affine(e: &Expr, var: Var, varying: &HashSet<Var>) -> Option<u64> {
    match e {
        Expr::Var(v) if *v == var => Some(1),
        _ if invariant(e, varying) => Some(0),
        Expr::Binary { op: BinOp::Add, lhs, rhs } => affine(lhs, var, varying)?.checked_add(affine(rhs, var, varying)?),
        Expr::Binary { op: BinOp::Sub, lhs, rhs } if invariant(rhs, varying) => affine(lhs, var, varying),
        Expr::Binary { op: BinOp::Mul, lhs, rhs } => match (&**lhs, &**rhs) {
            (Expr::Const(k), x) | (x, Expr::Const(k)) if k.ty == ScalarType::U64 => affine(x, var, varying)?.checked_mul(k.bits),
            _ => None,
        },
        _ => None,
    }
}

/// A value the loop cannot change and the preheader can compute without side effects: no
/// load (its own check could fail where the loop would not have run it), no shuffle, and no
/// variable the body defines or assigns (nor the loop variable).
fn invariant(e: &Expr, varying: &HashSet<Var>) -> bool {
    !e.any(&|x| match x {
        Expr::Var(v) => varying.contains(v),
        Expr::Load { .. } | Expr::ShuffleXor { .. } | Expr::Reduce(_) | Expr::Call { .. } => true,
        _ => false,
    })
}

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    /// True (i1) when every access of `plan` is in range for the loop variable at `first` and
    /// at `last` (and so, by the module's argument, at every iteration between).
    pub(super) fn in_range_throughout(&mut self, plan: &Plan<'a>, first: IntValue<'ctx>, last: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        let mut ok = self.ir.cx.bool_type().const_int(1, false);
        for a in &plan.accesses {
            let (_, len, _, _) = self.access(a.buf, false)?;
            let at = |g: &mut Self, i: IntValue<'ctx>| -> R<IntValue<'ctx>> {
                let old = g.lets.insert(plan.var, i.into());
                let r = g.index(a.index);
                match old {
                    Some(o) => g.lets.insert(plan.var, o),
                    None => g.lets.remove(&plan.var),
                };
                Ok(r?.0)
            };
            let (lo, hi) = (at(self, first)?, at(self, last)?);
            let mut fits = self.ir.and(self.ir.icmp(P::ULE, lo, hi)?, self.ir.icmp(P::ULT, hi, len)?)?;
            if a.coef > 1 {
                fits = self.ir.and(fits, self.ir.icmp(P::ULE, last, self.ir.i64(u64::MAX / a.coef))?)?;
            }
            ok = self.ir.and(ok, fits)?;
        }
        Ok(ok)
    }
}

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
        let body = vec![acc(load(add(mul(v(1), Expr::index(144)), v(0)))), acc(load(add(v(1), mul(v(0), Expr::index(32)))))];
        let plan = Plan::new(Var(0), ScalarType::U64, &body).expect("two affine loads");
        assert_eq!(plan.coefs(), vec![1, 32]);
    }

    #[test]
    fn non_affine_or_varying_indices_are_not() {
        let cases = [
            mul(add(v(1), v(0)), v(1)),                                 // i times a variable
            Expr::bin(BinOp::Div, v(0), Expr::index(8)),                 // i / 8
            add(load(v(1)), v(0)),                                      // a load in the invariant part
            add(v(9), v(0)),                                            // a variable the body assigns
            Expr::bin(BinOp::Sub, v(1), v(0)),                           // a negative coefficient
            mul(v(0), Expr::index(u64::MAX)),                            // the largest coefficient
        ];
        for (n, index) in cases.into_iter().enumerate() {
            let body = vec![acc(load(index))];
            let coefs = Plan::new(Var(0), ScalarType::U64, &body).map(|p| p.coefs());
            let expected = match n {
                2 => Some(vec![0]),        // only the inner load `x[v1]`, not `x[x[v1] + i]`
                5 => Some(vec![u64::MAX]), // kept: its trip bound is checked at run time
                _ => None,
            };
            assert_eq!(coefs, expected, "case {n}");
        }
        let overflow = vec![acc(load(mul(mul(v(0), Expr::index(u64::MAX)), Expr::index(2))))];
        assert!(Plan::new(Var(0), ScalarType::U64, &overflow).is_none(), "a coefficient that wraps");
    }

    #[test]
    fn loops_with_inner_loops_barriers_shuffles_or_narrow_counters_are_not_versioned() {
        let affine_load = || acc(load(v(0)));
        let inner = Stmt::For { var: Var(5), start: Expr::index(0), end: Expr::index(4), step: Expr::index(1), body: vec![] };
        let shuffle = acc(Expr::ShuffleXor { value: Box::new(Expr::f32(1.0)), mask: 1 });
        for (n, extra) in [inner, Stmt::Barrier, shuffle].into_iter().enumerate() {
            let body = vec![affine_load(), extra];
            assert!(Plan::new(Var(0), ScalarType::U64, &body).is_none(), "case {n} was versioned");
        }
        assert!(Plan::new(Var(0), ScalarType::U32, &[affine_load()]).is_none());
        assert!(Plan::new(Var(0), ScalarType::U64, &[affine_load()]).is_some());
    }

    #[test]
    fn a_let_bound_variable_is_never_taken_for_an_invariant() {
        // `let t = i * 2 in x[t + 1]`: t stands for a value of the loop variable.
        let e = Expr::let_in(Var(3), mul(v(0), Expr::index(2)), load(add(v(3), Expr::index(1))));
        assert!(Plan::new(Var(0), ScalarType::U64, &[acc(e)]).is_none());
    }
}
