//! The host runtime's shuffled order (`HostOrder::Shuffled`, `BARO_HOST_ORDER=shuffled:SEED`):
//! `par` iterations and workgroups run in a seeded permuted order, so a race shows on the
//! host as it would on a GPU, and a race-free kernel gives the same bytes in every order.

use baro_dsl::ir::{Access, BinOp, Buf, Const, Expr, Kernel, ParamKind, ScalarType, Stmt};
use baro_dsl::options::HostOrder;
use baro_dsl::runtime::{Arg, HostRuntime};
use baro_dsl::testkernels::matvec_tiled_rows;

const F32: ScalarType = ScalarType::F32;
const IDX: ScalarType = ScalarType::INDEX;

/// One workgroup per row r, a `par` loop over j: `state[j] = state[j]·0.5 + x[r·n + j]` and
/// `y[r·n + j] = state[j]` (racy: every workgroup steps the same state), or, race-free,
/// `y[r·n + j] = x[r·n + j]·0.5` with `state[j]` written only by row 0's workgroup.
fn rows_kernel(racy: bool) -> Kernel {
    let mut k = Kernel::new(if racy { "carry_by_groups" } else { "scale_by_groups" });
    let x = k.add_param("x", ParamKind::Buffer { elem: F32, access: Access::Read });
    let state = k.add_param("state", ParamKind::Buffer { elem: F32, access: Access::ReadWrite });
    let y = k.add_param("y", ParamKind::Buffer { elem: F32, access: Access::ReadWrite });
    let n = k.add_param("n", ParamKind::Scalar(IDX));
    let rows = k.add_param("rows", ParamKind::Scalar(IDX));
    let (r, j) = (k.add_var("r", IDX, false), k.add_var("j", IDX, false));
    let half = || Expr::Const(Const::f32(0.5));
    let xi = Expr::load(
        Buf::Param(x),
        Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, Expr::Var(r), Expr::Param(n)), Expr::Var(j)),
    );
    let yi = Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, Expr::Var(r), Expr::Param(n)), Expr::Var(j));
    let body = if racy {
        let stepped =
            Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, Expr::load(Buf::Param(state), Expr::Var(j)), half()), xi);
        vec![
            Stmt::Store { buf: Buf::Param(state), index: Expr::Var(j), value: stepped },
            Stmt::Store { buf: Buf::Param(y), index: yi, value: Expr::load(Buf::Param(state), Expr::Var(j)) },
        ]
    } else {
        vec![
            Stmt::If {
                cond: Expr::bin(BinOp::Eq, Expr::Var(r), Expr::index(0)),
                then_body: vec![Stmt::Store { buf: Buf::Param(state), index: Expr::Var(j), value: half() }],
                else_body: Vec::new(),
            },
            Stmt::Store { buf: Buf::Param(y), index: yi, value: Expr::bin(BinOp::Mul, xi, half()) },
        ]
    };
    k.grid = vec![Expr::Param(rows)];
    k.body = vec![
        Stmt::Let { var: r, value: Expr::GroupId(0) },
        Stmt::ParFor { var: j, end: Expr::Param(n), team: None, body },
    ];
    k
}

fn inputs(len: usize, salt: u32) -> Vec<f32> {
    (0..len).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(salt) >> 8) as f32 / 65536.0 - 128.0).collect()
}

fn run_rows(rt: &HostRuntime, racy: bool, n: u64, rows: u64) -> Vec<f32> {
    let x = inputs((n * rows) as usize, 1);
    let mut state = inputs(n as usize, 2);
    let mut y = vec![0f32; (n * rows) as usize];
    let k = rt.compile(&rows_kernel(racy)).expect("compile");
    k.launch(&mut [
        Arg::buf(&x),
        Arg::buf_mut(&mut state),
        Arg::buf_mut(&mut y),
        Arg::scalar(Const::index(n)),
        Arg::scalar(Const::index(rows)),
    ])
    .expect("launch");
    y.extend(state);
    y
}

fn run_matvec(rt: &HostRuntime, k_len: u64, m: u64, rows: u64) -> Vec<f32> {
    let w = inputs((m * k_len) as usize, 3);
    let x = inputs((rows * k_len) as usize, 4);
    let mut y = vec![0f32; (rows * m) as usize];
    let kern = rt.compile(&matvec_tiled_rows()).expect("compile");
    kern.launch(&mut [
        Arg::buf(&w),
        Arg::buf(&x),
        Arg::buf_mut(&mut y),
        Arg::scalar(Const::index(k_len)),
        Arg::scalar(Const::index(m)),
        Arg::scalar(Const::index(rows)),
    ])
    .expect("launch");
    y
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn race_free_kernels_give_the_same_bytes_in_every_order() {
    let seq = HostRuntime::with_order(HostOrder::Sequential).unwrap();
    for seed in 1..=4 {
        let shuffled = HostRuntime::with_order(HostOrder::Shuffled { seed }).unwrap();
        assert_eq!(bits(&run_rows(&seq, false, 37, 9)), bits(&run_rows(&shuffled, false, 37, 9)), "seed {seed}");
        assert_eq!(bits(&run_matvec(&seq, 70, 5, 19)), bits(&run_matvec(&shuffled, 70, 5, 19)), "seed {seed}");
    }
}

#[test]
fn a_race_between_workgroups_shows_in_the_shuffled_order() {
    let seq = HostRuntime::with_order(HostOrder::Sequential).unwrap();
    let sequential = bits(&run_rows(&seq, true, 37, 9));
    let differs = (1..=4)
        .filter(|&seed| {
            bits(&run_rows(&HostRuntime::with_order(HostOrder::Shuffled { seed }).unwrap(), true, 37, 9)) != sequential
        })
        .count();
    assert!(differs > 0, "the carried state stepped by 9 workgroups gave the sequential bytes in every shuffled order");
}
