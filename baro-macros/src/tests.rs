//! Unit tests of the lowering: kernels built by the front end against hand-built IR, literal
//! and cast typing, the span table, and error collection.

use crate::diag::Diag;
use crate::expand::front_end;
use crate::lower::Lowered;
use baro_dsl::ir::{
    Access, BinOp, Buf, Const, Expr, Kernel, ParamId, ParamKind, Reduce, ReduceOp, ScalarType as T, Sibling, Stmt,
    UnOp, Var,
};
use baro_dsl::schedule::{Combine, Schedule};
use proc_macro2::TokenStream;
use quote::quote;

/// Runs the front end; returns the kernel (if any) and every error message.
fn lower(attr: TokenStream, item: TokenStream) -> (Option<Lowered>, Vec<String>) {
    let item: syn::ItemFn = syn::parse2(item).expect("test input is a function");
    let mut diag = Diag::default();
    let front = front_end(attr, &item, &mut diag);
    (front.lowered.filter(|_| !diag.has_errors()), diag.messages())
}

fn ok(attr: TokenStream, item: TokenStream) -> Lowered {
    match lower(attr, item) {
        (Some(l), _) => l,
        (None, errs) => panic!("expected the kernel to lower, got errors: {errs:#?}"),
    }
}

fn errors(attr: TokenStream, item: TokenStream) -> Vec<String> {
    let (l, errs) = lower(attr, item);
    assert!(l.is_none(), "expected errors, the kernel lowered");
    errs
}

fn buffer(elem: T, access: Access) -> ParamKind {
    ParamKind::Buffer { elem, access }
}

fn p(i: u32) -> Expr {
    Expr::Param(ParamId(i))
}

fn v(i: u32) -> Expr {
    Expr::Var(Var(i))
}

fn load(param: u32, index: Expr) -> Expr {
    Expr::load(Buf::Param(ParamId(param)), index)
}

fn matvec_params(k: &mut Kernel) {
    k.add_param("x", buffer(T::F32, Access::Read));
    k.add_param("w", buffer(T::BF16, Access::Read));
    k.add_param("y", buffer(T::F32, Access::ReadWrite));
    k.add_param("k", ParamKind::Scalar(T::INDEX));
    k.add_param("n", ParamKind::Scalar(T::INDEX));
}

/// `sum!(i in 0..k, order = lanes(32).butterfly(), x[xi] * w[o * k + i].to_f32())` with
/// `o` = v0 and `i` = `var`.
fn matvec_sum(var: Var, x_index: Expr) -> Expr {
    let w_index = Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, v(0), p(3)), Expr::Var(var));
    Expr::Reduce(Box::new(Reduce {
        op: ReduceOp::Add,
        ty: T::F32,
        schedule: Schedule::Lanes { count: 32, combine: Combine::Butterfly },
        var,
        len: p(3),
        body: Expr::bin(BinOp::Mul, load(0, x_index), Expr::cast(T::F32, load(1, w_index))),
    }))
}

#[test]
fn matvec_equals_hand_built_ir() {
    let l = ok(
        quote!(grid = [n]),
        quote! {
            pub fn matvec(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize) {
                let o = group_id(0);
                y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i].to_f32());
            }
        },
    );
    let mut k = Kernel::new("matvec");
    matvec_params(&mut k);
    let o = k.add_var("o", T::INDEX, false);
    let i = k.add_var("i", T::INDEX, false);
    k.grid = vec![p(4)];
    k.body = vec![
        Stmt::Let { var: o, value: Expr::GroupId(0) },
        Stmt::Store { buf: Buf::Param(ParamId(2)), index: v(0), value: matvec_sum(i, Expr::Var(i)) },
    ];
    assert_eq!(l.kernel, k);
    assert_eq!(l.spans.reduces.len(), 1);
    assert_eq!(l.spans.stores.len(), 1);
    let paths: Vec<&Vec<u32>> = l.spans.stmts.iter().map(|(p, _)| p).collect();
    assert_eq!(paths, [&vec![0], &vec![1]]);
}

#[test]
fn matvec_rows_equals_hand_built_ir() {
    let l = ok(
        quote!(grid = [n], rows_of = matvec, rows = rows, row_stride(x = k, y = n), verify(k = [1, 31, 70])),
        quote! {
            pub fn matvec_rows(x: &[f32], w: &[half::bf16], y: &mut [f32], k: usize, n: usize, rows: usize) {
                let o = group_id(0);
                for r in 0..rows {
                    y[r * n + o] = sum!(i in 0..k, order = lanes(32).strided().butterfly(), x[r * k + i] * w[o * k + i].to_f32());
                }
            }
        },
    );
    let mut k = Kernel::new("matvec_rows");
    matvec_params(&mut k);
    let rows = k.add_param("rows", ParamKind::Scalar(T::INDEX));
    let o = k.add_var("o", T::INDEX, false);
    let r = k.add_var("r", T::INDEX, false);
    let i = k.add_var("i", T::INDEX, false);
    k.grid = vec![p(4)];
    k.sibling = Some(Sibling::strided("matvec", rows, vec![(ParamId(0), p(3)), (ParamId(2), p(4))]));
    k.verify_shapes.values = vec![(ParamId(3), vec![1, 31, 70])];
    let x_index = Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, Expr::Var(r), p(3)), Expr::Var(i));
    let y_index = Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, Expr::Var(r), p(4)), v(0));
    k.body = vec![
        Stmt::Let { var: o, value: Expr::GroupId(0) },
        Stmt::For {
            var: r,
            start: Expr::index(0),
            end: p(5),
            step: Expr::index(1),
            body: vec![Stmt::Store { buf: Buf::Param(ParamId(2)), index: y_index, value: matvec_sum(i, x_index) }],
        },
    ];
    assert_eq!(l.kernel, k);
    let paths: Vec<&Vec<u32>> = l.spans.stmts.iter().map(|(p, _)| p).collect();
    assert_eq!(paths, [&vec![0], &vec![1, 0], &vec![1]]);
}

#[test]
fn literal_cast_and_conversion_types() {
    let l = ok(
        quote!(grid = [n]),
        quote! {
            fn lits(x: &[f32], q: &[i8], y: &mut [f32], c: &mut [u32], n: usize, m: u32) {
                let o = group_id(0);
                let a = 2 * m;
                let b = x[o + 1] * 0.5;
                let s = q[o] as f32 - 1.0;
                let h = bf16::from_f32(b).to_f32();
                let bits = b.to_bits() >> 3;
                y[o] = if a > 3 { s } else { -h };
                c[o] = bits + (o as u32) + f32::from_bits(bits).to_bits() - 7u32;
                let neg: i8 = -128;
                let mut t = 0.0;
                t = t.max(-0.0f32);
            }
        },
    );
    let k = &l.kernel;
    let ty = |name: &str| k.vars.iter().find(|d| d.name == name).map(|d| d.ty);
    assert_eq!(ty("a"), Some(T::U32));
    assert_eq!(ty("b"), Some(T::F32));
    assert_eq!(ty("s"), Some(T::F32));
    assert_eq!(ty("h"), Some(T::F32));
    assert_eq!(ty("bits"), Some(T::U32));
    assert_eq!(ty("neg"), Some(T::I8));
    let [o, a, b, s, h, bits] = [0, 1, 2, 3, 4, 5].map(v);
    let body = &k.body;
    assert_eq!(body[1], Stmt::Let { var: Var(1), value: Expr::bin(BinOp::Mul, Expr::c(Const::new(T::U32, 2)), p(5)) });
    assert_eq!(
        body[2],
        Stmt::Let {
            var: Var(2),
            value: Expr::bin(BinOp::Mul, load(0, Expr::bin(BinOp::Add, o.clone(), Expr::index(1))), Expr::f32(0.5))
        }
    );
    assert_eq!(
        body[3],
        Stmt::Let { var: Var(3), value: Expr::bin(BinOp::Sub, Expr::cast(T::F32, load(1, o.clone())), Expr::f32(1.0)) }
    );
    assert_eq!(body[4], Stmt::Let { var: Var(4), value: Expr::cast(T::F32, Expr::cast(T::BF16, b.clone())) });
    assert_eq!(
        body[5],
        Stmt::Let {
            var: Var(5),
            value: Expr::bin(BinOp::Shr, Expr::bitcast(T::U32, b), Expr::c(Const::new(T::U32, 3)))
        }
    );
    let select = Expr::select(Expr::bin(BinOp::Gt, a, Expr::c(Const::new(T::U32, 3))), s, Expr::un(UnOp::Neg, h));
    assert_eq!(body[6], Stmt::Store { buf: Buf::Param(ParamId(2)), index: o.clone(), value: select });
    let roundtrip = Expr::bitcast(T::U32, Expr::bitcast(T::F32, bits.clone()));
    let sum = Expr::bin(BinOp::Add, Expr::bin(BinOp::Add, bits, Expr::cast(T::U32, o.clone())), roundtrip);
    assert_eq!(
        body[7],
        Stmt::Store {
            buf: Buf::Param(ParamId(3)),
            index: o,
            value: Expr::bin(BinOp::Sub, sum, Expr::c(Const::new(T::U32, 7)))
        }
    );
    assert_eq!(body[8], Stmt::Let { var: Var(6), value: Expr::c(Const::new(T::I8, (-128i64) as u64)) });
    // `-0.0f32` folds to the constant with the sign bit set, not `neg(0.0)`.
    assert_eq!(
        body[10],
        Stmt::Assign { var: Var(7), value: Expr::bin(BinOp::Max, v(7), Expr::c(Const::new(T::F32, 0x8000_0000))) }
    );
}

#[test]
fn every_order_form_parses_to_its_schedule() {
    let cases: [(TokenStream, &str); 9] = [
        (quote!(seq), "seq"),
        (quote!(lanes(32).butterfly()), "lanes(32, butterfly)"),
        (quote!(lanes(64).strided().butterfly()), "lanes(64, butterfly)"),
        (quote!(lanes(16).pairwise()), "lanes(16, pairwise)"),
        (quote!(lanes(8).seq()), "lanes(8, seq)"),
        (quote!(chunked(64)), "chunked(64, seq)"),
        (quote!(chunked(64).pairwise()), "chunked(64, pairwise)"),
        (quote!(blocked(32, lanes(32).butterfly())), "blocked(32, lanes(32, butterfly))"),
        (quote!(blocked(32, blocked(4, seq))), "blocked(32, blocked(4, seq))"),
    ];
    for (order, want) in cases {
        let l = ok(
            quote!(grid = [n]),
            quote! {
                fn s(x: &[f32], y: &mut [f32], k: usize, n: usize) {
                    y[0] = sum!(i in 0..k, order = #order, x[i]);
                }
            },
        );
        let Stmt::Store { value: Expr::Reduce(r), .. } = &l.kernel.body[0] else {
            panic!("expected a store of a reduction")
        };
        assert_eq!(r.schedule.to_string(), want);
    }
}

#[test]
fn bad_orders_are_rejected_with_what_was_expected() {
    let cases: [(TokenStream, &str); 4] = [
        (quote!(lanes(12).butterfly()), "needs a power-of-two count, found 12"),
        (quote!(lanes(32)), "`lanes(32)` needs a combine"),
        (quote!(tree(4)), "expected a reduction order"),
        (quote!(chunked(0)), "expected at least 1"),
    ];
    for (order, want) in cases {
        let errs = errors(
            quote!(grid = [n]),
            quote! {
                fn s(x: &[f32], y: &mut [f32], k: usize, n: usize) {
                    y[0] = sum!(i in 0..k, order = #order, x[i]);
                }
            },
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains(want), "{} does not contain {want}", errs[0]);
    }
}

#[test]
fn undeclared_accumulation_is_an_error_but_max_is_not() {
    let errs = errors(
        quote!(grid = [n]),
        quote! {
            fn acc(x: &[f32], y: &mut [f32], k: usize, n: usize) {
                let mut acc = 0.0;
                let mut m = f32::NEG_INFINITY;
                for i in 0..k {
                    acc += x[i];
                    m = m.max(x[i]);
                }
                let mut b = 0.0;
                for i in 0..k {
                    b = x[i] * 2.0 + b;
                }
                y[0] = acc + m + b;
            }
        },
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");
    for (e, name) in errs.iter().zip(["acc", "b"]) {
        assert!(
            e.starts_with(&format!("float accumulation into `{name}` inside a loop is not a declared reduction")),
            "{e}"
        );
    }
    // An integer counter and a float updated in its own loop iteration are fine.
    ok(
        quote!(grid = [n]),
        quote! {
            fn fine(x: &[f32], y: &mut [f32], k: usize, n: usize) {
                let mut c = 0;
                for i in 0..k {
                    c += 1;
                    let mut t = x[i];
                    t = t * 2.0;
                    y[i] = t;
                }
            }
        },
    );
}

#[test]
fn all_errors_are_collected_and_the_rest_still_checked() {
    let errs = errors(
        quote!(grid = [n], colour = red),
        quote! {
            fn many(x: &Vec<f32>, y: &mut [f32], n: usize) {
                let a = x[0];
                while n > 0 {}
                let b: f32 = 1;
                y[0] = a + b + undefined;
            }
        },
    );
    let want = [
        "unknown attribute key `colour`",
        "wrong argument type: expected `&[T]`, `&mut [T]` or `T` with T one of f32, f16, bf16, i8, u8, i32, u32, i64, u64, usize, bool, found `&Vec<f32>`",
        "unsupported Rust construct: `while` loops are not part of the kernel language",
        "expected f32, found integer literal `1`: write `1.0`",
    ];
    assert_eq!(errs.len(), want.len(), "{errs:#?}");
    for (e, w) in errs.iter().zip(want) {
        assert!(e.starts_with(w), "`{e}` does not start with `{w}`");
    }
}

#[test]
fn shared_arrays_par_loops_barriers_and_else_paths() {
    let l = ok(
        quote!(grid = [n]),
        quote! {
            fn tiles(x: &[f32], y: &mut [f32], n: usize) {
                let tile = shared::<f32, 256>();
                for j in par(0..256) {
                    tile[j] = x[j];
                }
                barrier();
                if n > 1 {
                    y[0] = tile[0];
                } else if n == 1 {
                    y[0] = tile[1];
                } else {
                    y[0] = 0.0;
                }
                for j in (0..n).step_by(2) {
                    y[j] = tile[j % 256];
                }
            }
        },
    );
    let k = &l.kernel;
    assert_eq!(k.shared.len(), 1);
    assert_eq!((k.shared[0].elem, k.shared[0].len), (T::F32, 256));
    assert!(matches!(k.body[0], Stmt::ParFor { .. }));
    assert_eq!(k.body[1], Stmt::Barrier);
    let Stmt::For { step, .. } = &k.body[3] else { panic!("expected a for loop") };
    assert_eq!(*step, Expr::index(2));
    let mut paths: Vec<Vec<u32>> = l.spans.stmts.iter().map(|(p, _)| p.clone()).collect();
    paths.sort();
    // The else-if is statement 1 of the outer `if` (after the one `then` statement); its own
    // else block continues after its `then` statement.
    let want: Vec<Vec<u32>> = vec![
        vec![0],
        vec![0, 0],
        vec![1],
        vec![2],
        vec![2, 0],
        vec![2, 1],
        vec![2, 1, 0],
        vec![2, 1, 1],
        vec![3],
        vec![3, 0],
    ];
    assert_eq!(paths, want);
    assert_eq!(l.spans.stores.len(), 5);
}

#[test]
fn mismatched_types_say_what_to_convert() {
    let errs = errors(
        quote!(grid = [n]),
        quote! {
            fn m(x: &[f32], w: &[bf16], y: &mut [f32], n: usize, k: u32) {
                y[0] = x[0] * w[0];
                y[1] = x[k];
                y[2] = exp(w[0]);
                y[3] = x[0] as bf16;
            }
        },
    );
    let want = [
        "mismatched types: `*` of f32 and bf16",
        "index into `x` has type u32: expected usize",
        "`exp` takes f32, found bf16",
        "`as bf16` is not Rust: expected `bf16::from_f32(x)`",
    ];
    assert_eq!(errs.len(), want.len(), "{errs:#?}");
    for (e, w) in errs.iter().zip(want) {
        assert!(e.starts_with(w), "`{e}` does not start with `{w}`");
    }
}

#[test]
fn sibling_attribute_errors() {
    let errs = errors(
        quote!(grid = [n], rows_of = matvec, rows = n, row_stride(k = n)),
        quote! {
            fn r(x: &[f32], y: &mut [f32], k: usize, n: f32) {
                y[0] = x[0];
            }
        },
    );
    assert!(errs.iter().any(|e| e.starts_with("a grid axis has type f32: expected usize")), "{errs:#?}");
    assert!(errs.iter().any(|e| e.starts_with("`rows = n`: expected a `usize` parameter")), "{errs:#?}");
    assert!(errs.iter().any(|e| e.starts_with("`row_stride(k = ...)`: expected a buffer parameter")), "{errs:#?}");
}

#[test]
fn verifier_errors_are_reported_too() {
    // Neither is caught by the front end itself: both come from `check_wellformed`.
    let errs = errors(
        quote!(grid = [n]),
        quote! {
            fn last(x: &[f32], y: &mut [f32], n: usize) {
                let mut last = 0.0;
                for i in 0..n {
                    last = x[i];
                }
                for j in par(0..n) {
                    if j == 0 {
                        barrier();
                    }
                }
                y[0] = last;
            }
        },
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs[0].starts_with("float accumulation into `last` inside a loop"), "{}", errs[0]);
    assert!(errs[1].starts_with("barrier under lane-dependent control flow"), "{}", errs[1]);
}

#[test]
fn block_values_are_lets_around_their_tail() {
    let l = ok(
        quote!(grid = [n]),
        quote! {
            fn blocks(x: &[f32], h: &[u32], y: &mut [f32], n: usize) {
                let o = group_id(0);
                let s = { let m = h[o] & 0x3ff; let e = m + 1; (e as f32) * 0.5 };
                y[o] = x[o] * if s > 1.0 { let t = s * 2.0; t - 1.0 } else { s };
                let e = { let e = 3.0; { let e = e * e; e } };
                y[o + 1] = e + s;
            }
        },
    );
    let k = &l.kernel;
    let ty = |name: &str| k.vars.iter().filter(|d| d.name == name).map(|d| d.ty).collect::<Vec<_>>();
    assert_eq!(ty("m"), vec![T::U32]);
    assert_eq!(ty("s"), vec![T::F32]);
    // The shadowed `e`s are three variables: two inner block ones and the statement's.
    assert_eq!(ty("e"), vec![T::U32, T::F32, T::F32, T::F32]);
    let o = v(0);
    let [m, e1, s] = [1, 2, 3].map(v);
    let masked = Expr::bin(BinOp::And, load(1, o.clone()), Expr::c(Const::new(T::U32, 0x3ff)));
    let tail = Expr::bin(BinOp::Mul, Expr::cast(T::F32, e1.clone()), Expr::f32(0.5));
    let value = Expr::let_in(
        Var(1),
        masked,
        Expr::let_in(Var(2), Expr::bin(BinOp::Add, m, Expr::c(Const::new(T::U32, 1))), tail),
    );
    assert_eq!(k.body[1], Stmt::Let { var: Var(3), value });
    let then = Expr::let_in(
        Var(4),
        Expr::bin(BinOp::Mul, s.clone(), Expr::f32(2.0)),
        Expr::bin(BinOp::Sub, v(4), Expr::f32(1.0)),
    );
    let select = Expr::select(Expr::bin(BinOp::Gt, s, Expr::f32(1.0)), then, v(3));
    assert_eq!(
        k.body[2],
        Stmt::Store { buf: Buf::Param(ParamId(2)), index: o.clone(), value: Expr::bin(BinOp::Mul, load(0, o), select) }
    );
    let nested = Expr::let_in(Var(5), Expr::f32(3.0), Expr::let_in(Var(6), Expr::bin(BinOp::Mul, v(5), v(5)), v(6)));
    assert_eq!(k.body[3], Stmt::Let { var: Var(7), value: nested });
}

#[test]
fn block_values_say_what_they_may_hold() {
    let errs = errors(
        quote!(grid = [n]),
        quote! {
            fn bad(x: &[f32], y: &mut [f32], n: usize) {
                let o = group_id(0);
                let a = { let mut t = x[o]; t };
                let b = { y[o] = 1.0; x[o] };
                let c = { let t = x[o]; };
                let d = { let t = x[o]; sum!(j in 0..n, order = seq, x[j]) * t };
                y[o] = a + b + c + d;
            }
        },
    );
    let want = [
        "`let mut t` in a block used as a value: nothing can assign to it there; expected `let t`",
        "a block used as a value holds only `let x = ...;` statements before its value",
        "a block used as a value: expected `let` statements followed by the value without a `;`",
        "a reduction (`sum!`, `max!`, `min!`) inside a block with `let`s",
    ];
    for w in want {
        assert!(errs.iter().any(|e| e.contains(w)), "expected an error containing {w:?}, got {errs:#?}");
    }
}

#[test]
fn check_statements_are_numbered_in_source_order_and_take_a_bool() {
    let l = ok(
        quote!(grid = [1]),
        quote! {
            fn tiles(ids: &[u32], y: &mut [u32], n: usize) {
                check!(ids[0] == ids[n]);
                for r in 0..8 {
                    check!(ids[r] <= ids[0]);
                }
                y[0] = ids[0];
            }
        },
    );
    let k = &l.kernel;
    let Stmt::Check { id: 0, cond } = &k.body[0] else { panic!("expected check 0 first, found {:?}", k.body[0]) };
    assert!(matches!(cond, Expr::Binary { op: baro_dsl::ir::BinOp::Eq, .. }), "{cond:?}");
    let Stmt::For { body, .. } = &k.body[1] else { panic!("expected a for loop") };
    assert!(matches!(body[0], Stmt::Check { id: 1, .. }), "{:?}", body[0]);
    let (_, errs) = lower(
        quote!(grid = [1]),
        quote! {
            fn bad(ids: &[u32], y: &mut [u32]) {
                check!(ids[0]);
                y[0] = 0;
            }
        },
    );
    assert!(errs.iter().any(|e| e.starts_with("condition has type u32: expected bool")), "{errs:#?}");
}

#[test]
fn loops_that_do_not_read_row_results_stay_loops() {
    let l = ok(
        quote!(grid = [1]),
        quote! {
            fn stays(x: &[f32], y: &mut [f32], k: usize) {
                let ys = sum!(r in 0..2, i in 0..k, order = seq, x[r * k + i]);
                for r in 0..2 {
                    y[r] = x[r];
                }
                y[2] = ys[1];
            }
        },
    );
    assert!(matches!(l.kernel.body[1], Stmt::For { .. }), "{:?}", l.kernel.body[1]);
    // r, i, ys0, ys1: `ys[1]` is the fourth variable.
    assert!(matches!(&l.kernel.body[2], Stmt::Store { value: Expr::Var(Var(3)), .. }), "{:?}", l.kernel.body[2]);
}

#[test]
fn row_results_are_picked_when_the_kernel_is_written() {
    // `tests/ui/fail_rows_results_index.rs` has the loop cases; these are the rest.
    let errs = errors(
        quote!(grid = [n]),
        quote! {
            fn bad(x: &[f32], y: &mut [f32], k: usize, n: usize) {
                let o = group_id(0);
                let ys = sum!(r in 0..2, i in 0..k, order = seq, x[r * k + i]);
                y[o] = ys[o];
                y[o] = ys[2];
                ys[0] = 1.0;
                let mut zs = sum!(r in 0..2, i in 0..k, order = seq, x[r * k + i]);
            }
        },
    );
    let want = [
        "`ys[o]`: a result of a reduction over rows is picked when the kernel is written",
        "row 2 out of range: `ys` holds 2 results, rows 0 to 1",
        "cannot store into `ys`: it holds the results of a reduction over rows, which are immutable",
        "`mut zs`: the results of a reduction over rows are immutable; expected `let zs = ..`",
    ];
    for w in want {
        assert_eq!(
            errs.iter().filter(|e| e.contains(w)).count(),
            1,
            "expected one error containing {w:?}, got {errs:#?}"
        );
    }
    assert_eq!(errs.len(), want.len(), "{errs:#?}");
}
