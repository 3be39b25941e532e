//! The IR text form round-trips: hand-written kernels covering every statement, expression
//! and declaration, the output of `lanes::expand` for every schedule kind, and exact error
//! messages (line, column, expected, found) for malformed text.

use baro_dsl::ir::{
    Access, BinOp, Buf, Const, Expr, Implements, Kernel, MathFn, ParamKind, ParseError, Reduce, ReduceOp, ScalarType,
    Sibling, Stmt, UnOp, VerifyShapes, MAX_NESTING,
};
use baro_dsl::schedule::{Combine, Schedule};

fn assert_round_trip(k: &Kernel) {
    let text = k.to_string();
    let back = Kernel::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, k, "parse(print(k)) differs from k:\n{text}");
    assert_eq!(back.to_string(), text);
}

/// A kernel that uses every declaration, statement, expression and constant form.
fn every_variant() -> Kernel {
    use ScalarType as T;
    let mut k = Kernel::new("every_variant");
    let x = k.add_param("x", ParamKind::Buffer { elem: T::F32, access: Access::Read });
    let y = k.add_param("y", ParamKind::Buffer { elem: T::F32, access: Access::ReadWrite });
    let n = k.add_param("n", ParamKind::Scalar(T::INDEX));
    let h = k.add_param("h", ParamKind::Buffer { elem: T::F16, access: Access::Read });
    let m = k.add_param("m", ParamKind::Scalar(T::INDEX));
    let tile = k.add_shared("tile", T::F32, 64);
    let i = k.add_var("i", T::INDEX, false);
    let acc = k.add_var("acc", T::F32, true);
    let j = k.add_var("j", T::INDEX, false);
    let t = k.add_var("t", T::INDEX, false);
    let lane = k.add_var("lane", T::INDEX, false);
    let p = k.add_var("p", T::F32, true);
    let r = k.add_var("r", T::F32, true);
    let dup = k.add_var("i", T::U32, false); // names may repeat: ids tell them apart
    let consts = [
        Const::f32(-0.0),
        Const::new(T::F32, 0x7fc0_0123), // NaN with a payload
        Const::new(T::F32, 0xff80_0001), // signalling NaN, sign set
        Const::new(T::F32, 1),           // smallest subnormal
        Const::f32(f32::INFINITY),
        Const::f32(1.0e-7),
        Const::f32(3.4028235e38),
        Const::new(T::F16, 0x8001),
        Const::new(T::BF16, 0x7fc1),
        Const::new(T::I8, 0x80),
        Const::new(T::U8, 255),
        Const::new(T::I32, (-7i64) as u64),
        Const::new(T::U32, u32::MAX as u64),
        Const::new(T::I64, i64::MIN as u64),
        Const::index(u64::MAX),
        Const::bool(true),
        Const::bool(false),
    ];
    let ld = |b, e| Expr::load(b, e);
    let reduce = |sched: Schedule, body: Expr| Reduce {
        op: ReduceOp::Add,
        ty: T::F32,
        schedule: sched,
        var: j,
        len: Expr::Param(n),
        body,
    };
    k.grid = vec![Expr::bin(BinOp::Div, Expr::Param(n), Expr::index(32)), Expr::Param(m), Expr::index(1)];
    k.sibling = Some(Sibling {
        of: "every_variant_m1".into(),
        rows: m,
        row_strides: vec![(x, Expr::Param(n)), (y, Expr::Param(n))],
        row_steps: vec![(n, Expr::index(2))],
        carried: vec![y],
    });
    k.verify_shapes = VerifyShapes { values: vec![(n, vec![1, 7, 64]), (m, vec![]), (n, vec![u64::MAX])] };
    let mut body = vec![
        Stmt::Let { var: i, value: Expr::bin(BinOp::Mul, Expr::GroupId(0), Expr::index(32)) },
        Stmt::Let { var: acc, value: Expr::f32(0.0) },
        Stmt::For {
            var: j,
            start: Expr::index(0),
            end: Expr::Param(n),
            step: Expr::index(1),
            body: vec![Stmt::Assign {
                var: acc,
                value: Expr::bin(BinOp::Add, Expr::Var(acc), ld(Buf::Param(x), Expr::Var(j))),
            }],
        },
        Stmt::If {
            cond: Expr::bin(BinOp::Lt, Expr::Var(i), Expr::Param(n)),
            then_body: vec![Stmt::Store {
                buf: Buf::Param(y),
                index: Expr::Var(i),
                value: Expr::select(Expr::c(Const::bool(true)), Expr::Var(acc), Expr::f32(-1.5)),
            }],
            else_body: vec![Stmt::Barrier],
        },
        Stmt::If { cond: Expr::c(Const::bool(false)), then_body: vec![], else_body: vec![] },
        Stmt::ParFor {
            var: t,
            end: Expr::index(64),
            team: Some(32),
            body: vec![Stmt::Store {
                buf: Buf::Shared(tile),
                index: Expr::Var(t),
                value: Expr::cast(T::F32, ld(Buf::Param(h), Expr::Var(t))),
            }],
        },
        Stmt::Barrier,
        Stmt::Check {
            id: 0,
            cond: Expr::bin(BinOp::Eq, ld(Buf::Param(h), Expr::Var(i)), ld(Buf::Param(h), Expr::index(0))),
        },
        Stmt::Lanes {
            lane,
            count: 32,
            implements: Some(Implements::one(
                r,
                reduce(Schedule::lanes(32, Combine::Butterfly), ld(Buf::Shared(tile), Expr::Var(j))),
            )),
            body: vec![
                Stmt::Let { var: p, value: ld(Buf::Shared(tile), Expr::Var(lane)) },
                Stmt::Assign {
                    var: p,
                    value: Expr::bin(
                        BinOp::Add,
                        Expr::Var(p),
                        Expr::ShuffleXor { value: Box::new(Expr::Var(p)), mask: 16 },
                    ),
                },
                Stmt::If {
                    cond: Expr::bin(BinOp::Eq, Expr::Var(lane), Expr::index(0)),
                    then_body: vec![Stmt::Assign { var: r, value: Expr::Var(p) }],
                    else_body: vec![],
                },
            ],
        },
        Stmt::Lanes { lane, count: 3, implements: None, body: vec![] },
        Stmt::Let {
            var: dup,
            value: Expr::bitcast(
                T::U32,
                Expr::Reduce(Box::new(reduce(
                    Schedule::Blocked {
                        block: 32,
                        across: Box::new(Schedule::Chunked { size: 4, combine: Combine::Pairwise }),
                    },
                    Expr::let_in(
                        t,
                        Expr::un(UnOp::Neg, ld(Buf::Param(x), Expr::Var(j))),
                        Expr::call(MathFn::Silu, Expr::Var(t)),
                    ),
                ))),
            ),
        },
        Stmt::Store {
            buf: Buf::Param(y),
            index: Expr::GroupId(2),
            value: Expr::Reduce(Box::new(Reduce {
                op: ReduceOp::Max,
                ty: T::F32,
                schedule: Schedule::Sequential,
                var: j,
                len: Expr::Param(n),
                body: Expr::Reduce(Box::new(Reduce {
                    op: ReduceOp::Min,
                    ..reduce(Schedule::lanes(5, Combine::Sequential), Expr::Var(acc))
                })),
            })),
        },
    ];
    for op in BinOp::ALL {
        body.push(Stmt::Assign { var: acc, value: Expr::bin(op, Expr::Var(acc), Expr::f32(2.0)) });
    }
    for op in UnOp::ALL {
        body.push(Stmt::Assign { var: acc, value: Expr::un(op, Expr::Var(acc)) });
    }
    for func in MathFn::ALL {
        body.push(Stmt::Assign { var: acc, value: Expr::call(func, Expr::Var(acc)) });
    }
    body.push(Stmt::Assign { var: acc, value: Expr::fma(Expr::Var(acc), Expr::f32(-0.0), Expr::Var(p)) });
    let products = Expr::bin(BinOp::Mul, ld(Buf::Param(x), Expr::Var(j)), Expr::Var(acc));
    body.push(Stmt::Assign {
        var: acc,
        value: Expr::Reduce(Box::new(Reduce {
            op: ReduceOp::FmaSum,
            ..reduce(Schedule::lanes(32, Combine::Butterfly), products)
        })),
    });
    // A reduction over rows: `[y0, y1]`, row `row` read by the body.
    let row = k.add_var("row", T::INDEX, false);
    let y0 = k.add_var("y0", T::F32, false);
    let y1 = k.add_var("y1", T::F32, false);
    let per_row =
        Expr::bin(BinOp::Mul, ld(Buf::Param(x), Expr::bin(BinOp::Add, Expr::Var(row), Expr::Var(j))), Expr::Var(acc));
    body.push(Stmt::LetRows {
        vars: vec![y0, y1],
        row,
        value: Expr::Reduce(Box::new(reduce(Schedule::lanes(32, Combine::Butterfly), per_row))),
    });
    body.push(Stmt::Lanes {
        lane,
        count: 2,
        implements: Some(Implements {
            results: vec![y0, y1],
            row: Some(row),
            reduce: Box::new(reduce(Schedule::lanes(2, Combine::Sequential), Expr::Var(row))),
        }),
        body: vec![],
    });
    for c in consts {
        body.push(Stmt::Store { buf: Buf::Param(y), index: Expr::index(0), value: Expr::c(c) });
    }
    k.body = body;
    k
}

#[test]
fn every_variant_round_trips() {
    assert_round_trip(&every_variant());
}

#[test]
fn ill_formed_references_round_trip() {
    // Undeclared ids print bare and read back, so a bug report can show a broken kernel.
    let mut k = Kernel::new("broken");
    k.grid = vec![];
    k.sibling = Some(Sibling::strided("nothing", baro_dsl::ir::ParamId(9), vec![]));
    k.body = vec![
        Stmt::Assign { var: baro_dsl::ir::Var(7), value: Expr::Param(baro_dsl::ir::ParamId(4)) },
        Stmt::Store { buf: Buf::Shared(baro_dsl::ir::SharedId(3)), index: Expr::GroupId(200), value: Expr::index(0) },
        Stmt::Lanes {
            lane: baro_dsl::ir::Var(1),
            count: 0,
            implements: Some(Implements::one(
                baro_dsl::ir::Var(2),
                Reduce {
                    op: ReduceOp::Add,
                    ty: ScalarType::F16,
                    schedule: Schedule::lanes(12, Combine::Butterfly), // invalid, still representable
                    var: baro_dsl::ir::Var(3),
                    len: Expr::index(0),
                    body: Expr::index(1),
                },
            )),
            body: vec![],
        },
        // Several results without a row variable, and a reduction over rows with none.
        Stmt::Lanes {
            lane: baro_dsl::ir::Var(1),
            count: 4,
            implements: Some(Implements {
                results: vec![baro_dsl::ir::Var(5), baro_dsl::ir::Var(6)],
                row: None,
                reduce: Box::new(Reduce {
                    op: ReduceOp::Add,
                    ty: ScalarType::F32,
                    schedule: Schedule::Sequential,
                    var: baro_dsl::ir::Var(3),
                    len: Expr::index(2),
                    body: Expr::f32(1.0),
                }),
            }),
            body: vec![],
        },
        Stmt::LetRows { vars: vec![], row: baro_dsl::ir::Var(8), value: Expr::index(3) },
    ];
    assert_round_trip(&k);
    let text = k.to_string();
    assert!(text.contains("implements v2 = reduce(sum, f16, lanes(12, butterfly), v3,"));
    assert!(text.contains("implements [v5, v6] = rows(_, reduce(sum, f32, seq, v3, 2:usize, 1.0:f32))"), "{text}");
    assert!(text.contains("let [] = rows(v8, 3:usize)"), "{text}");
}

/// `chunk * size` kernels for each schedule kind, expanded by `lanes::expand`.
fn dot(op: ReduceOp, schedule: Schedule) -> Kernel {
    let mut k = Kernel::new("dot");
    let x = k.add_param("x", ParamKind::Buffer { elem: ScalarType::F32, access: Access::Read });
    let w = k.add_param("w", ParamKind::Buffer { elem: ScalarType::F32, access: Access::Read });
    let out = k.add_param("out", ParamKind::Buffer { elem: ScalarType::F32, access: Access::ReadWrite });
    let n = k.add_param("n", ParamKind::Scalar(ScalarType::INDEX));
    let i = k.add_var("i", ScalarType::INDEX, false);
    k.grid = vec![Expr::index(1)];
    let body = Expr::bin(BinOp::Mul, Expr::load(Buf::Param(x), Expr::Var(i)), Expr::load(Buf::Param(w), Expr::Var(i)));
    let r = Reduce { op, ty: ScalarType::F32, schedule, var: i, len: Expr::Param(n), body };
    k.body = vec![Stmt::Store { buf: Buf::Param(out), index: Expr::GroupId(0), value: Expr::Reduce(Box::new(r)) }];
    k
}

#[test]
fn expanded_kernels_round_trip_for_every_schedule_kind() {
    let schedules = [
        "seq",
        "lanes(32, butterfly)",
        "lanes(8, pairwise)",
        "lanes(4, seq)",
        "chunked(64, seq)",
        "blocked(32, seq)",
        "blocked(16, lanes(32, butterfly))",
        "blocked(8, chunked(4, seq))",
    ];
    let mut expanded = 0;
    for s in schedules {
        for op in [ReduceOp::Add, ReduceOp::Max, ReduceOp::Min] {
            let k = dot(op, s.parse().unwrap());
            assert_round_trip(&k);
            let e = baro_dsl::lanes::expand(&k).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_round_trip(&e);
            expanded += 1;
        }
    }
    assert_eq!(expanded, 24);
}

/// `dot` over 3 rows of x (`x[row · n + i]`): one reduction with three results.
fn dot_rows(op: ReduceOp, schedule: Schedule) -> Kernel {
    let mut k = dot(op, schedule);
    let row = k.add_var("row", ScalarType::INDEX, false);
    let ys: Vec<_> = (0..3).map(|j| k.add_var(format!("y{j}"), ScalarType::F32, false)).collect();
    let Stmt::Store { value: Expr::Reduce(mut r), .. } = k.body.pop().unwrap() else { unreachable!() };
    let (x, w, out, n) =
        (baro_dsl::ir::ParamId(0), baro_dsl::ir::ParamId(1), baro_dsl::ir::ParamId(2), baro_dsl::ir::ParamId(3));
    let xi = Expr::load(
        Buf::Param(x),
        Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, Expr::Var(row), Expr::Param(n)), Expr::Var(r.var)),
    );
    r.body = Expr::bin(BinOp::Mul, xi, Expr::load(Buf::Param(w), Expr::Var(r.var)));
    k.body.push(Stmt::LetRows { vars: ys.clone(), row, value: Expr::Reduce(r) });
    for (j, y) in ys.into_iter().enumerate() {
        k.body.push(Stmt::Store { buf: Buf::Param(out), index: Expr::index(j as u64), value: Expr::Var(y) });
    }
    k
}

#[test]
fn reductions_over_rows_round_trip_expanded_for_every_schedule_kind() {
    let schedules = [
        "seq",
        "lanes(32, butterfly)",
        "lanes(4, seq)",
        "chunked(8, seq)",
        "blocked(16, lanes(32, butterfly))",
        "blocked(8, seq)",
    ];
    for s in schedules {
        for op in [ReduceOp::Add, ReduceOp::FmaSum, ReduceOp::Max] {
            let k = dot_rows(op, s.parse().unwrap());
            assert_round_trip(&k);
            assert!(k.to_string().contains("let [v2:y0, v3:y1, v4:y2] = rows(v1:row, reduce("), "{k}");
            let e = baro_dsl::lanes::expand(&k).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_round_trip(&e);
            // The weight is loaded once per element for the three rows.
            let text = e.to_string();
            assert_eq!(
                text.matches("load(p1:w").count(),
                if s.starts_with("lanes") || s.starts_with("blocked(16") { 2 } else { 1 },
                "{s}:\n{text}"
            );
        }
    }
}

#[test]
fn printed_form_reads_as_documented() {
    let k = dot(ReduceOp::Add, "lanes(4, butterfly)".parse().unwrap());
    let want = "kernel dot {
    param p0 x: &[f32]
    param p1 w: &[f32]
    param p2 out: &mut [f32]
    param p3 n: usize
    var v0 i: usize
    grid [1:usize]
    body {
        store p2:out[group_id(0)] = reduce(sum, f32, lanes(4, butterfly), v0:i, p3:n, mul(load(p0:x, v0:i), load(p1:w, v0:i)))
    }
}
";
    assert_eq!(k.to_string(), want);
}

fn err(text: &str) -> String {
    match Kernel::from_text(text) {
        Ok(k) => panic!("parsed, expected an error:\n{k}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_say_where_what_was_expected_and_what_was_found() {
    let head = "kernel k {\n    param p0 n: usize\n    var v0 a: mut usize\n    body {\n";
    let cases = [
        ("        v0 = add(1:usize; 2:usize)\n    }\n}", "5:25: expected `,`, found `;`"),
        ("        v0:b = 1:usize\n    }\n}", "5:12: expected `a` (the name of v0), found `b`"),
        ("        v1:a = 1:usize\n    }\n}", "5:9: expected v1 to be declared before use, found `v1`"),
        ("        v0 = 300:u8\n    }\n}", "5:14: expected an integer from 0 to 255 (u8), found `300`"),
        ("        v0 = 0.1:f16\n    }\n}", "5:14: expected a decimal that is exact in f16, or hex bits, found `0.1`"),
        ("        v0 = frob(p0)\n    }\n}", "5:14: expected an expression, found `frob`"),
        ("        v0 = cast<f64>(p0)\n    }\n}", "5:19: expected a type (bool, i8, u8, i32, u32, i64, u64, usize, f16, bf16 or f32), found `f64`"),
        ("        v0 = reduce(sum, f32, lanes(4, zigzag), v0, p0, p0)\n    }\n}", "5:40: expected `seq`, `butterfly` or `pairwise`, found `zigzag`"),
        ("        goto v0\n    }\n}", "5:9: expected a statement (`let`, `store`, `for`, `if`, `parfor`, `lanes`, `barrier`, `check`, `mma_i8` or `vN = ...`) or `}`, found `goto`"),
        ("        barrier\n", "6:1: expected a statement or `}`, found end of input"),
        ("    }\n} extra", "6:3: expected end of input after the kernel, found `extra`"),
        ("        v0 = 1:usize $\n", "5:22: expected a token, found `$`"),
    ];
    for (tail, want) in cases {
        assert_eq!(err(&format!("{head}{tail}")), want, "{tail}");
    }
    assert_eq!(
        err("kernel k {\n    var v0 a: f32\n    param p0 n: usize\n"),
        "3:5: expected `var`, `grid`, `block`, `min_groups`, `sibling`, `verify` or `body`, found `param`"
    );
    assert_eq!(err("kernel k {\n    param p1 n: usize\n"), "2:11: expected `p0` (the next parameter id), found `p1`");
    assert_eq!(err(""), "1:1: expected `kernel`, found end of input");
    let e: ParseError = "kernel k { grid [1:usize 2:usize] body {} }".parse::<Kernel>().unwrap_err();
    assert_eq!((e.line, e.column, e.expected.as_str(), e.found.as_str()), (1, 26, "`,` or `]`", "`2`"));
}

#[test]
fn hand_written_text_may_omit_names_and_use_decimal_halves() {
    let text = "kernel k { // a comment
        param p0 y: &mut [f16]
        var v0 x: f16
        body { let v0 = 1.5:f16 store p0[0:u64] = neg(v0) }
    }";
    let k = Kernel::from_text(text).unwrap();
    assert_eq!(k.body[0], Stmt::Let { var: baro_dsl::ir::Var(0), value: Expr::c(Const::new(ScalarType::F16, 0x3e00)) });
    assert_round_trip(&k);
}

#[test]
fn nesting_is_bounded_instead_of_overflowing_the_stack() {
    let deep = |n: usize| format!("kernel k {{ body {{ let v0 = {}1:usize{} }} }}", "neg(".repeat(n), ")".repeat(n));
    // body block + let value + n negations + the constant
    Kernel::from_text(&deep(MAX_NESTING as usize - 3)).unwrap();
    let e = Kernel::from_text(&deep(MAX_NESTING as usize)).unwrap_err();
    assert_eq!(e.expected, format!("at most {MAX_NESTING} levels of nesting"));
    let e = Kernel::from_text(&deep(100_000)).unwrap_err();
    assert_eq!(e.expected, format!("at most {MAX_NESTING} levels of nesting"));
}

#[test]
fn every_prefix_of_a_printed_kernel_fails_cleanly() {
    let text = every_variant().to_string();
    let text = text.trim_end();
    let mut failures = 0;
    for (cut, _) in text.char_indices() {
        if Kernel::from_text(&text[..cut]).is_err() {
            failures += 1;
        }
    }
    // Every proper prefix lacks at least the kernel's closing brace.
    assert_eq!(failures, text.char_indices().count());
    assert!(Kernel::from_text(text).is_ok());
}

#[test]
fn schedules_read_as_schedule_from_str_reads_them() {
    for s in [
        "seq",
        "lanes(32, butterfly)",
        "lanes(4, seq)",
        "chunked(64, pairwise)",
        "blocked(32, lanes(32, butterfly))",
        "blocked(8, blocked(4, seq))",
    ] {
        let text =
            format!("kernel k {{ var v0 i: usize body {{ let v0 = reduce(sum, f32, {s}, v0, 4:usize, 1.0:f32) }} }}");
        let k = Kernel::from_text(&text).unwrap();
        let Stmt::Let { value: Expr::Reduce(r), .. } = &k.body[0] else {
            panic!("expected a let of a reduction, found {:?}", k.body[0])
        };
        assert_eq!(r.schedule, s.parse::<Schedule>().unwrap(), "{s}");
    }
}

#[test]
fn single_expressions_and_statements_print_with_names() {
    let k = every_variant();
    assert_eq!(
        k.expr_text(&Expr::bin(BinOp::Add, Expr::Var(baro_dsl::ir::Var(1)), Expr::f32(-0.0))),
        "add(v1:acc, 0x80000000:f32)"
    );
    assert_eq!(
        k.expr_text(&Expr::fma(Expr::Var(baro_dsl::ir::Var(1)), Expr::f32(2.0), Expr::f32(-0.0))),
        "fma(v1:acc, 2.0:f32, 0x80000000:f32)"
    );
    assert_eq!(
        k.stmt_text(&k.body[3]),
        "if lt(v0:i, p2:n) {\n    store p1:y[v0:i] = select(true, v1:acc, -1.5:f32)\n} else {\n    barrier\n}"
    );
}

/// A file may hold several kernels (an m=1 kernel and its rows sibling): printed one after
/// another they read back in order with `many_from_text`, while `from_text` still reads
/// exactly one and names what follows it.
#[test]
fn several_kernels_in_one_text_round_trip_in_order() {
    let (rows, m1) = baro_dsl::testkernels::pairs().remove(0);
    let text = format!("{m1}\n// the rows sibling\n{rows}");
    let back = Kernel::many_from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, vec![m1.clone(), rows.clone()]);
    let reprinted: Vec<String> = back.iter().map(|k| k.to_string()).collect();
    assert_eq!(reprinted, vec![m1.to_string(), rows.to_string()]);
    assert_eq!(Kernel::many_from_text(&every_variant().to_string()), Ok(vec![every_variant()]));
    let one = Kernel::from_text(&text).unwrap_err();
    assert_eq!((one.expected.as_str(), one.found.as_str()), ("end of input after the kernel", "`kernel`"));
    let junk = Kernel::many_from_text(&format!("{m1} extra")).unwrap_err();
    assert_eq!((junk.expected.as_str(), junk.found.as_str()), ("`kernel` or end of input", "`extra`"));
    assert_eq!(Kernel::many_from_text("").unwrap_err().expected, "`kernel`");
}
