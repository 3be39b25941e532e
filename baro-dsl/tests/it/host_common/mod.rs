//! Tiny IR builder helpers and a shared runtime for the host tests. Test support only: it
//! never decides what a test expects.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use baro_dsl::ir::{Access, BinOp, Buf, Const, Expr, Kernel, ParamId, ParamKind, ScalarType, Stmt, Var};
use baro_dsl::runtime::{HostKernel, HostRuntime};

pub fn rt() -> &'static HostRuntime {
    static RT: OnceLock<HostRuntime> = OnceLock::new();
    RT.get_or_init(|| HostRuntime::new().expect("host runtime"))
}

pub fn compile(k: &Kernel) -> Arc<HostKernel> {
    match rt().compile(k) {
        Ok(c) => c,
        Err(e) => panic!("compile `{}`: {e}", k.name),
    }
}

pub fn input(k: &mut Kernel, name: &str, elem: ScalarType) -> ParamId {
    k.add_param(name, ParamKind::Buffer { elem, access: Access::Read })
}
pub fn output(k: &mut Kernel, name: &str, elem: ScalarType) -> ParamId {
    k.add_param(name, ParamKind::Buffer { elem, access: Access::ReadWrite })
}
pub fn scalar(k: &mut Kernel, name: &str, ty: ScalarType) -> ParamId {
    k.add_param(name, ParamKind::Scalar(ty))
}
pub fn v(x: Var) -> Expr {
    Expr::Var(x)
}
pub fn p(x: ParamId) -> Expr {
    Expr::Param(x)
}
pub fn ix(n: u64) -> Expr {
    Expr::index(n)
}
pub fn c(ty: ScalarType, bits: u64) -> Expr {
    Expr::Const(Const::new(ty, bits))
}
pub fn ld(b: ParamId, i: Expr) -> Expr {
    Expr::load(Buf::Param(b), i)
}
pub fn st(b: ParamId, i: Expr, value: Expr) -> Stmt {
    Stmt::Store { buf: Buf::Param(b), index: i, value }
}
pub fn add(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Add, a, b)
}
pub fn mul(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Mul, a, b)
}
pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::bin(op, a, b)
}
/// `par_for i in 0..end { body(i) }`
pub fn par_for(k: &mut Kernel, end: Expr, body: impl FnOnce(Var) -> Vec<Stmt>) -> Stmt {
    let i = k.add_var("i", ScalarType::INDEX, false);
    Stmt::ParFor { var: i, end, team: None, body: body(i) }
}

/// A kernel `name(x: &[from], y: &mut [to], n: usize)` with `y[i] = f(x[i])` for i < n.
pub fn elementwise(name: &str, from: ScalarType, to: ScalarType, f: impl FnOnce(Expr) -> Expr) -> Kernel {
    let mut k = Kernel::new(name);
    let x = input(&mut k, "x", from);
    let y = output(&mut k, "y", to);
    let n = scalar(&mut k, "n", ScalarType::INDEX);
    k.grid = vec![ix(1)];
    let body = par_for(&mut k, p(n), |i| vec![st(y, v(i), f(ld(x, v(i))))]);
    k.body = vec![body];
    k
}

/// Deterministic xorshift generator for test inputs.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Floats of mixed magnitude and sign in about [-4, 4].
    pub fn f32(&mut self) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        let s = if self.next() & 1 == 0 { 1.0 } else { -1.0 };
        s * u * [0.01f32, 1.0, 4.0][(self.next() % 3) as usize]
    }
    pub fn vec_f32(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}
