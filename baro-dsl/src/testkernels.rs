//! IR builders for the verifier's example kernels: m=1 / rows sibling pairs (f32 and bf16
//! matvec, RMSNorm and its zero-centred variant, softmax, a Q8_0-style blocked dot, a matvec
//! ending in an explicit fma) and the negative controls (rows kernels that reorder arithmetic,
//! or fuse or split a multiply-add, and must be rejected).
//!
//! Test support only (`#[doc(hidden)]`): nothing in baro's pipeline may depend on it.

mod mma;
pub use mma::{
    mma_tiles, mma_tiles_with, MMA_A_OFFSET, MMA_C_OFFSET, MMA_C_STRIDE, MMA_MAX_STEPS, MMA_MAX_TILES, MMA_PAD,
};

use crate::ir::{
    Access, BinOp, Buf, Expr, Kernel, MathFn, ParamId, ParamKind, Reduce, ReduceOp, ScalarType, Sibling, Stmt, UnOp,
    Var,
};
use crate::schedule::{Combine, Schedule};

const F32: ScalarType = ScalarType::F32;
const IDX: ScalarType = ScalarType::INDEX;

/// A tiny builder: parameters, variables and reductions of one kernel.
struct Kb {
    k: Kernel,
}

fn ld(p: ParamId, i: Expr) -> Expr {
    Expr::load(Buf::Param(p), i)
}
fn pe(p: ParamId) -> Expr {
    Expr::Param(p)
}
fn ve(v: Var) -> Expr {
    Expr::Var(v)
}
fn add(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Add, a, b)
}
fn sub(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Sub, a, b)
}
fn mul(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Mul, a, b)
}
fn div(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Div, a, b)
}
fn let_(var: Var, value: Expr) -> Stmt {
    Stmt::Let { var, value }
}
fn store(p: ParamId, index: Expr, value: Expr) -> Stmt {
    Stmt::Store { buf: Buf::Param(p), index, value }
}
fn for_(var: Var, end: Expr, body: Vec<Stmt>) -> Stmt {
    Stmt::For { var, start: Expr::index(0), end, step: Expr::index(1), body }
}

fn butterfly32() -> Schedule {
    Schedule::lanes(32, Combine::Butterfly)
}

impl Kb {
    fn new(name: &str) -> Kb {
        Kb { k: Kernel::new(name) }
    }
    fn buf(&mut self, name: &str, elem: ScalarType, write: bool) -> ParamId {
        let access = if write { Access::ReadWrite } else { Access::Read };
        self.k.add_param(name, ParamKind::Buffer { elem, access })
    }
    fn scalar(&mut self, name: &str, ty: ScalarType) -> ParamId {
        self.k.add_param(name, ParamKind::Scalar(ty))
    }
    fn var(&mut self, name: &str, ty: ScalarType) -> Var {
        self.k.add_var(name, ty, false)
    }
    fn reduce(
        &mut self,
        op: ReduceOp,
        schedule: Schedule,
        len: Expr,
        body: impl FnOnce(&mut Kb, Expr) -> Expr,
    ) -> Expr {
        let var = self.var("i", IDX);
        let body = body(self, ve(var));
        Expr::Reduce(Box::new(Reduce { op, ty: F32, schedule, var, len, body }))
    }
    fn sibling(&mut self, of: &str, rows: ParamId, row_strides: Vec<(ParamId, Expr)>) {
        self.k.sibling = Some(Sibling::strided(of, rows, row_strides));
    }
    fn done(mut self, grid: Vec<Expr>, body: Vec<Stmt>) -> Kernel {
        self.k.grid = grid;
        self.k.body = body;
        self.k
    }
}

/// How a matvec variant computes each product.
#[derive(Clone, Copy)]
struct MatvecForm {
    weight: ScalarType,
    /// `w·x` instead of `x·w` (a negative control).
    swapped: bool,
    /// An `fma_sum`: each partial takes the product in by fma.
    fused: bool,
}

impl MatvecForm {
    fn op(self) -> ReduceOp {
        if self.fused {
            ReduceOp::FmaSum
        } else {
            ReduceOp::Add
        }
    }
}

fn product(form: MatvecForm, x: Expr, w: Expr) -> Expr {
    let w = if form.weight == F32 { w } else { Expr::cast(F32, w) };
    if form.swapped {
        mul(w, x)
    } else {
        mul(x, w)
    }
}

/// `y[o] = sum(i in 0..k, schedule, x[i]·w[o·k + i])`, one workgroup per output.
fn matvec_m1(name: &str, schedule: Schedule, form: MatvecForm) -> Kernel {
    let mut b = Kb::new(name);
    let w = b.buf("w", form.weight, false); // (m, k)
    let x = b.buf("x", F32, false); // (k)
    let y = b.buf("y", F32, true); // (m)
    let k = b.scalar("k", IDX);
    let m = b.scalar("m", IDX);
    let o = b.var("o", IDX);
    let dot =
        b.reduce(form.op(), schedule, pe(k), |_, i| product(form, ld(x, i.clone()), ld(w, add(mul(ve(o), pe(k)), i))));
    b.done(vec![pe(m)], vec![let_(o, Expr::GroupId(0)), store(y, ve(o), dot)])
}

/// The rows sibling: `for r in 0..rows { y[r·m + o] = sum(x[r·k + i]·w[o·k + i]) }`.
fn matvec_rows(name: &str, of: &str, schedule: Schedule, form: MatvecForm) -> Kernel {
    let mut b = Kb::new(name);
    let w = b.buf("w", form.weight, false); // (m, k)
    let x = b.buf("x", F32, false); // (rows, k)
    let y = b.buf("y", F32, true); // (rows, m)
    let k = b.scalar("k", IDX);
    let m = b.scalar("m", IDX);
    let rows = b.scalar("rows", IDX);
    let o = b.var("o", IDX);
    let wrow = b.var("wrow", IDX);
    let r = b.var("r", IDX);
    let xrow = b.var("xrow", IDX);
    let yi = b.var("yi", IDX);
    let dot = b.reduce(form.op(), schedule, pe(k), |_, i| {
        product(form, ld(x, add(ve(xrow), i.clone())), ld(w, add(ve(wrow), i)))
    });
    b.sibling(of, rows, vec![(x, pe(k)), (y, pe(m))]);
    let row = vec![let_(xrow, mul(ve(r), pe(k))), let_(yi, add(mul(ve(r), pe(m)), ve(o))), store(y, ve(yi), dot)];
    b.done(vec![pe(m)], vec![let_(o, Expr::GroupId(0)), let_(wrow, mul(ve(o), pe(k))), for_(r, pe(rows), row)])
}

/// `matvec_rows` with a tile of 8 rows per workgroup (grid [m, (rows + 7) / 8]): a weight row
/// is read once for 8 rows, as the engine's rows matvecs do; the last tile may be partial.
pub fn matvec_tiled_rows() -> Kernel {
    let mut b = Kb::new("matvec_tiled_rows");
    let w = b.buf("w", F32, false); // (m, k)
    let x = b.buf("x", F32, false); // (rows, k)
    let y = b.buf("y", F32, true); // (rows, m)
    let k = b.scalar("k", IDX);
    let m = b.scalar("m", IDX);
    let rows = b.scalar("rows", IDX);
    let (o, wrow, t, s, xrow) =
        (b.var("o", IDX), b.var("wrow", IDX), b.var("t", IDX), b.var("s", IDX), b.var("xrow", IDX));
    let dot = b.reduce(ReduceOp::Add, butterfly32(), pe(k), |_, i| {
        product(F32_FORM, ld(x, add(ve(xrow), i.clone())), ld(w, add(ve(wrow), i)))
    });
    b.sibling("matvec", rows, vec![(x, pe(k)), (y, pe(m))]);
    let row = vec![
        let_(s, add(mul(Expr::GroupId(1), Expr::index(8)), ve(t))),
        Stmt::If {
            cond: Expr::bin(BinOp::Lt, ve(s), pe(rows)),
            then_body: vec![let_(xrow, mul(ve(s), pe(k))), store(y, add(mul(ve(s), pe(m)), ve(o)), dot)],
            else_body: Vec::new(),
        },
    ];
    b.done(
        vec![pe(m), div(add(pe(rows), Expr::index(7)), Expr::index(8))],
        vec![let_(o, Expr::GroupId(0)), let_(wrow, mul(ve(o), pe(k))), for_(t, Expr::index(8), row)],
    )
}

/// `matvec_rows` with a tile of 4 rows per workgroup in one reduction over rows (`LetRows`):
/// each weight is read once for the 4 rows, each row in the m=1 order; a row past the last
/// reads the last row's x and is not stored.
fn matvec_multirow_rows(name: &str, of: &str, form: MatvecForm) -> Kernel {
    let mut b = Kb::new(name);
    let w = b.buf("w", F32, false); // (m, k)
    let x = b.buf("x", F32, false); // (rows, k)
    let y = b.buf("y", F32, true); // (rows, m)
    let k = b.scalar("k", IDX);
    let m = b.scalar("m", IDX);
    let rows = b.scalar("rows", IDX);
    let (o, wrow, r0, row) = (b.var("o", IDX), b.var("wrow", IDX), b.var("r0", IDX), b.var("row", IDX));
    let last = Expr::bin(BinOp::Sub, pe(rows), Expr::index(1));
    let xrow = mul(Expr::bin(BinOp::Min, add(ve(r0), ve(row)), last), pe(k));
    let dot = b.reduce(form.op(), butterfly32(), pe(k), |_, i| {
        product(form, ld(x, add(xrow, i.clone())), ld(w, add(ve(wrow), i)))
    });
    let ys: Vec<Var> = (0..4).map(|j| b.var(&format!("y{j}"), F32)).collect();
    b.sibling(of, rows, vec![(x, pe(k)), (y, pe(m))]);
    let mut body = vec![
        let_(o, Expr::GroupId(0)),
        let_(wrow, mul(ve(o), pe(k))),
        let_(r0, mul(Expr::GroupId(1), Expr::index(4))),
        Stmt::LetRows { vars: ys.clone(), row, value: dot },
    ];
    for (j, yj) in ys.into_iter().enumerate() {
        let at = add(ve(r0), Expr::index(j as u64));
        body.push(Stmt::If {
            cond: Expr::bin(BinOp::Lt, at.clone(), pe(rows)),
            then_body: vec![store(y, add(mul(at, pe(m)), ve(o)), ve(yj))],
            else_body: Vec::new(),
        });
    }
    b.done(vec![pe(m), div(add(pe(rows), Expr::index(3)), Expr::index(4))], body)
}

const F32_FORM: MatvecForm = MatvecForm { weight: F32, swapped: false, fused: false };
const BF16_FORM: MatvecForm = MatvecForm { weight: ScalarType::BF16, swapped: false, fused: false };
const FUSED_FORM: MatvecForm = MatvecForm { weight: F32, swapped: false, fused: true };

/// A matvec whose lanes accumulate by fma (`acc = fma(x_i, w_i, acc)`), partials combined
/// by the butterfly's additions.
pub fn matvec_fused() -> Kernel {
    matvec_m1("matvec_fused", butterfly32(), FUSED_FORM)
}
pub fn matvec_fused_rows() -> Kernel {
    matvec_rows("matvec_fused_rows", "matvec_fused", butterfly32(), FUSED_FORM)
}
/// Blocks of 4 fused per block, the block sums combined by a `lanes(8)` butterfly.
fn fused_blocked() -> Schedule {
    Schedule::Blocked { block: 4, across: Box::new(Schedule::lanes(8, Combine::Butterfly)) }
}

pub fn matvec() -> Kernel {
    matvec_m1("matvec", butterfly32(), F32_FORM)
}
pub fn matvec_rows_ok() -> Kernel {
    matvec_rows("matvec_rows", "matvec", butterfly32(), F32_FORM)
}
pub fn matvec_bf16() -> Kernel {
    matvec_m1("matvec_bf16", butterfly32(), BF16_FORM)
}
pub fn matvec_bf16_rows() -> Kernel {
    matvec_rows("matvec_bf16_rows", "matvec_bf16", butterfly32(), BF16_FORM)
}
/// A matvec whose 32 lane partials are combined sequentially (`lanes(32, seq)`).
pub fn matvec_seq_combine() -> Kernel {
    matvec_m1("matvec_seq_combine", Schedule::lanes(32, Combine::Sequential), F32_FORM)
}
pub fn matvec_seq_combine_rows() -> Kernel {
    matvec_rows("matvec_seq_combine_rows", "matvec_seq_combine", Schedule::lanes(32, Combine::Sequential), F32_FORM)
}

/// `y = x · rsqrt(mean(x²) + eps) · w` (or `· (1 + w)` when `zero_centred`), one row.
pub fn rmsnorm(zero_centred: bool) -> Kernel {
    rmsnorm_kernel(zero_centred, false)
}
pub fn rmsnorm_rows(zero_centred: bool) -> Kernel {
    rmsnorm_kernel(zero_centred, true)
}

fn rmsnorm_kernel(zero_centred: bool, batched: bool) -> Kernel {
    let base_name = if zero_centred { "rmsnorm_zc" } else { "rmsnorm" };
    let name = if batched { format!("{base_name}_rows") } else { base_name.to_string() };
    let mut b = Kb::new(&name);
    let x = b.buf("x", F32, false); // (rows, n)
    let w = b.buf("w", F32, false); // (n)
    let y = b.buf("y", F32, true); // (rows, n)
    let n = b.scalar("n", IDX);
    let eps = b.scalar("eps", F32);
    let rows = batched.then(|| b.scalar("rows", IDX));
    let base = b.var("base", IDX);
    let ss = b.var("ss", F32);
    let scale = b.var("scale", F32);
    let j = b.var("j", IDX);
    let at = |i: Expr| add(ve(base), i);
    let sumsq = b.reduce(ReduceOp::Add, butterfly32(), pe(n), |_, i| mul(ld(x, at(i.clone())), ld(x, at(i))));
    let wv = if zero_centred { add(Expr::f32(1.0), ld(w, ve(j))) } else { ld(w, ve(j)) };
    let mean = div(ve(ss), Expr::cast(F32, pe(n)));
    let body = vec![
        let_(base, mul(Expr::GroupId(0), pe(n))),
        let_(ss, sumsq),
        let_(scale, Expr::call(MathFn::Rsqrt, add(mean, pe(eps)))),
        Stmt::ParFor {
            var: j,
            end: pe(n),
            team: None,
            body: vec![store(y, at(ve(j)), mul(mul(ld(x, at(ve(j))), ve(scale)), wv))],
        },
    ];
    let grid = match rows {
        Some(r) => {
            b.sibling(base_name, r, vec![(x, pe(n)), (y, pe(n))]);
            vec![pe(r)]
        }
        None => vec![Expr::index(1)],
    };
    b.done(grid, body)
}

/// `y = exp(x - max(x)) / sum(exp(x - max(x)))` over one row.
pub fn softmax() -> Kernel {
    softmax_kernel(false)
}
pub fn softmax_rows() -> Kernel {
    softmax_kernel(true)
}

fn softmax_kernel(batched: bool) -> Kernel {
    let mut b = Kb::new(if batched { "softmax_rows" } else { "softmax" });
    let x = b.buf("x", F32, false); // (rows, n)
    let y = b.buf("y", F32, true); // (rows, n)
    let n = b.scalar("n", IDX);
    let rows = batched.then(|| b.scalar("rows", IDX));
    let r = b.var("r", IDX);
    let base = b.var("base", IDX);
    let mx = b.var("mx", F32);
    let s = b.var("s", F32);
    let j = b.var("j", IDX);
    let at = |i: Expr| add(ve(base), i);
    let max = b.reduce(ReduceOp::Max, butterfly32(), pe(n), |_, i| ld(x, at(i)));
    let sum = b.reduce(ReduceOp::Add, butterfly32(), pe(n), |_, i| Expr::call(MathFn::Exp, sub(ld(x, at(i)), ve(mx))));
    let e = Expr::call(MathFn::Exp, sub(ld(x, at(ve(j))), ve(mx)));
    let row = |base_value: Expr| {
        vec![
            let_(base, base_value),
            let_(mx, max),
            let_(s, sum),
            Stmt::ParFor { var: j, end: pe(n), team: None, body: vec![store(y, at(ve(j)), div(e, ve(s)))] },
        ]
    };
    match rows {
        Some(rp) => {
            b.sibling("softmax", rp, vec![(x, pe(n)), (y, pe(n))]);
            let body = vec![for_(r, pe(rp), row(mul(ve(r), pe(n))))];
            b.done(vec![Expr::index(1)], body)
        }
        None => {
            let body = row(Expr::index(0));
            b.done(vec![Expr::index(1)], body)
        }
    }
}

/// Q8_0-style dot per output row: blocks of 32 `i8` with an `f16` scale each,
/// `y[o] = sum(b, lanes(32, butterfly), d[o·nb + b] as f32 · sum(j in 0..32, seq, q[(o·nb + b)·32 + j] as f32 · x[b·32 + j]))`.
pub fn q8_dot() -> Kernel {
    q8_kernel(false)
}
pub fn q8_dot_rows() -> Kernel {
    q8_kernel(true)
}

fn q8_kernel(batched: bool) -> Kernel {
    let mut b = Kb::new(if batched { "q8_dot_rows" } else { "q8_dot" });
    let q = b.buf("q", ScalarType::I8, false); // (m, nb·32)
    let d = b.buf("d", ScalarType::F16, false); // (m, nb)
    let x = b.buf("x", F32, false); // (rows, nb·32)
    let y = b.buf("y", F32, true); // (rows, m)
    let nb = b.scalar("nb", IDX);
    let m = b.scalar("m", IDX);
    let rows = batched.then(|| b.scalar("rows", IDX));
    let o = b.var("o", IDX);
    let r = b.var("r", IDX);
    let xrow = b.var("xrow", IDX);
    let dot = b.reduce(ReduceOp::Add, butterfly32(), pe(nb), |b, blk| {
        let blk_idx = add(mul(ve(o), pe(nb)), blk.clone());
        let inner = b.reduce(ReduceOp::Add, Schedule::Sequential, Expr::index(32), |_, jj| {
            let qv = Expr::cast(F32, ld(q, add(mul(blk_idx.clone(), Expr::index(32)), jj.clone())));
            mul(qv, ld(x, add(ve(xrow), add(mul(blk.clone(), Expr::index(32)), jj))))
        });
        mul(Expr::cast(F32, ld(d, blk_idx)), inner)
    });
    match rows {
        Some(rp) => {
            b.sibling("q8_dot", rp, vec![(x, mul(pe(nb), Expr::index(32))), (y, pe(m))]);
            let row = vec![
                let_(xrow, mul(ve(r), mul(pe(nb), Expr::index(32)))),
                store(y, add(mul(ve(r), pe(m)), ve(o)), dot),
            ];
            b.done(vec![pe(m)], vec![let_(o, Expr::GroupId(0)), for_(r, pe(rp), row)])
        }
        None => b.done(vec![pe(m)], vec![let_(o, Expr::GroupId(0)), let_(xrow, Expr::index(0)), store(y, ve(o), dot)]),
    }
}

/// `for i in par(0..n) { y[i] = let a = x[i]·2 in (let b = a + 1 in b·a) − (let a' = −a in a'·0.5) }`:
/// expression `let`s (what a `#[kernel]` block used as a value lowers to), nested, with a second
/// variable of the same name, on one workgroup.
pub fn expression_lets() -> Kernel {
    let mut k = Kernel::new("expression_lets");
    let x = k.add_param("x", ParamKind::Buffer { elem: F32, access: Access::Read });
    let y = k.add_param("y", ParamKind::Buffer { elem: F32, access: Access::ReadWrite });
    let n = k.add_param("n", ParamKind::Scalar(IDX));
    let i = k.add_var("i", IDX, false);
    let a = k.add_var("a", F32, false);
    let b = k.add_var("b", F32, false);
    let a2 = k.add_var("a", F32, false);
    let inner = Expr::let_in(b, add(ve(a), Expr::f32(1.0)), mul(ve(b), ve(a)));
    let other = Expr::let_in(a2, Expr::un(UnOp::Neg, ve(a)), mul(ve(a2), Expr::f32(0.5)));
    let value = Expr::let_in(a, mul(ld(x, ve(i)), Expr::f32(2.0)), sub(inner, other));
    k.grid = vec![Expr::index(1)];
    k.body = vec![Stmt::ParFor { var: i, end: pe(n), team: None, body: vec![store(y, ve(i), value)] }];
    k
}

/// `y[o] = fma(dot, g[o], b[o])` with `dot` the matvec of row o (`lanes(32)` butterfly), or
/// `dot·g[o] + b[o]` when not `fused` (two roundings); with `rows_of`, the rows sibling.
fn matvec_affine(name: &str, fused: bool, rows_of: Option<&str>) -> Kernel {
    let mut b = Kb::new(name);
    let w = b.buf("w", F32, false); // (m, k)
    let x = b.buf("x", F32, false); // (rows, k)
    let g = b.buf("g", F32, false); // (m)
    let bias = b.buf("b", F32, false); // (m)
    let y = b.buf("y", F32, true); // (rows, m)
    let k = b.scalar("k", IDX);
    let m = b.scalar("m", IDX);
    let o = b.var("o", IDX);
    let xrow = b.var("xrow", IDX);
    let dot = b.reduce(ReduceOp::Add, butterfly32(), pe(k), |_, i| {
        mul(ld(x, add(ve(xrow), i.clone())), ld(w, add(mul(ve(o), pe(k)), i)))
    });
    let value = if fused {
        Expr::fma(dot, ld(g, ve(o)), ld(bias, ve(o)))
    } else {
        add(mul(dot, ld(g, ve(o))), ld(bias, ve(o)))
    };
    match rows_of {
        Some(of) => {
            let rows = b.scalar("rows", IDX);
            let r = b.var("r", IDX);
            b.sibling(of, rows, vec![(x, pe(k)), (y, pe(m))]);
            let row = vec![let_(xrow, mul(ve(r), pe(k))), store(y, add(mul(ve(r), pe(m)), ve(o)), value)];
            b.done(vec![pe(m)], vec![let_(o, Expr::GroupId(0)), for_(r, pe(rows), row)])
        }
        None => {
            b.done(vec![pe(m)], vec![let_(o, Expr::GroupId(0)), let_(xrow, Expr::index(0)), store(y, ve(o), value)])
        }
    }
}

/// `y[o] = fma(x·w[o], g[o], b[o])`: an explicit fma after a declared lane sum.
pub fn matvec_fma() -> Kernel {
    matvec_affine("matvec_fma", true, None)
}
pub fn matvec_fma_rows() -> Kernel {
    matvec_affine("matvec_fma_rows", true, Some("matvec_fma"))
}

/// `for i in par(0..n) { y[i] = fma(a[i], b[i], c[i]); z[i] = a[i]·b[i] + c[i] }`: the same
/// operands fused (one rounding) and not (two), side by side in one kernel.
pub fn fma_and_mul_add() -> Kernel {
    let mut b = Kb::new("fma_and_mul_add");
    let a = b.buf("a", F32, false); // (n)
    let bb = b.buf("b", F32, false); // (n)
    let c = b.buf("c", F32, false); // (n)
    let y = b.buf("y", F32, true); // (n)
    let z = b.buf("z", F32, true); // (n)
    let n = b.scalar("n", IDX);
    let i = b.var("i", IDX);
    let (ai, bi, ci) = (ld(a, ve(i)), ld(bb, ve(i)), ld(c, ve(i)));
    let body =
        vec![store(y, ve(i), Expr::fma(ai.clone(), bi.clone(), ci.clone())), store(z, ve(i), add(mul(ai, bi), ci))];
    b.done(vec![Expr::index(1)], vec![Stmt::ParFor { var: i, end: pe(n), team: None, body }])
}

/// Every valid (rows, m=1) pair.
/// `pairs()` plus pairs that only the verifier needs (a tiled rows matvec of the same m = 1
/// kernel, a sequential matvec with no lanes, a matvec ending in an fma and one ending in a
/// multiply then an add): the GPU codegen tests compile `pairs()`, whose
/// kernels each have distinct names and one lane exchange.
pub fn verifier_pairs() -> Vec<(Kernel, Kernel)> {
    let mut v = pairs();
    v.push((matvec_tiled_rows(), matvec()));
    v.push((matvec_fma_rows(), matvec_fma()));
    v.push((matvec_fused_rows(), matvec_fused()));
    v.push((
        matvec_rows("matvec_fused_blocked_rows", "matvec_fused_blocked", fused_blocked(), FUSED_FORM),
        matvec_m1("matvec_fused_blocked", fused_blocked(), FUSED_FORM),
    ));
    v.push((
        matvec_affine("matvec_affine_rows", false, Some("matvec_affine")),
        matvec_affine("matvec_affine", false, None),
    ));
    v.push((
        matvec_rows("matvec_seq_rows", "matvec_seq", Schedule::Sequential, F32_FORM),
        matvec_m1("matvec_seq", Schedule::Sequential, F32_FORM),
    ));
    v.push((matvec_multirow_rows("matvec_multirow_rows", "matvec", F32_FORM), matvec()));
    v.push((matvec_multirow_rows("matvec_fused_multirow_rows", "matvec_fused", FUSED_FORM), matvec_fused()));
    v
}

pub fn pairs() -> Vec<(Kernel, Kernel)> {
    vec![
        (matvec_rows_ok(), matvec()),
        (matvec_bf16_rows(), matvec_bf16()),
        (matvec_seq_combine_rows(), matvec_seq_combine()),
        (rmsnorm_rows(false), rmsnorm(false)),
        (rmsnorm_rows(true), rmsnorm(true)),
        (softmax_rows(), softmax()),
        (q8_dot_rows(), q8_dot()),
    ]
}

/// Rows kernels that claim to be siblings but reorder the arithmetic: (what, rows, m=1).
pub fn negative_controls() -> Vec<(&'static str, Kernel, Kernel)> {
    vec![
        (
            "chunked",
            matvec_rows(
                "matvec_rows_chunked",
                "matvec",
                Schedule::Chunked { size: 8, combine: Combine::Sequential },
                F32_FORM,
            ),
            matvec(),
        ),
        (
            "lanes64",
            matvec_rows("matvec_rows_lanes64", "matvec", Schedule::lanes(64, Combine::Butterfly), F32_FORM),
            matvec(),
        ),
        (
            "pairwise",
            matvec_rows("matvec_rows_pairwise", "matvec_seq_combine", Schedule::lanes(32, Combine::Pairwise), F32_FORM),
            matvec_seq_combine(),
        ),
        (
            "swapped",
            matvec_rows(
                "matvec_rows_swapped",
                "matvec",
                butterfly32(),
                MatvecForm { weight: F32, swapped: true, fused: false },
            ),
            matvec(),
        ),
        ("fused_order", matvec_rows("matvec_rows_fused", "matvec", butterfly32(), FUSED_FORM), matvec()),
        (
            "fused",
            matvec_affine("matvec_affine_rows_fused", true, Some("matvec_affine")),
            matvec_affine("matvec_affine", false, None),
        ),
        ("unfused", matvec_affine("matvec_fma_rows_unfused", false, Some("matvec_fma")), matvec_fma()),
    ]
}
