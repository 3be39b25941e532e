//! Value ranges of integer expressions, and the proof an order-free integer sum needs: that
//! no partial sum, whatever the order, leaves the sum's type.
//!
//! A range is an interval `[lo, hi]` derived from the IR alone: a load or a parameter spans
//! its type (an `i8` load `[-128, 127]`), a constant is itself, `+ - *` and `dot4_*` follow
//! interval arithmetic, and any operation whose exact result might leave its type (it would
//! wrap) spans the whole type. A variable spans the union of everything that defines it (a
//! loop variable `[start, end]`). Sound, not tight: a range may be wider than the values,
//! never narrower. This module reads IR only.

use super::ordinals::stmt_blocks;
use crate::ir::{BinOp, Dot4Kind, Expr, Kernel, ParamKind, Reduce, ReduceOp, ScalarType, Stmt, UnOp, Var};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// The closed interval `[lo, hi]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub lo: i128,
    pub hi: i128,
}

impl Range {
    pub fn new(lo: i128, hi: i128) -> Range {
        Range { lo, hi }
    }

    /// Every value of `t` (bool `[0, 1]`; a float has no integer range: the whole i64 span,
    /// which no sum bound accepts).
    pub fn of_type(t: ScalarType) -> Range {
        match t {
            ScalarType::Bool => Range::new(0, 1),
            t if t.is_int() && t.is_signed() => Range::new(-(1i128 << (t.bits() - 1)), (1i128 << (t.bits() - 1)) - 1),
            t if t.is_int() => Range::new(0, (1i128 << t.bits()) - 1),
            _ => Range::new(i64::MIN as i128, i64::MAX as i128),
        }
    }

    fn union(self, o: Range) -> Range {
        Range::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }

    fn within(self, o: Range) -> bool {
        o.lo <= self.lo && self.hi <= o.hi
    }

    /// `self`, if every value fits `t`; else all of `t` (the operation would wrap).
    fn fit(self, t: ScalarType) -> Range {
        let full = Range::of_type(t);
        if self.within(full) {
            self
        } else {
            full
        }
    }

    fn corners(a: Range, b: Range, f: impl Fn(i128, i128) -> i128) -> Range {
        let v = [f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)];
        Range::new(*v.iter().min().unwrap_or(&0), *v.iter().max().unwrap_or(&0))
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.lo, self.hi)
    }
}

/// What defines a variable: a value, or the bounds of the loop it counts.
#[derive(Clone, Copy)]
enum Def<'a> {
    Value(&'a Expr),
    /// `for v in start..end` (`start` `None`: a `par` loop, from 0).
    Loop {
        start: Option<&'a Expr>,
        end: &'a Expr,
    },
}

/// Ranges over one kernel: its variables' definitions, read once.
pub struct Ranges<'a> {
    k: &'a Kernel,
    defs: HashMap<Var, Vec<Def<'a>>>,
    /// `Expr::Let` and reduction variables in scope while walking an expression.
    scope: Vec<(Var, Range)>,
    /// Variables whose range is being computed (a cycle spans the whole type).
    active: HashSet<Var>,
}

impl<'a> Ranges<'a> {
    pub fn of(k: &'a Kernel) -> Ranges<'a> {
        let mut r = Ranges { k, defs: HashMap::new(), scope: Vec::new(), active: HashSet::new() };
        r.block(&k.body);
        r
    }

    fn block(&mut self, b: &'a [Stmt]) {
        for s in b {
            match s {
                Stmt::Let { var, value } | Stmt::Assign { var, value } => {
                    self.defs.entry(*var).or_default().push(Def::Value(value))
                }
                Stmt::For { var, start, end, .. } => {
                    self.defs.entry(*var).or_default().push(Def::Loop { start: Some(start), end })
                }
                Stmt::ParFor { var, end, .. } => {
                    self.defs.entry(*var).or_default().push(Def::Loop { start: None, end })
                }
                _ => {}
            }
            for blk in stmt_blocks(s) {
                self.block(blk);
            }
        }
    }

    fn ty(&self, e: &Expr) -> ScalarType {
        self.k.type_of(e).unwrap_or(ScalarType::I64)
    }

    fn var(&mut self, v: Var) -> Range {
        let ty = self.k.vars.get(v.index()).map_or(ScalarType::I64, |d| d.ty);
        if let Some((_, r)) = self.scope.iter().rev().find(|(x, _)| *x == v) {
            return *r;
        }
        let full = Range::of_type(ty);
        let defs = match self.defs.get(&v) {
            Some(d) if !d.is_empty() => d.clone(),
            _ => return full,
        };
        if !self.active.insert(v) {
            return full;
        }
        let mut out: Option<Range> = None;
        for d in defs {
            let r = match d {
                Def::Value(e) => self.expr(e),
                Def::Loop { start, end } => {
                    let lo = match start {
                        Some(s) => self.expr(s).lo,
                        None => 0,
                    };
                    Range::new(lo, self.expr(end).hi)
                }
            };
            out = Some(out.map_or(r, |o| o.union(r)));
        }
        self.active.remove(&v);
        out.map_or(full, |r| r.fit(ty))
    }

    /// The range of an integer (or bool) expression.
    pub fn expr(&mut self, e: &Expr) -> Range {
        let ty = self.ty(e);
        let full = Range::of_type(ty);
        match e {
            Expr::Const(c) if c.ty.is_int() || c.ty == ScalarType::Bool => {
                let v = if c.ty.is_signed() { c.bits as i64 as i128 } else { c.bits as i128 };
                Range::new(v, v)
            }
            Expr::Var(v) => self.var(*v),
            Expr::Param(p) => match self.k.params.get(p.index()).map(|x| &x.kind) {
                Some(ParamKind::Scalar(t)) => Range::of_type(*t),
                _ => full,
            },
            Expr::Cast { to, arg } => {
                let from = self.ty(arg);
                if from.is_int() || from == ScalarType::Bool {
                    self.expr(arg).fit(*to)
                } else {
                    full
                }
            }
            Expr::Unary { op: UnOp::Neg, arg } => {
                let a = self.expr(arg);
                Range::new(-a.hi, -a.lo).fit(ty)
            }
            Expr::Unary { op: UnOp::Abs, arg } => {
                let a = self.expr(arg);
                let hi = a.lo.abs().max(a.hi.abs());
                let lo = if a.lo <= 0 && a.hi >= 0 { 0 } else { a.lo.abs().min(a.hi.abs()) };
                Range::new(lo, hi).fit(ty)
            }
            Expr::Binary { op, lhs, rhs } if ty.is_int() => {
                let (a, b) = (self.expr(lhs), self.expr(rhs));
                self.binary(*op, a, b, rhs, ty)
            }
            Expr::Binary { op, .. } if op.is_comparison() => Range::new(0, 1),
            Expr::Select { then, els, .. } => {
                let (a, b) = (self.expr(then), self.expr(els));
                a.union(b)
            }
            Expr::Let { var, value, body } => {
                let v = self.expr(value);
                self.scope.push((*var, v));
                let r = self.expr(body);
                self.scope.pop();
                r
            }
            Expr::Dot4 { kind, c, .. } => {
                let p = dot4_product(*kind);
                let acc = self.expr(c);
                Range::new(acc.lo + 4 * p.lo, acc.hi + 4 * p.hi).fit(ScalarType::I32)
            }
            // The result is its last partial sum, unless some partial wrapped.
            Expr::Reduce(r) if r.op == ReduceOp::Add && r.ty.is_int() => match self.sum_bound(r) {
                Ok(b) => b.partials.fit(r.ty),
                Err(_) => full,
            },
            Expr::Reduce(r) if matches!(r.op, ReduceOp::Max | ReduceOp::Min) && r.ty.is_int() => {
                let len = self.expr(&r.len);
                self.scope.push((r.var, Range::new(0, (len.hi - 1).max(0))));
                let x = self.expr(&r.body);
                self.scope.pop();
                // An empty reduction gives the identity (the type's extreme).
                if len.lo == 0 {
                    full
                } else {
                    x
                }
            }
            _ => full,
        }
    }

    fn binary(&mut self, op: BinOp, a: Range, b: Range, rhs: &Expr, ty: ScalarType) -> Range {
        let full = Range::of_type(ty);
        let sat = |x: i128, y: i128, f: fn(i128, i128) -> Option<i128>| {
            f(x, y).unwrap_or(if (x < 0) != (y < 0) { i128::MIN } else { i128::MAX })
        };
        let shift = |lw: &mut Self| -> Option<u32> {
            let s = lw.expr(rhs);
            (s.lo == s.hi && s.lo >= 0 && s.lo < ty.bits() as i128).then_some(s.lo as u32)
        };
        match op {
            BinOp::Add => Range::new(sat(a.lo, b.lo, i128::checked_add), sat(a.hi, b.hi, i128::checked_add)).fit(ty),
            BinOp::Sub => Range::new(sat(a.lo, -b.hi, i128::checked_add), sat(a.hi, -b.lo, i128::checked_add)).fit(ty),
            BinOp::Mul => Range::corners(a, b, |x, y| sat(x, y, i128::checked_mul)).fit(ty),
            BinOp::Min => Range::new(a.lo.min(b.lo), a.hi.min(b.hi)),
            BinOp::Max => Range::new(a.lo.max(b.lo), a.hi.max(b.hi)),
            // Division truncates toward zero: by a positive divisor it is monotone in `a`.
            BinOp::Div if b.lo > 0 => Range::corners(a, b, |x, y| x / y),
            BinOp::Rem if b.lo > 0 && a.lo >= 0 => Range::new(0, a.hi.min(b.hi - 1)),
            BinOp::Rem if b.lo > 0 => Range::new(-(b.hi - 1), b.hi - 1),
            BinOp::And if a.lo >= 0 && b.lo >= 0 => Range::new(0, a.hi.min(b.hi)),
            BinOp::And if a.lo >= 0 => Range::new(0, a.hi),
            BinOp::And if b.lo >= 0 => Range::new(0, b.hi),
            BinOp::Shr => match shift(self) {
                Some(s) if a.lo >= 0 || ty.is_signed() => Range::new(a.lo >> s, a.hi >> s),
                _ => full,
            },
            BinOp::Shl => match shift(self) {
                Some(s) => {
                    Range::new(sat(a.lo, 1 << s, i128::checked_mul), sat(a.hi, 1 << s, i128::checked_mul)).fit(ty)
                }
                None => full,
            },
            _ => full,
        }
    }

    /// The bound an order-free sum needs: its length's and elements' ranges, and the
    /// range every partial sum lies in, or what could not be bounded.
    pub fn sum_bound(&mut self, r: &Reduce) -> Result<SumBound, Unbounded> {
        let len = self.expr(&r.len);
        if len.hi >= i64::MAX as i128 {
            return Err(Unbounded::Length { len: self.k.expr_text(&r.len) });
        }
        let max_len = len.hi.max(0);
        self.scope.push((r.var, Range::new(0, (max_len - 1).max(0))));
        let elem = self.expr(&r.body);
        self.scope.pop();
        // Any partial sum adds at most `max_len` elements; negative ones pull it down, positive
        // ones up, so it lies between these two (0 for the empty sum).
        let partials = Range::new(max_len.saturating_mul(elem.lo.min(0)), max_len.saturating_mul(elem.hi.max(0)));
        Ok(SumBound { max_len, elem, partials })
    }
}

/// The range of one byte product of a `dot4`.
pub fn dot4_product(kind: Dot4Kind) -> Range {
    match kind {
        Dot4Kind::I8I8 => Range::new(-128 * 127, 128 * 128),
        Dot4Kind::U8I8 => Range::new(255 * -128, 255 * 127),
    }
}

/// Checks that a matrix step's (`Stmt::MmaI8`) sums cannot wrap: each output element adds
/// `32 · steps` i8·i8 products, so with `steps` at most S every partial sum lies in
/// `[32·S·(−16256), 32·S·16384]`, which must fit i32 (S ≤ 4095). `steps` needs a bound known
/// when the kernel is compiled (a constant, or a capped value such as `n.min(128)`).
pub fn check_mma_steps(k: &Kernel, steps: &Expr) -> Result<(), String> {
    let s = Ranges::of(k).expr(steps);
    let target = Range::of_type(ScalarType::I32);
    let p = dot4_product(Dot4Kind::I8I8);
    let k_max = s.hi.max(0).saturating_mul(crate::ir::MMA_K as i128);
    let partials = Range::new(k_max.saturating_mul(p.lo), k_max.saturating_mul(p.hi));
    if s.hi >= i64::MAX as i128 || !partials.within(target) {
        let found = if s.hi >= i64::MAX as i128 {
            format!("`{}` with no bound", k.expr_text(steps))
        } else {
            format!("`{}` in {s}, so up to {k_max} products and partial sums in {partials}", k.expr_text(steps))
        };
        return Err(format!(
            "the matrix step `mma_i8` must provably not overflow i32: expected its steps (32 i8·i8 products in {p} each) bounded by at most 4095 when the kernel is compiled, so that every partial sum lies within i32 {target}; found steps {found}: use a constant or a capped count such as `n.min(128)`"
        ));
    }
    Ok(())
}

/// What an integer sum's bound was derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumBound {
    /// The most elements it can have.
    pub max_len: i128,
    /// Every element lies in this range.
    pub elem: Range,
    /// Every partial sum, in any order, lies in this range.
    pub partials: Range,
}

/// Why a sum has no bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unbounded {
    /// Its length has no bound known when the kernel is compiled.
    Length { len: String },
}

/// Checks that an order-free reduction (`order = any`, or `blocked(B, any)`: its partial sums
/// are sums of at most as many elements) computes the same value in every
/// order: an integer `max`/`min` always does; an integer `sum` does when no partial sum can
/// leave its type (then it is the mathematical sum, which every order, tree or instruction
/// computes); a float reduction never does. The error says what was expected and found.
pub fn check_order_free(k: &Kernel, r: &Reduce) -> Result<(), String> {
    if !r.ty.is_int() {
        return Err(format!(
            "a reduction over {} cannot be order-free (`order = any`): floating-point {} depends on the order, expected an integer reduction or a declared order (seq, lanes(N)..., chunked(C), blocked(B, ORDER))",
            r.ty,
            if r.op == ReduceOp::Add || r.op == ReduceOp::FmaSum { "addition" } else { "max/min (NaN, and the sign of zero)" },
        ));
    }
    if matches!(r.op, ReduceOp::Max | ReduceOp::Min) {
        return Ok(());
    }
    let target = Range::of_type(r.ty);
    match Ranges::of(k).sum_bound(r) {
        Err(Unbounded::Length { len }) => Err(format!(
            "an order-free {} sum (`order = any`) needs its length bounded when the kernel is compiled, found length `{len}` with no bound: expected a constant, or a capped length such as `k.min(N)`, so that no partial sum can leave {} {target}",
            r.ty, r.ty
        )),
        Ok(b) if b.partials.within(target) => Ok(()),
        Ok(b) => Err(format!(
            "an order-free {} sum (`order = any`) must provably not overflow: expected every partial sum within {} {target}, found elements in {} over at most {} elements, so partial sums in {}{}",
            r.ty,
            r.ty,
            b.elem,
            b.max_len,
            b.partials,
            if b.elem == target {
                "; the elements are unbounded (a load, parameter or operation of the sum's own type): build them from i8/u8 values, or declare an order"
            } else {
                "; shorten the length or declare an order"
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Access, Buf, Const, Kernel, ParamId};

    fn kernel() -> Kernel {
        let mut k = Kernel::new("r");
        k.add_param("b", ParamKind::Buffer { elem: ScalarType::U8, access: Access::Read });
        k.add_param("q", ParamKind::Buffer { elem: ScalarType::I8, access: Access::Read });
        k
    }

    #[test]
    fn ranges_follow_the_operations() {
        let k = kernel();
        let mut r = Ranges::of(&k);
        let byte = Expr::load(Buf::Param(ParamId(0)), Expr::index(0));
        let q = Expr::load(Buf::Param(ParamId(1)), Expr::index(0));
        let c = |t, v| Expr::c(Const::new(t, v));
        // A nibble: (b >> 4) & 0xf, then minus 8 in i32.
        let hi = Expr::bin(BinOp::Shr, byte.clone(), c(ScalarType::U8, 4));
        assert_eq!(r.expr(&hi), Range::new(0, 15));
        let lo = Expr::bin(BinOp::And, byte.clone(), c(ScalarType::U8, 0xf));
        assert_eq!(r.expr(&lo), Range::new(0, 15));
        let centred = Expr::bin(BinOp::Sub, Expr::cast(ScalarType::I32, lo), c(ScalarType::I32, 8));
        assert_eq!(r.expr(&centred), Range::new(-8, 7));
        // u4·i8 and i8·i8 products.
        let q32 = Expr::cast(ScalarType::I32, q.clone());
        assert_eq!(r.expr(&Expr::bin(BinOp::Mul, centred, q32.clone())), Range::new(-8 * 127, 1024));
        assert_eq!(r.expr(&Expr::bin(BinOp::Mul, q32.clone(), q32)), Range::new(-16256, 16384));
        // Wrapping in its own type spans the type: i8 + i8 in i8.
        assert_eq!(r.expr(&Expr::bin(BinOp::Add, q.clone(), q)), Range::of_type(ScalarType::I8));
        // A dot4 of i8 words with accumulator 0.
        let w = c(ScalarType::U32, 0);
        assert_eq!(
            r.expr(&Expr::dot4(Dot4Kind::I8I8, w.clone(), w.clone(), c(ScalarType::I32, 0))),
            Range::new(-65024, 65536)
        );
        assert_eq!(
            r.expr(&Expr::dot4(Dot4Kind::U8I8, w.clone(), w, c(ScalarType::I32, 0))),
            Range::new(-130560, 129540)
        );
    }
}
