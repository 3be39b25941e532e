//! The IR interpretation of `Arith` and the pass that replaces every `Expr::Call` in a kernel
//! by the expression `algo` builds for it.
//!
//! It only rewrites `Expr::Call` nodes; it never touches the `implements` claims of `Lanes`
//! regions (the verifier checks those with calls as opaque nodes).

use std::cell::RefCell;

use super::algo::{self, Arith};
use crate::ir::{BinOp, Const, Expr, Kernel, MathFn, ScalarType, Stmt, UnOp, Var};

/// Builds IR expressions; shared values become `let` bindings around the final result.
struct IrArith<'k> {
    k: RefCell<&'k mut Kernel>,
    lets: RefCell<Vec<(Var, Expr)>>,
}

impl IrArith<'_> {
    fn share(&self, v: Expr, ty: ScalarType) -> Expr {
        if matches!(v, Expr::Var(_) | Expr::Const(_)) {
            return v;
        }
        let var = self.k.borrow_mut().add_var("m", ty, false);
        self.lets.borrow_mut().push((var, v));
        Expr::Var(var)
    }
    fn finish(self, result: Expr) -> Expr {
        self.lets.into_inner().into_iter().rev().fold(result, |body, (var, value)| Expr::let_in(var, value, body))
    }
}

fn i32c(v: i32) -> Expr {
    Expr::Const(Const::new(ScalarType::I32, v as u32 as u64))
}

impl Arith for IrArith<'_> {
    type F = Expr;
    type I = Expr;
    type B = Expr;
    fn fc(&self, v: f32) -> Expr {
        Expr::f32(v)
    }
    fn ic(&self, v: i32) -> Expr {
        i32c(v)
    }
    fn share_f(&self, v: Expr) -> Expr {
        self.share(v, ScalarType::F32)
    }
    fn share_i(&self, v: Expr) -> Expr {
        self.share(v, ScalarType::I32)
    }
    fn add(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Add, a, b)
    }
    fn sub(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Sub, a, b)
    }
    fn mul(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Mul, a, b)
    }
    fn div(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Div, a, b)
    }
    fn neg(&self, a: Expr) -> Expr {
        Expr::un(UnOp::Neg, a)
    }
    fn sqrt(&self, a: Expr) -> Expr {
        Expr::un(UnOp::Sqrt, a)
    }
    fn floor(&self, a: Expr) -> Expr {
        Expr::un(UnOp::Floor, a)
    }
    fn lt(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Lt, a, b)
    }
    fn gt(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Gt, a, b)
    }
    fn feq(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Eq, a, b)
    }
    fn fne(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Ne, a, b)
    }
    fn sel(&self, c: Expr, a: Expr, b: Expr) -> Expr {
        Expr::select(c, a, b)
    }
    fn isel(&self, c: Expr, a: Expr, b: Expr) -> Expr {
        Expr::select(c, a, b)
    }
    fn iadd(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Add, a, b)
    }
    fn isub(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Sub, a, b)
    }
    fn iand(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::And, a, b)
    }
    fn ior(&self, a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Or, a, b)
    }
    fn ishl(&self, a: Expr, n: u32) -> Expr {
        Expr::bin(BinOp::Shl, a, i32c(n as i32))
    }
    fn ishr(&self, a: Expr, n: u32) -> Expr {
        Expr::bin(BinOp::Shr, a, i32c(n as i32))
    }
    fn to_int(&self, a: Expr) -> Expr {
        Expr::cast(ScalarType::I32, a)
    }
    fn to_float(&self, a: Expr) -> Expr {
        Expr::cast(ScalarType::F32, a)
    }
    fn bits(&self, a: Expr) -> Expr {
        Expr::bitcast(ScalarType::I32, a)
    }
    fn f32_from_bits(&self, a: Expr) -> Expr {
        Expr::bitcast(ScalarType::F32, a)
    }
}

/// The expression computing `func(arg)` from basic operations, with fresh variables declared
/// in `k`.
pub fn expand_call(k: &mut Kernel, func: MathFn, arg: Expr) -> Expr {
    let a = IrArith { k: RefCell::new(k), lets: RefCell::new(Vec::new()) };
    let result = match func {
        MathFn::Exp => algo::exp(&a, arg),
        MathFn::Log => algo::log(&a, arg),
        MathFn::Sigmoid => algo::sigmoid(&a, arg),
        MathFn::Silu => algo::silu(&a, arg),
        MathFn::Softplus => algo::softplus(&a, arg),
        MathFn::Rsqrt => algo::rsqrt(&a, arg),
    };
    a.finish(result)
}

/// Returns a copy of `k` in which no `Expr::Call` remains (outside `implements` claims).
pub fn expand_calls(k: &Kernel) -> Kernel {
    let mut out = k.clone();
    let body = std::mem::take(&mut out.body);
    let body = block(&mut out, body);
    out.body = body;
    let grid = std::mem::take(&mut out.grid);
    out.grid = grid.into_iter().map(|e| expr(&mut out, e)).collect();
    out
}

fn block(k: &mut Kernel, stmts: Vec<Stmt>) -> Vec<Stmt> {
    stmts.into_iter().map(|s| stmt(k, s)).collect()
}

fn stmt(k: &mut Kernel, s: Stmt) -> Stmt {
    match s {
        Stmt::Let { var, value } => Stmt::Let { var, value: expr(k, value) },
        Stmt::Assign { var, value } => Stmt::Assign { var, value: expr(k, value) },
        Stmt::LetRows { vars, row, value } => Stmt::LetRows { vars, row, value: expr(k, value) },
        Stmt::Store { buf, index, value } => {
            let index = expr(k, index);
            Stmt::Store { buf, index, value: expr(k, value) }
        }
        Stmt::For { var, start, end, step, body } => {
            let start = expr(k, start);
            let end = expr(k, end);
            let step = expr(k, step);
            Stmt::For { var, start, end, step, body: block(k, body) }
        }
        Stmt::If { cond, then_body, else_body } => {
            let cond = expr(k, cond);
            let then_body = block(k, then_body);
            Stmt::If { cond, then_body, else_body: block(k, else_body) }
        }
        Stmt::ParFor { var, end, team, body } => {
            let end = expr(k, end);
            Stmt::ParFor { var, end, team, body: block(k, body) }
        }
        Stmt::Lanes { lane, count, implements, body } => Stmt::Lanes { lane, count, implements, body: block(k, body) },
        Stmt::Barrier => Stmt::Barrier,
        Stmt::Check { id, cond } => Stmt::Check { id, cond: expr(k, cond) },
        Stmt::MmaI8(m) => match m.map_exprs(|e| Ok::<_, std::convert::Infallible>(expr(k, e))) {
            Ok(m) => Stmt::MmaI8(Box::new(m)),
            Err(never) => match never {},
        },
    }
}

#[allow(clippy::boxed_local)] // the IR holds boxes; this rebuilds one in place
fn bx(k: &mut Kernel, e: Box<Expr>) -> Box<Expr> {
    Box::new(expr(k, *e))
}

fn expr(k: &mut Kernel, e: Expr) -> Expr {
    if !e.any(&|x| matches!(x, Expr::Call { .. })) {
        return e;
    }
    match e {
        Expr::Call { func, arg } => {
            let arg = expr(k, *arg);
            expand_call(k, func, arg)
        }
        Expr::Load { buf, index } => Expr::Load { buf, index: bx(k, index) },
        Expr::Unary { op, arg } => Expr::Unary { op, arg: bx(k, arg) },
        Expr::Binary { op, lhs, rhs } => {
            let lhs = bx(k, lhs);
            Expr::Binary { op, lhs, rhs: bx(k, rhs) }
        }
        Expr::Select { cond, then, els } => {
            let cond = bx(k, cond);
            let then = bx(k, then);
            Expr::Select { cond, then, els: bx(k, els) }
        }
        Expr::Fma { a, b, c } => {
            let a = bx(k, a);
            let b = bx(k, b);
            Expr::Fma { a, b, c: bx(k, c) }
        }
        Expr::Dot4 { kind, a, b, c } => {
            let a = bx(k, a);
            let b = bx(k, b);
            Expr::Dot4 { kind, a, b, c: bx(k, c) }
        }
        Expr::Cast { to, arg } => Expr::Cast { to, arg: bx(k, arg) },
        Expr::Bitcast { to, arg } => Expr::Bitcast { to, arg: bx(k, arg) },
        Expr::Let { var, value, body } => {
            let value = bx(k, value);
            Expr::Let { var, value, body: bx(k, body) }
        }
        Expr::Reduce(mut r) => {
            r.len = expr(k, r.len);
            r.body = expr(k, r.body);
            Expr::Reduce(r)
        }
        Expr::ShuffleXor { value, mask } => Expr::ShuffleXor { value: bx(k, value), mask },
        leaf => leaf,
    }
}
