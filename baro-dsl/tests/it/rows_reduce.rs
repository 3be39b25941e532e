//! Reductions over rows (`Stmt::LetRows`): one reduction with R results, each in its own
//! one-row order. A rows kernel built on one is proven the sibling of its m=1 kernel for every
//! schedule kind and op; its expansion loads the weights once per element for all R rows;
//! expansions altered so that one row's order differs, or two rows trade elements, are
//! rejected naming the row; a kernel storing its rows swapped fails the sibling check.

use baro_dsl::ir::{
    Access, BinOp, Buf, Expr, Kernel, ParamKind, Reduce, ReduceOp, ScalarType as T, Sibling, Stmt, Var,
};
use baro_dsl::lanes;
use baro_dsl::schedule::Schedule;
use baro_dsl::verify::{check_expanded, check_sibling, verify_kernel, ErrorKind, SiblingError};

/// Rows per reduction.
const R: u64 = 4;

fn ld(b: baro_dsl::ir::ParamId, i: Expr) -> Expr {
    Expr::load(Buf::Param(b), i)
}
fn add(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Add, a, b)
}
fn mul(a: Expr, b: Expr) -> Expr {
    Expr::bin(BinOp::Mul, a, b)
}

/// The element of `y[o]` for input `x` at `xb`: `x[xb + i] · w[o·k + i]` for a plain schedule;
/// for `nested`, a q8-like unit: `w_scale(b) · Σ_seq(j < 8) unpack(w[b·8 + j]) · x[xb + b·8 + j]`
/// over `b < k / 8` (the weight's unpacking a select on the block's parity).
fn element(k: &mut Kernel, op: ReduceOp, nested: bool, xb: Expr) -> (Var, Expr, Expr) {
    let (x, w, kk) = (k.param_by_name("x").unwrap(), k.param_by_name("w").unwrap(), k.param_by_name("k").unwrap());
    let o = Expr::GroupId(0);
    let i = k.add_var("i", T::INDEX, false);
    if !nested {
        let body = mul(ld(x, add(xb, Expr::Var(i))), ld(w, add(mul(o, Expr::Param(kk)), Expr::Var(i))));
        return (i, Expr::Param(kk), body);
    }
    let j = k.add_var("j", T::INDEX, false);
    let row_w = mul(o, Expr::Param(kk));
    let at = add(add(row_w.clone(), mul(Expr::Var(i), Expr::index(8))), Expr::Var(j));
    let odd = Expr::bin(BinOp::Eq, Expr::bin(BinOp::Rem, Expr::Var(i), Expr::index(2)), Expr::index(1));
    let q = Expr::select(odd, Expr::un(baro_dsl::ir::UnOp::Neg, ld(w, at.clone())), ld(w, at));
    let xi = ld(x, add(xb, add(mul(Expr::Var(i), Expr::index(8)), Expr::Var(j))));
    let inner_op = if op == ReduceOp::FmaSum { ReduceOp::FmaSum } else { ReduceOp::Add };
    let inner = Reduce {
        op: inner_op,
        ty: T::F32,
        schedule: Schedule::Sequential,
        var: j,
        len: Expr::index(8),
        body: mul(q, xi),
    };
    let scale = ld(w, add(row_w, mul(Expr::Var(i), Expr::index(8))));
    let len = Expr::bin(BinOp::Div, Expr::Param(kk), Expr::index(8));
    (i, len, mul(scale, Expr::Reduce(Box::new(inner))))
}

fn params(k: &mut Kernel) {
    k.add_param("x", ParamKind::Buffer { elem: T::F32, access: Access::Read });
    k.add_param("w", ParamKind::Buffer { elem: T::F32, access: Access::Read });
    k.add_param("y", ParamKind::Buffer { elem: T::F32, access: Access::ReadWrite });
    k.add_param("k", ParamKind::Scalar(T::INDEX));
    k.add_param("n", ParamKind::Scalar(T::INDEX));
}

/// `y[o] = op(i < k, order, element)`, one output per workgroup.
fn m1(op: ReduceOp, schedule: &Schedule, nested: bool) -> Kernel {
    let mut k = Kernel::new("dot_m1");
    params(&mut k);
    let (y, n) = (k.param_by_name("y").unwrap(), k.param_by_name("n").unwrap());
    k.grid = vec![Expr::Param(n)];
    let (var, len, body) = element(&mut k, op, nested, Expr::index(0));
    let r = Reduce { op, ty: T::F32, schedule: schedule.clone(), var, len, body };
    k.body = vec![Stmt::Store { buf: Buf::Param(y), index: Expr::GroupId(0), value: Expr::Reduce(Box::new(r)) }];
    k
}

/// `dot_m1` over `m` rows, R rows per workgroup along axis 1, all R in one reduction over
/// rows (a row past the last reads the last row's x and is not stored). `store_row(j)` says
/// which row result j is stored to (the identity unless a test swaps them).
fn rows(op: ReduceOp, schedule: &Schedule, nested: bool, store_row: impl Fn(u64) -> u64) -> Kernel {
    let mut k = Kernel::new("dot_rows");
    params(&mut k);
    let m = k.add_param("m", ParamKind::Scalar(T::INDEX));
    let (x, y, kk, n) = (
        k.param_by_name("x").unwrap(),
        k.param_by_name("y").unwrap(),
        k.param_by_name("k").unwrap(),
        k.param_by_name("n").unwrap(),
    );
    k.grid = vec![Expr::Param(n), Expr::bin(BinOp::Div, add(Expr::Param(m), Expr::index(R - 1)), Expr::index(R))];
    k.sibling = Some(Sibling::strided("dot_m1", m, vec![(x, Expr::Param(kk)), (y, Expr::Param(n))]));
    let r0 = k.add_var("r0", T::INDEX, false);
    let row = k.add_var("row", T::INDEX, false);
    let last = Expr::bin(BinOp::Sub, Expr::Param(m), Expr::index(1));
    let xb = mul(Expr::bin(BinOp::Min, add(Expr::Var(r0), Expr::Var(row)), last), Expr::Param(kk));
    let (var, len, body) = element(&mut k, op, nested, xb);
    let vars: Vec<Var> = (0..R).map(|j| k.add_var(format!("y{j}"), T::F32, false)).collect();
    let r = Reduce { op, ty: T::F32, schedule: schedule.clone(), var, len, body };
    let mut body = vec![
        Stmt::Let { var: r0, value: mul(Expr::GroupId(1), Expr::index(R)) },
        Stmt::LetRows { vars: vars.clone(), row, value: Expr::Reduce(Box::new(r)) },
    ];
    for j in 0..R {
        let at = add(Expr::Var(r0), Expr::index(store_row(j)));
        body.push(Stmt::If {
            cond: Expr::bin(BinOp::Lt, at.clone(), Expr::Param(m)),
            then_body: vec![Stmt::Store {
                buf: Buf::Param(y),
                index: add(mul(at, Expr::Param(n)), Expr::GroupId(0)),
                value: Expr::Var(vars[j as usize]),
            }],
            else_body: vec![],
        });
    }
    k.body = body;
    k
}

const SCHEDULES: [&str; 6] = [
    "lanes(32, butterfly)",
    "seq",
    "lanes(4, seq)",
    "lanes(8, pairwise)",
    "chunked(8, seq)",
    "blocked(8, lanes(4, butterfly))",
];

fn cases() -> Vec<(ReduceOp, Schedule, bool)> {
    let mut out = Vec::new();
    for s in SCHEDULES {
        for op in [ReduceOp::Add, ReduceOp::FmaSum, ReduceOp::Max] {
            out.push((op, s.parse().unwrap(), false));
        }
    }
    for s in ["lanes(32, butterfly)", "seq"] {
        for op in [ReduceOp::Add, ReduceOp::FmaSum] {
            out.push((op, s.parse().unwrap(), true));
        }
    }
    out
}

#[test]
fn rows_kernels_on_a_reduction_over_rows_are_proven_siblings() {
    let mut proven = 0;
    for (op, s, nested) in cases() {
        let (a, b) = (rows(op, &s, nested, |j| j), m1(op, &s, nested));
        let what = format!("{} {s} nested={nested}", op.name());
        verify_kernel(&a)
            .unwrap_or_else(|e| panic!("{what}: {}", e.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("\n")));
        let p = check_sibling(&a, &b).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(p.shapes >= 8 && p.outputs > 0, "{what}: {p:?}");
        proven += 1;
    }
    assert_eq!(proven, 22);
}

/// Loads of `w` in the expanded kernel: once per element for all R rows, where R one-row
/// reductions would hold R.
#[test]
fn expansion_loads_each_weight_once_for_all_rows() {
    for (op, s, nested) in cases() {
        let x = lanes::expand(&rows(op, &s, nested, |j| j)).unwrap();
        let text = x.to_string();
        let w_loads = text.matches("load(p1:w").count();
        let x_loads = text.matches("load(p0:x").count();
        // A lane region's claim repeats the source reduction's loads once.
        let claims = if s.lane_count() > 1 { 1 } else { 0 };
        let (w_src, x_src) = if nested { (3, 1) } else { (1, 1) };
        assert_eq!(w_loads, w_src * (1 + claims), "{} {s} nested={nested}: weights\n{text}", op.name());
        assert_eq!(x_loads, x_src * (R as usize + claims), "{} {s} nested={nested}: inputs\n{text}", op.name());
    }
}

/// A row-independent part of a per-row index that is plain arithmetic (`i·8 + j` inside the
/// nested cases' `x[xb_r + i·8 + j]`) stays written in the index, once per row, rather than
/// bound to a `let`: the GPU lowering can only take an access out of its loop's bounds checks
/// when the index reads as `a + c·i` in the loop variable, and a `let` defined in the loop
/// reads as a value the loop changes. Every shared `let` the expansion makes holds a load.
#[test]
fn shared_index_arithmetic_stays_in_the_index() {
    let mut nested_seen = 0;
    for (op, s, nested) in cases() {
        let text = lanes::expand(&rows(op, &s, nested, |j| j)).unwrap().to_string();
        for line in text.lines().filter(|l| l.contains(":shared = ")) {
            assert!(
                line.contains("load("),
                "{} {s} nested={nested}: a shared let of arithmetic only: {line}",
                op.name()
            );
        }
        if nested {
            assert!(text.contains("add(mul(v"), "{} {s}: the per-row index keeps i·8 + j\n{text}", op.name());
            nested_seen += 1;
        }
    }
    assert_eq!(nested_seen, 4);
}

/// Finds the lane region of a reduction over rows and applies `f` to its body and partials.
fn alter_region(k: &mut Kernel, f: &dyn Fn(&mut Vec<Stmt>, &[Var])) -> bool {
    fn walk(b: &mut [Stmt], f: &dyn Fn(&mut Vec<Stmt>, &[Var])) -> bool {
        for s in b {
            match s {
                Stmt::Lanes { implements: Some(imp), body, .. } if imp.row.is_some() => {
                    let parts: Vec<Var> = body
                        .iter()
                        .filter_map(|s| if let Stmt::Let { var, .. } = s { Some(*var) } else { None })
                        .collect();
                    f(body, &parts);
                    return true;
                }
                Stmt::For { body, .. } | Stmt::ParFor { body, .. } | Stmt::Lanes { body, .. } => {
                    if walk(body, f) {
                        return true;
                    }
                }
                Stmt::If { then_body, else_body, .. } => {
                    if walk(then_body, f) || walk(else_body, f) {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    }
    walk(&mut k.body, f)
}

fn rename(e: &Expr, from: Var, to: Var) -> Expr {
    let text_free = |e: &Expr| -> Expr {
        match e {
            Expr::Var(v) if *v == from => Expr::Var(to),
            other => other.clone(),
        }
    };
    match e {
        Expr::Binary { op, lhs, rhs } => Expr::bin(*op, rename(lhs, from, to), rename(rhs, from, to)),
        Expr::Fma { a, b, c } => Expr::fma(rename(a, from, to), rename(b, from, to), rename(c, from, to)),
        other => text_free(other),
    }
}

/// Index of the update of partial `p` in the strided loop's body.
fn update_of(body: &[Stmt], p: Var) -> usize {
    body.iter().position(|s| matches!(s, Stmt::Assign { var, .. } if *var == p)).expect("an update of the partial")
}

#[test]
fn expansions_where_one_row_differs_are_rejected_naming_the_row() {
    type Mutation = (&'static str, fn(&mut Vec<Stmt>, &[Var]));
    let mutations: [Mutation; 3] = [
        ("rows 0 and 1 trade elements", |body, parts| {
            let Some(Stmt::For { body: inner, .. }) = body.iter_mut().find(|s| matches!(s, Stmt::For { .. })) else {
                panic!("no strided loop")
            };
            let (a, b) = (update_of(inner, parts[0]), update_of(inner, parts[1]));
            let (Stmt::Assign { value: va, .. }, Stmt::Assign { value: vb, .. }) = (inner[a].clone(), inner[b].clone())
            else {
                unreachable!()
            };
            inner[a] = Stmt::Assign { var: parts[0], value: rename(&vb, parts[1], parts[0]) };
            inner[b] = Stmt::Assign { var: parts[1], value: rename(&va, parts[0], parts[1]) };
        }),
        ("row 2 takes its operands in another order", |body, parts| {
            let Some(Stmt::For { body: inner, .. }) = body.iter_mut().find(|s| matches!(s, Stmt::For { .. })) else {
                panic!("no strided loop")
            };
            let at = update_of(inner, parts[2]);
            match &mut inner[at] {
                Stmt::Assign { value: Expr::Binary { lhs, rhs, .. }, .. } => std::mem::swap(lhs, rhs),
                // `fma(a, b, p)` becomes `fma(b, a, p)`: the same value, another operation.
                Stmt::Assign { value: Expr::Fma { a, b, .. }, .. } => std::mem::swap(a, b),
                _ => panic!("expected `partial = partial op element` or an fma"),
            }
        }),
        ("row 3 combines its lanes in another order", |body, parts| {
            let steps: Vec<usize> =
                (0..body.len()).filter(|&i| matches!(&body[i], Stmt::Assign { var, .. } if *var == parts[3])).collect();
            assert!(steps.len() >= 2, "expected two or more combine steps");
            body.swap(steps[0], steps[1]);
        }),
    ];
    let mut rejected = 0;
    for (what, f) in mutations {
        for op in [ReduceOp::Add, ReduceOp::FmaSum] {
            let s: Schedule = "lanes(32, butterfly)".parse().unwrap();
            let src = rows(op, &s, false, |j| j);
            let mut x = lanes::expand(&src).unwrap();
            assert!(alter_region(&mut x, &|b, p| f(b, p)), "{what}: no region over rows");
            let errs = check_expanded(&src, &x).expect_err(what);
            let e = &errs[0];
            println!("{what} ({}): {e}", op.name());
            assert_eq!(e.kind, ErrorKind::ScheduleNotImplemented, "{what}: {e}");
            let row = what.split_whitespace().nth(1).unwrap().parse::<u32>().unwrap();
            assert!(e.message.contains(&format!("(row {row} of {R})")), "{what}: {e}");
            rejected += 1;
        }
    }
    assert_eq!(rejected, 6);
}

#[test]
fn rows_stored_swapped_are_not_a_sibling() {
    let s: Schedule = "lanes(32, butterfly)".parse().unwrap();
    let swapped = rows(ReduceOp::Add, &s, false, |j| [1, 0, 2, 3][j as usize]);
    match check_sibling(&swapped, &m1(ReduceOp::Add, &s, false)) {
        Err(SiblingError::Arithmetic(m)) => {
            println!("{}", m.first_difference);
            assert_eq!((m.buffer.as_str(), m.row), ("y", 0));
        }
        other => panic!("expected an arithmetic mismatch, found {other:?}"),
    }
    // An unswapped kernel whose reduction's order differs from the m=1 kernel's fails at the
    // schedule check, before any arithmetic.
    let other: Schedule = "lanes(16, butterfly)".parse().unwrap();
    match check_sibling(&rows(ReduceOp::Add, &other, false, |j| j), &m1(ReduceOp::Add, &s, false)) {
        Err(SiblingError::Schedule { detail, .. }) => assert_eq!(detail, "lane count 16 here, 32 in `dot_m1`"),
        other => panic!("expected a schedule mismatch, found {other:?}"),
    }
}

/// The host JIT runs the rows kernel and the m=1 kernel once per row: byte-equal outputs at
/// row counts that are not multiples of R and lengths that are not multiples of the lanes.
#[cfg(feature = "llvm")]
#[test]
fn host_rows_kernel_equals_m1_per_row_byte_for_byte() {
    use crate::host_common::{compile, Rng};
    use baro_dsl::runtime::Arg;
    let mut compared = 0;
    for (op, s, nested) in cases() {
        let (a, b) = (compile(&rows(op, &s, nested, |j| j)), compile(&m1(op, &s, nested)));
        for (m, kk, n) in [(1usize, 8usize, 3usize), (3, 40, 2), (5, 72, 3), (9, 264, 2)] {
            let mut rng = Rng(0x9e37 + (m * 131 + kk) as u64);
            let (x, w) = (rng.vec_f32(m * kk), rng.vec_f32(n * kk));
            let mut y = vec![f32::NAN; m * n];
            a.launch(&mut [
                Arg::buf(&x),
                Arg::buf(&w),
                Arg::buf_mut(&mut y),
                Arg::from(kk),
                Arg::from(n),
                Arg::from(m),
            ])
            .unwrap();
            for r in 0..m {
                let mut y1 = vec![f32::NAN; n];
                b.launch(&mut [
                    Arg::buf(&x[r * kk..(r + 1) * kk]),
                    Arg::buf(&w),
                    Arg::buf_mut(&mut y1),
                    Arg::from(kk),
                    Arg::from(n),
                ])
                .unwrap();
                let (got, want): (Vec<u32>, Vec<u32>) = (
                    y[r * n..(r + 1) * n].iter().map(|v| v.to_bits()).collect(),
                    y1.iter().map(|v| v.to_bits()).collect(),
                );
                assert_eq!(got, want, "{} {s} nested={nested} m={m} k={kk} row {r}", op.name());
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 22 * 18);
}

/// Malformed reductions over rows are reported, each with what was expected: a value that
/// is not a reduction, results of the wrong type, no results, a row read outside its
/// reduction, a row defined twice.
#[test]
fn malformed_reductions_over_rows_are_reported() {
    use baro_dsl::verify::check_wellformed;
    let s: Schedule = "seq".parse().unwrap();
    let base = || rows(ReduceOp::Add, &s, false, |j| j);
    let errors = |k: &Kernel| {
        check_wellformed(k).expect_err("malformed").iter().map(|e| e.message.clone()).collect::<Vec<_>>().join("\n")
    };
    fn at(k: &mut Kernel) -> &mut Stmt {
        k.body.iter_mut().find(|s| matches!(s, Stmt::LetRows { .. })).unwrap()
    }

    let mut k = base();
    if let Stmt::LetRows { value, .. } = at(&mut k) {
        *value = Expr::f32(1.0);
    }
    assert!(
        errors(&k).contains("the value of a `let [..] = rows(..)` is `1.0:f32`: expected a reduction"),
        "{}",
        errors(&k)
    );

    let mut k = base();
    let wrong = k.add_var("wrong", T::I32, false);
    if let Stmt::LetRows { vars, .. } = at(&mut k) {
        vars[1] = wrong;
    }
    assert!(
        errors(&k).contains("result `wrong` of a reduction over rows has type i32: expected f32"),
        "{}",
        errors(&k)
    );

    let mut k = base();
    if let Stmt::LetRows { vars, .. } = at(&mut k) {
        vars.clear();
    }
    assert!(errors(&k).contains("a reduction over rows with no results: expected at least one"), "{}", errors(&k));

    let mut k = base();
    let row = match at(&mut k) {
        Stmt::LetRows { row, .. } => *row,
        _ => unreachable!(),
    };
    k.body.push(Stmt::Store {
        buf: Buf::Param(k.param_by_name("y").unwrap()),
        index: Expr::Var(row),
        value: Expr::f32(0.0),
    });
    assert!(errors(&k).contains("variable `row` (v1) is used before it is defined"), "{}", errors(&k));

    let mut k = base();
    let dup = at(&mut k).clone();
    k.body.push(dup);
    assert!(errors(&k).contains("is defined more than once"), "{}", errors(&k));
}
