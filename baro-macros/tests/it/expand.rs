//! The code `#[kernel]` generates builds exactly the IR the front end lowered: a kernel
//! used through the real macro equals hand-built IR, field by field.

use baro_dsl::ir::{
    Access, BinOp, Buf, Expr, Kernel, ParamId, ParamKind, Reduce, ReduceOp, ScalarType as T, Sibling, Stmt, Var,
};
use baro_dsl::schedule::{Combine, Schedule};
use baro_macros::kernel;
use half::bf16;

#[kernel(grid = [n])]
/// Doc comments are forwarded to the builder function.
pub fn matvec(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i].to_f32());
}

#[kernel(grid = [n], rows_of = matvec, rows = rows, row_stride(x = k, y = n), verify(k = [1, 31, 70]))]
pub fn matvec_rows(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[r * k + i] * w[o * k + i].to_f32());
    }
}

#[kernel(grid = [n])]
fn everything(x: &[f32], h: &[half::f16], q: &[i8], c: &mut [u32], y: &mut [f32], n: usize, eps: f32, flag: bool) {
    let o = group_id(0);
    let tile = shared::<f32, 64>();
    for j in par(0..64) {
        tile[j] = x[j];
    }
    barrier();
    let m = max!(i in 0..n, order = chunked(16).seq(), x[i]);
    let s = sum!(i in 0..n, order = blocked(8, lanes(4).pairwise()), exp(x[i] - m));
    let g = if flag && o % 2 == 0 { silu(s) } else { sigmoid(s) + softplus(-s) + log(s.abs()) };
    y[o] = g.max(eps).min(1.0e30) + h[o].to_f32() + (q[o] as f32).floor().sqrt() + tile[o % 64];
    c[o] = (y[o].to_bits() ^ 0xff) << 1u32;
    y[o] = f32::from_bits(c[o]) * f16::from_f32(eps).to_f32();
}

use half::f16;

fn hand_built_matvec() -> Kernel {
    let mut k = Kernel::new("matvec");
    let x = k.add_param("x", ParamKind::Buffer { elem: T::F32, access: Access::Read });
    let w = k.add_param("w", ParamKind::Buffer { elem: T::BF16, access: Access::Read });
    let y = k.add_param("y", ParamKind::Buffer { elem: T::F32, access: Access::ReadWrite });
    let kk = k.add_param("k", ParamKind::Scalar(T::INDEX));
    let n = k.add_param("n", ParamKind::Scalar(T::INDEX));
    let o = k.add_var("o", T::INDEX, false);
    let i = k.add_var("i", T::INDEX, false);
    k.grid = vec![Expr::Param(n)];
    let w_index = Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, Expr::Var(o), Expr::Param(kk)), Expr::Var(i));
    let body = Expr::bin(
        BinOp::Mul,
        Expr::load(Buf::Param(x), Expr::Var(i)),
        Expr::cast(T::F32, Expr::load(Buf::Param(w), w_index)),
    );
    let sum = Reduce {
        op: ReduceOp::Add,
        ty: T::F32,
        schedule: Schedule::lanes(32, Combine::Butterfly),
        var: i,
        len: Expr::Param(kk),
        body,
    };
    k.body = vec![
        Stmt::Let { var: o, value: Expr::GroupId(0) },
        Stmt::Store { buf: Buf::Param(y), index: Expr::Var(o), value: Expr::Reduce(Box::new(sum)) },
    ];
    k
}

#[test]
fn generated_matvec_equals_hand_built_ir() {
    assert_eq!(matvec(), hand_built_matvec());
    // Cached: a second call builds the same value.
    assert_eq!(matvec(), matvec());
}

#[test]
fn generated_rows_kernel_declares_its_sibling() {
    let k = matvec_rows();
    assert_eq!(k.params.len(), 6);
    assert_eq!(
        k.sibling,
        Some(Sibling::strided(
            "matvec",
            ParamId(5),
            vec![(ParamId(0), Expr::Param(ParamId(3))), (ParamId(2), Expr::Param(ParamId(4)))]
        ))
    );
    assert_eq!(k.verify_shapes.values, vec![(ParamId(3), vec![1, 31, 70])]);
    let Stmt::For { var, body, .. } = &k.body[1] else { panic!("expected the row loop, found {:?}", k.body[1]) };
    assert_eq!(*var, Var(1));
    assert!(matches!(&body[0], Stmt::Store { value: Expr::Reduce(_), .. }));
    baro_dsl::verify::check_sibling(&k, &matvec()).expect("the rows kernel is an order-preserving sibling");
}

#[test]
fn every_construct_survives_generation_and_is_well_formed() {
    let k = everything();
    assert_eq!(k.shared.len(), 1);
    assert_eq!(k.vars.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["o", "j", "i", "m", "i", "s", "g"]);
    baro_dsl::verify::check_wellformed(&k).expect("well formed");
    baro_dsl::lanes::expand(&k).expect("expands");
}
