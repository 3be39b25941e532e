//! Which integer scalar parameters feed each reduction's length, and through which constant
//! divisor: the facts `shapes` needs to pick lengths that are not empty, and `coverage` needs
//! to name the parameter a user should list in `verify(...)`.
//!
//! A parameter feeds a length when it occurs in the length expression, or in the value of a
//! variable the expression reads (`Stmt::Let`/`Assign`, `Expr::Let`, a loop's bounds, an
//! enclosing reduction's length), followed transitively wherever the variable is defined.
//! Along the path, `div(e, c)` and `shr(e, s)` by constants multiply the divisor `e` sees by
//! `c` (or `2^s`); `mul(e, c)` and `shl(e, s)` divide it back by their common factor with
//! `c`; other integer operations pass it through unchanged. Loaded values are not followed (a
//! length that depends on data cannot be executed anyway). This module reads IR only.

use super::ordinals::{children, stmt_blocks};
use crate::ir::{BinOp, Expr, Kernel, ParamId, Stmt, Var};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Largest divisor tracked: beyond it the scaled values would make shapes too slow to execute.
pub const MAX_DIVISOR: u64 = 1 << 12;

/// Parameter → the divisors through which it reaches a length (1 = directly).
pub type Feeds = BTreeMap<ParamId, BTreeSet<u64>>;

/// Every expression that gives some variable its value, by variable.
pub struct Definitions<'a> {
    defs: HashMap<Var, Vec<&'a Expr>>,
}

impl<'a> Definitions<'a> {
    pub fn of(k: &'a Kernel) -> Definitions<'a> {
        let mut d = Definitions { defs: HashMap::new() };
        d.block(&k.body);
        d
    }

    /// The expressions that give `v` a value (a loop variable: its bounds).
    pub fn of_var(&self, v: Var) -> &[&'a Expr] {
        self.defs.get(&v).map_or(&[], Vec::as_slice)
    }

    fn add(&mut self, v: Var, e: &'a Expr) {
        self.defs.entry(v).or_default().push(e);
    }

    fn block(&mut self, b: &'a [Stmt]) {
        for s in b {
            match s {
                Stmt::Let { var, value } | Stmt::Assign { var, value } => {
                    self.add(*var, value);
                    self.expr(value);
                }
                Stmt::LetRows { vars, value, .. } => {
                    for v in vars {
                        self.add(*v, value);
                    }
                    self.expr(value);
                }
                Stmt::Store { index, value, .. } => {
                    self.expr(index);
                    self.expr(value);
                }
                Stmt::For { var, start, end, step, .. } => {
                    self.add(*var, start);
                    self.add(*var, end);
                    self.expr(start);
                    self.expr(end);
                    self.expr(step);
                }
                Stmt::If { cond, .. } | Stmt::Check { cond, .. } => self.expr(cond),
                Stmt::ParFor { var, end, .. } => {
                    self.add(*var, end);
                    self.expr(end);
                }
                Stmt::Lanes { implements, .. } => {
                    if let Some(imp) = implements {
                        self.add(imp.reduce.var, &imp.reduce.len);
                        self.expr(&imp.reduce.len);
                    }
                }
                Stmt::MmaI8(m) => m.exprs().into_iter().for_each(|e| self.expr(e)),
                Stmt::Barrier => {}
            }
            for blk in stmt_blocks(s) {
                self.block(blk);
            }
        }
    }

    fn expr(&mut self, e: &'a Expr) {
        match e {
            Expr::Let { var, value, .. } => self.add(*var, value),
            Expr::Reduce(r) => self.add(r.var, &r.len),
            _ => {}
        }
        for c in children(e) {
            self.expr(c);
        }
    }
}

fn positive_const(e: &Expr) -> Option<u64> {
    match e {
        Expr::Const(c) if c.ty.is_int() && !(c.ty.is_signed() && c.as_i64() < 0) && c.bits > 0 => Some(c.bits),
        _ => None,
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// What a walk over a length found.
#[derive(Default)]
struct Walk {
    feeds: Feeds,
    seen: HashSet<(Var, u64)>,
    /// Something other than constants reached the length (a parameter, a group id, data,
    /// a variable with no definition).
    varies: bool,
}

impl Walk {
    fn go(&mut self, defs: &Definitions, e: &Expr, d: u64) {
        match e {
            Expr::Const(_) => {}
            Expr::Param(p) => {
                self.varies = true;
                self.feeds.entry(*p).or_default().insert(d);
            }
            Expr::GroupId(_) | Expr::Load { .. } | Expr::ShuffleXor { .. } => self.varies = true,
            Expr::Var(v) => {
                if !self.seen.insert((*v, d)) {
                    return;
                }
                match defs.defs.get(v) {
                    Some(values) => {
                        for x in values {
                            self.go(defs, x, d);
                        }
                    }
                    None => self.varies = true,
                }
            }
            Expr::Binary { op, lhs, rhs } => {
                let (c, s) = (positive_const(rhs), positive_const(lhs));
                match (op, c, s) {
                    (BinOp::Div, Some(c), _) => self.go(defs, lhs, d.saturating_mul(c).min(MAX_DIVISOR)),
                    (BinOp::Shr, Some(c), _) if c < 32 => self.go(defs, lhs, d.saturating_mul(1 << c).min(MAX_DIVISOR)),
                    (BinOp::Mul, Some(c), _) => self.go(defs, lhs, d / gcd(d, c)),
                    (BinOp::Mul, None, Some(c)) => self.go(defs, rhs, d / gcd(d, c)),
                    (BinOp::Shl, Some(c), _) if c < 32 => self.go(defs, lhs, d / gcd(d, 1 << c)),
                    _ => {
                        self.go(defs, lhs, d);
                        self.go(defs, rhs, d);
                    }
                }
            }
            _ => {
                for c in children(e) {
                    self.go(defs, c, d);
                }
            }
        }
    }
}

/// The parameters feeding `len` and their divisors, and whether `len` is a constant (no
/// parameter, group id, data or undefined variable reaches it).
pub fn feeds(defs: &Definitions, len: &Expr) -> (Feeds, bool) {
    let mut w = Walk::default();
    w.go(defs, len, 1);
    (w.feeds, !w.varies)
}

/// Merges `b` into `a`.
pub fn merge(a: &mut Feeds, b: Feeds) {
    for (p, ds) in b {
        a.entry(p).or_default().extend(ds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Access, ParamKind, ScalarType};

    #[test]
    fn divisors_follow_lets_and_constant_arithmetic() {
        let mut k = Kernel::new("t");
        k.add_param("x", ParamKind::Buffer { elem: ScalarType::F32, access: Access::Read });
        let p = k.add_param("k", ParamKind::Scalar(ScalarType::INDEX));
        let q = k.add_param("m", ParamKind::Scalar(ScalarType::INDEX));
        let (a, b) = (k.add_var("a", ScalarType::INDEX, false), k.add_var("b", ScalarType::INDEX, false));
        let div = |e, c| Expr::bin(BinOp::Div, e, Expr::index(c));
        k.body = vec![
            Stmt::Let { var: a, value: div(Expr::Param(p), 4) },
            Stmt::Let {
                var: b,
                value: Expr::bin(
                    BinOp::Add,
                    div(Expr::bin(BinOp::Mul, Expr::Var(a), Expr::index(2)), 8),
                    Expr::Param(q),
                ),
            },
        ];
        let defs = Definitions::of(&k);
        let (f, constant) = feeds(&defs, &Expr::Var(b));
        assert!(!constant);
        assert_eq!(f.get(&p), Some(&BTreeSet::from([16])));
        assert_eq!(f.get(&q), Some(&BTreeSet::from([1])));
        let (f, constant) = feeds(&defs, &div(Expr::index(64), 2));
        assert!(constant && f.is_empty());
    }
}
