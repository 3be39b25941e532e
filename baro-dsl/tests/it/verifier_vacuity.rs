//! The verifier never passes on an empty proof: shapes that leave a reduction empty (or too
//! short for its order to matter) are an error naming the reduction, and the default shapes
//! follow a let-bound, divided length (`nb = k / 32`) so they do not leave it empty.

use baro_dsl::ir::{Access, BinOp, Buf, Expr, Kernel, ParamId, ParamKind, Reduce, ReduceOp, ScalarType, Sibling, Stmt};
use baro_dsl::schedule::{Combine, Schedule};
use baro_dsl::verify::{check_sibling, default_shapes, verify_kernel, ErrorKind, SiblingError, VerifyError};

const F32: ScalarType = ScalarType::F32;
const IDX: ScalarType = ScalarType::INDEX;

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::bin(op, a, b)
}

/// `nb = k / 32; [for r in 0..rows] y[r·n + o] = sum(b in 0..nb, schedule, x[r·k + b]·(q[o·nb + b] as f32))`,
/// one workgroup per output `o < n`, with `verify_shapes` listing `k` when `k_values` is given.
fn blocked_dot(rows: bool, schedule: Schedule, k_values: Option<Vec<u64>>) -> Kernel {
    let mut k = Kernel::new(if rows { "dot_rows" } else { "dot" });
    let q = k.add_param("q", ParamKind::Buffer { elem: ScalarType::I8, access: Access::Read });
    let x = k.add_param("x", ParamKind::Buffer { elem: F32, access: Access::Read });
    let y = k.add_param("y", ParamKind::Buffer { elem: F32, access: Access::ReadWrite });
    let kk = k.add_param("k", ParamKind::Scalar(IDX));
    let n = k.add_param("n", ParamKind::Scalar(IDX));
    let rp = rows.then(|| k.add_param("rows", ParamKind::Scalar(IDX)));
    let o = k.add_var("o", IDX, false);
    let nb = k.add_var("nb", IDX, false);
    let r = k.add_var("r", IDX, false);
    let b = k.add_var("b", IDX, false);
    let row = |r: Expr| bin(BinOp::Mul, r, Expr::Param(kk));
    let r_e = if rows { Expr::Var(r) } else { Expr::index(0) };
    let body = bin(
        BinOp::Mul,
        Expr::load(Buf::Param(x), bin(BinOp::Add, row(r_e.clone()), Expr::Var(b))),
        Expr::cast(
            F32,
            Expr::load(Buf::Param(q), bin(BinOp::Add, bin(BinOp::Mul, Expr::Var(o), Expr::Var(nb)), Expr::Var(b))),
        ),
    );
    let dot = Expr::Reduce(Box::new(Reduce { op: ReduceOp::Add, ty: F32, schedule, var: b, len: Expr::Var(nb), body }));
    let out = bin(BinOp::Add, bin(BinOp::Mul, r_e, Expr::Param(n)), Expr::Var(o));
    let store = Stmt::Store { buf: Buf::Param(y), index: out, value: dot };
    k.body = vec![
        Stmt::Let { var: o, value: Expr::GroupId(0) },
        Stmt::Let { var: nb, value: bin(BinOp::Div, Expr::Param(kk), Expr::index(32)) },
        match rp {
            Some(rp) => Stmt::For {
                var: r,
                start: Expr::index(0),
                end: Expr::Param(rp),
                step: Expr::index(1),
                body: vec![store],
            },
            None => store,
        },
    ];
    k.grid = vec![Expr::Param(n)];
    if let Some(rp) = rp {
        k.sibling = Some(Sibling::strided("dot", rp, vec![(x, Expr::Param(kk)), (y, Expr::Param(n))]));
    }
    if let Some(v) = k_values {
        k.verify_shapes.values.push((kk, v));
    }
    k
}

fn butterfly32() -> Schedule {
    Schedule::lanes(32, Combine::Butterfly)
}

fn only_vacuous(errs: &[VerifyError]) -> &VerifyError {
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].kind, ErrorKind::Vacuous, "{errs:?}");
    assert_eq!(errs[0].location.reduce, Some(0));
    &errs[0]
}

#[test]
fn empty_reductions_on_every_shape_are_rejected() {
    let k = blocked_dot(false, butterfly32(), Some(vec![1, 3]));
    let errs = verify_kernel(&k).expect_err("k ∈ {1, 3} makes k / 32 = 0: nothing is compared");
    let e = only_vacuous(&errs);
    println!("{e}");
    assert_eq!(
        e.message,
        "reduction #0 (`lanes(32, butterfly)` sum) never ran with 33 or more elements, so the check compared nothing that depends on its order: \
         expected a shape where it has more than 32 elements, so every lane's partial is non-empty and several are combined, \
         found at most 0 elements over the 4 shapes tried (k ∈ {1, 3}, n ∈ {1, 3}); \
         the values listed with verify(k = [1, 3]) cannot give it 33 elements; \
         list larger values with verify(k = [...]) in the #[kernel] attribute"
    );
}

#[test]
fn empty_reductions_fail_the_sibling_check_too() {
    let (rows, m1) = (blocked_dot(true, butterfly32(), Some(vec![1, 3])), blocked_dot(false, butterfly32(), None));
    let err = check_sibling(&rows, &m1).expect_err("every reduction of the rows kernel is empty");
    let SiblingError::Invalid(errs) = &err else { panic!("expected the vacuity error, got {err}") };
    let e = only_vacuous(errs);
    assert_eq!(e.kernel, "dot_rows");
    assert!(e.message.contains("over the 16 shapes tried (k ∈ {1, 3}, n ∈ {1, 3}, rows ∈ {1, 2, 3, 5})"), "{e}");
    assert!(e.message.ends_with("list larger values with verify(k = [...]) in the #[kernel] attribute"), "{e}");
}

#[test]
fn a_lanes_reduction_must_run_past_its_lane_count() {
    // nb ∈ {2, 3}: never empty, but no lane ever sums two elements.
    let k = blocked_dot(false, butterfly32(), Some(vec![64, 96]));
    let e = verify_kernel(&k).expect_err("nb ≤ 3 never exercises a lane's sequential partial");
    let e = only_vacuous(&e);
    assert!(e.message.contains("found at most 3 elements over the 4 shapes tried (k ∈ {64, 96}, n ∈ {1, 3})"), "{e}");
    // A sequential reduction needs only two elements.
    verify_kernel(&blocked_dot(false, Schedule::Sequential, Some(vec![64, 96]))).expect("seq with nb ∈ {2, 3}");
    // One shape past the lane count is enough.
    verify_kernel(&blocked_dot(false, butterfly32(), Some(vec![1, 3, 32 * 33]))).expect("nb = 33 once");
}

#[test]
fn default_shapes_make_a_divided_let_bound_length_ragged() {
    let k = blocked_dot(false, butterfly32(), None);
    let ks: Vec<u64> =
        default_shapes(&k).iter().filter_map(|s| s.iter().find(|(p, _)| *p == ParamId(3)).map(|(_, v)| *v)).collect();
    let nbs: Vec<u64> = ks.iter().map(|k| k / 32).collect();
    assert!(nbs.iter().all(|&nb| nb > 0), "an empty reduction among {ks:?}");
    assert!(nbs.contains(&31) && nbs.contains(&33), "no length ragged against 32 lanes among {nbs:?}");
    assert!(ks.iter().any(|k| k % 32 != 0), "every k in {ks:?} is a multiple of 32");
    let proof = verify_kernel(&k).expect("default shapes");
    assert!(proof.shapes >= 8 && proof.regions_checked > 0, "{proof:?}");
    let (rows, m1) = (blocked_dot(true, butterfly32(), None), blocked_dot(false, butterfly32(), None));
    let proof = check_sibling(&rows, &m1).expect("default shapes");
    assert!(proof.shapes > 1 && proof.outputs > 0, "{proof:?}");
}

#[test]
fn a_constant_length_is_exempt_once_it_ran() {
    // sum(j in 0..16, lanes(32)): every launch has the 16 elements the check saw.
    let mut k = blocked_dot(false, butterfly32(), None);
    let Stmt::Store { value: Expr::Reduce(r), .. } = &mut k.body[2] else {
        panic!("expected the store of the reduction")
    };
    r.len = Expr::index(16);
    verify_kernel(&k).expect("a constant 16-element reduction");
    // ... but not when it never ran: an inner constant reduction under an always-empty outer one.
    let mut k = blocked_dot(false, Schedule::Sequential, Some(vec![1, 3]));
    let v = k.add_var("j", IDX, false);
    let Stmt::Store { value: Expr::Reduce(r), .. } = &mut k.body[2] else {
        panic!("expected the store of the reduction")
    };
    let inner = Reduce {
        op: ReduceOp::Add,
        ty: F32,
        schedule: Schedule::Sequential,
        var: v,
        len: Expr::index(4),
        body: Expr::f32(1.0),
    };
    r.body = bin(BinOp::Mul, r.body.clone(), Expr::Reduce(Box::new(inner)));
    let errs = verify_kernel(&k).expect_err("both reductions never ran");
    assert_eq!(
        errs.iter().map(|e| (e.kind, e.location.reduce)).collect::<Vec<_>>(),
        vec![(ErrorKind::Vacuous, Some(0)), (ErrorKind::Vacuous, Some(1))]
    );
    assert!(errs[1].message.contains("found that it never ran"), "{}", errs[1]);
    assert!(errs[1].message.ends_with("verify(k = [...]) in the #[kernel] attribute"), "{}", errs[1]);
}
