//! Well-formedness, undeclared reductions and the schedule-implementation check on
//! hand-written and hand-broken IR.

use baro_dsl::ir::{Access, BinOp, Buf, Const, Expr, Kernel, ParamKind, ScalarType, Stmt, Var};
use baro_dsl::lanes;
use baro_dsl::testkernels::matvec;
use baro_dsl::verify::{check_wellformed, verify_kernel, ErrorKind, VerifyError};

const F32: ScalarType = ScalarType::F32;
const IDX: ScalarType = ScalarType::INDEX;

/// `x: &[f32], y: &mut [f32], n: usize`, one workgroup, body to be filled in.
fn base() -> Kernel {
    let mut k = Kernel::new("t");
    k.add_param("x", ParamKind::Buffer { elem: F32, access: Access::Read });
    k.add_param("y", ParamKind::Buffer { elem: F32, access: Access::ReadWrite });
    k.add_param("n", ParamKind::Scalar(IDX));
    k.grid = vec![Expr::index(1)];
    k
}

fn x_at(i: Expr) -> Expr {
    Expr::load(Buf::Param(baro_dsl::ir::ParamId(0)), i)
}
fn store_y(v: Expr) -> Stmt {
    Stmt::Store { buf: Buf::Param(baro_dsl::ir::ParamId(1)), index: Expr::index(0), value: v }
}

/// `let mut acc = init; for i in 0..n { acc = update(acc, x[i]) }; y[0] = acc`.
fn accumulate(update: impl Fn(Expr, Expr) -> Expr, init: f32) -> Kernel {
    let mut k = base();
    let acc = k.add_var("acc", F32, true);
    let i = k.add_var("i", IDX, false);
    k.body = vec![
        Stmt::Let { var: acc, value: Expr::f32(init) },
        Stmt::For {
            var: i,
            start: Expr::index(0),
            end: Expr::Param(baro_dsl::ir::ParamId(2)),
            step: Expr::index(1),
            body: vec![Stmt::Assign { var: acc, value: update(Expr::Var(acc), x_at(Expr::Var(i))) }],
        },
        store_y(Expr::Var(acc)),
    ];
    k
}

fn kinds(e: &[VerifyError]) -> Vec<ErrorKind> {
    e.iter().map(|x| x.kind).collect()
}

#[test]
fn undeclared_float_accumulation_is_rejected_at_its_statement() {
    let k = accumulate(|a, x| Expr::bin(BinOp::Add, a, x), 0.0);
    let errs = check_wellformed(&k).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::UndeclaredReduction]);
    assert_eq!(errs[0].location.stmt_path, vec![1, 0]);
    assert_eq!(
        errs[0].message,
        "float accumulation into `acc` inside a loop is not a declared reduction: write it as sum!(..., order = ...)"
    );
    assert_eq!(kinds(&verify_kernel(&k).unwrap_err()), vec![ErrorKind::UndeclaredReduction]);
}

#[test]
fn running_max_is_accepted() {
    let k = accumulate(|a, x| Expr::bin(BinOp::Max, a, x), f32::NEG_INFINITY);
    assert_eq!(check_wellformed(&k), Ok(()));
    let proof = verify_kernel(&k).expect("a running max needs no schedule");
    assert!(proof.shapes >= 2);
}

#[test]
fn bad_variable_id_is_malformed() {
    let mut k = base();
    k.body = vec![store_y(Expr::Var(Var(99)))];
    let errs = check_wellformed(&k).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::Malformed]);
    assert!(errs[0].message.contains("variable v99 does not exist"), "{}", errs[0].message);
}

#[test]
fn type_mismatch_and_use_before_definition_are_all_reported() {
    let mut k = base();
    let a = k.add_var("a", F32, false);
    let b = k.add_var("b", F32, false);
    k.body = vec![
        Stmt::Let { var: a, value: Expr::index(3) },
        store_y(Expr::Var(b)),
        Stmt::Let { var: b, value: Expr::f32(1.0) },
        store_y(Expr::bin(BinOp::Add, Expr::Var(a), Expr::c(Const::new(ScalarType::I32, 1)))),
    ];
    let errs = check_wellformed(&k).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::Malformed; 3], "{errs:?}");
    assert_eq!(errs[0].message, "let value has type usize: expected f32");
    assert!(errs[1].message.contains("`b` (v1) is used before it is defined"), "{}", errs[1].message);
    assert!(errs[2].message.contains("both operands must have one type"), "{}", errs[2].message);
    assert_eq!(errs[2].location.stmt_path, vec![3]);
}

#[test]
fn store_into_read_only_buffer_is_malformed() {
    let mut k = base();
    k.body =
        vec![Stmt::Store { buf: Buf::Param(baro_dsl::ir::ParamId(0)), index: Expr::index(0), value: Expr::f32(0.0) }];
    let errs = check_wellformed(&k).unwrap_err();
    assert!(errs[0].message.contains("store into `x`, which is read-only"), "{}", errs[0].message);
}

#[test]
fn shuffle_outside_lanes_is_malformed() {
    let mut k = base();
    k.body = vec![store_y(Expr::ShuffleXor { value: Box::new(x_at(Expr::index(0))), mask: 1 })];
    let errs = check_wellformed(&k).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::Malformed]);
    assert_eq!(errs[0].message, "shuffle_xor outside a lanes region");
}

#[test]
fn barrier_and_shuffle_under_lane_dependent_if_are_non_uniform() {
    let mut k = base();
    let lane = k.add_var("lane", IDX, false);
    let p = k.add_var("p", F32, false);
    let lane0 = Expr::bin(BinOp::Eq, Expr::Var(lane), Expr::index(0));
    let shuffled = Expr::ShuffleXor { value: Box::new(x_at(Expr::Var(lane))), mask: 2 };
    k.body = vec![Stmt::Lanes {
        lane,
        count: 4,
        implements: None,
        body: vec![Stmt::If {
            cond: lane0,
            then_body: vec![Stmt::Barrier, Stmt::Let { var: p, value: shuffled }],
            else_body: vec![],
        }],
    }];
    let errs = check_wellformed(&k).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::NonUniformSync, ErrorKind::NonUniformSync], "{errs:?}");
    assert_eq!(errs[0].location.stmt_path, vec![0, 0, 0]);
    assert!(errs[0].message.starts_with("barrier under lane-dependent control flow"));
    assert!(errs[1].message.starts_with("shuffle_xor under lane-dependent control flow"));
}

#[test]
fn grid_and_mask_limits_are_checked() {
    let mut k = base();
    k.grid = Vec::new();
    let lane = k.add_var("lane", IDX, false);
    let p = k.add_var("p", F32, false);
    k.body = vec![Stmt::Lanes {
        lane,
        count: 4,
        implements: None,
        body: vec![Stmt::Let { var: p, value: Expr::ShuffleXor { value: Box::new(Expr::f32(1.0)), mask: 4 } }],
    }];
    let errs = check_wellformed(&k).unwrap_err();
    let msgs: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        msgs,
        vec!["grid has 0 axes: expected 1 to 3", "shuffle_xor mask 4 in a region of 4 lanes: expected a mask below 4"]
    );
}

/// The expanded matvec with its lanes region's body rewritten by `f`.
fn broken_matvec(f: impl Fn(&mut Vec<Stmt>)) -> Kernel {
    let mut x = lanes::expand(&matvec()).unwrap();
    for s in &mut x.body {
        if let Stmt::Lanes { body, .. } = s {
            f(body);
        }
    }
    x
}

fn shuffle_positions(body: &[Stmt]) -> Vec<usize> {
    let is_shuffle = |e: &Expr| matches!(e, Expr::ShuffleXor { .. });
    body.iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Stmt::Assign { value, .. } if value.any(&is_shuffle)))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn correct_expansion_passes_as_input() {
    let proof = verify_kernel(&broken_matvec(|_| {})).expect("unbroken expansion");
    assert!(proof.regions_checked > 0);
}

#[test]
fn swapped_shuffle_steps_are_caught() {
    let k = broken_matvec(|body| {
        let at = shuffle_positions(body);
        assert_eq!(at.len(), 5, "butterfly over 32 lanes has 5 steps");
        body.swap(at[0], at[1]);
    });
    let errs = verify_kernel(&k).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::ScheduleNotImplemented]);
    assert!(
        errs[0].message.starts_with("lanes region does not compute its declared `lanes(32, butterfly)` sum"),
        "{}",
        errs[0].message
    );
    assert!(errs[0].message.contains("first difference"), "{}", errs[0].message);
}

#[test]
fn changed_mask_is_caught() {
    let k = broken_matvec(|body| {
        let at = shuffle_positions(body)[0];
        if let Stmt::Assign { value: Expr::Binary { rhs, .. }, .. } = &mut body[at] {
            if let Expr::ShuffleXor { mask, .. } = &mut **rhs {
                assert_eq!(*mask, 16);
                *mask = 4;
            }
        }
    });
    let errs = verify_kernel(&k).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::ScheduleNotImplemented]);
}

/// An `fma_sum` element must be a product (its two factors are what each partial takes in by
/// fma); `x[i]` alone is malformed, `x[i] * x[i]` verifies, through the expanded code too.
#[test]
fn an_fma_sum_of_a_non_product_is_malformed() {
    use baro_dsl::ir::{Reduce, ReduceOp};
    use baro_dsl::Schedule;
    let fused = |body: fn(Var) -> Expr| {
        let mut k = base();
        let i = k.add_var("i", IDX, false);
        let r = Reduce {
            op: ReduceOp::FmaSum,
            ty: F32,
            schedule: "lanes(4, butterfly)".parse::<Schedule>().unwrap(),
            var: i,
            len: Expr::Param(baro_dsl::ir::ParamId(2)),
            body: body(i),
        };
        k.body = vec![store_y(Expr::Reduce(Box::new(r)))];
        k
    };
    let errs = check_wellformed(&fused(|i| x_at(Expr::Var(i)))).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::Malformed]);
    assert_eq!(errs[0].message, "an `fma_sum` element must be a product `a * b`, found `load(p0:x, v0:i)`");
    let ok = fused(|i| Expr::bin(BinOp::Mul, x_at(Expr::Var(i)), x_at(Expr::Var(i))));
    let proof = verify_kernel(&ok).expect("an fma_sum of products verifies");
    assert!(proof.regions_checked > 0, "{proof:?}");
}

/// The expansion of an `fma_sum` is checked against its fused tree: the fused matvec's
/// expansion verifies, and the same code with each lane's `fma(x, w, acc)` written as
/// `acc + x * w` (the plain sum's update) does not implement its declared `fma_sum`.
#[test]
fn an_fma_sum_expanded_as_multiply_and_add_is_caught() {
    let k = baro_dsl::testkernels::matvec_fused();
    let mut x = lanes::expand(&k).unwrap();
    assert!(verify_kernel(&x).expect("the expansion as written").regions_checked > 0);
    fn unfuse(body: &mut [Stmt], n: &mut usize) {
        for s in body {
            match s {
                Stmt::Assign { var, value } => {
                    if let Expr::Fma { a, b, c } = value.clone() {
                        assert_eq!(*c, Expr::Var(*var), "a lane's update is fma(x, w, acc)");
                        *value = Expr::bin(BinOp::Add, *c, Expr::bin(BinOp::Mul, *a, *b));
                        *n += 1;
                    }
                }
                Stmt::For { body, .. } | Stmt::Lanes { body, .. } => unfuse(body, n),
                _ => {}
            }
        }
    }
    let mut n = 0;
    unfuse(&mut x.body, &mut n);
    assert_eq!(n, 1, "one fused update in the lane loop");
    let errs = verify_kernel(&x).unwrap_err();
    assert_eq!(kinds(&errs), vec![ErrorKind::ScheduleNotImplemented]);
    assert!(
        errs[0].message.starts_with("lanes region does not compute its declared `lanes(32, butterfly)` fma_sum"),
        "{}",
        errs[0].message
    );
}
