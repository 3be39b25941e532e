//! Order-free integer reductions (`order = any`, `Schedule::Any`): the verifier accepts one
//! only where every order gives the same value (an integer sum whose partial sums provably
//! stay in its type, an integer max/min) and rejects the rest with the bound it could not
//! prove; the host computes exactly the plain-Rust integer (random i8 vectors, all −128).
#![cfg(feature = "llvm")]

use crate::host_common::*;

use baro_dsl::ir::{BinOp, Dot4Kind, Expr, Kernel, ParamId, Reduce, ReduceOp, ScalarType as T, Sibling};
use baro_dsl::runtime::Arg;
use baro_dsl::schedule::Schedule;
use baro_dsl::verify::{check_sibling, check_wellformed, verify_kernel, ErrorKind};

/// How each element of the test sums is made from the two input rows.
#[derive(Clone, Copy)]
enum Elem {
    /// `x[i] as i32 * w[i] as i32`, both i8.
    I8Product,
    /// `dot4_i8(x[i], w[i], 0)`, both u32 words of four i8.
    Dot4,
    /// `x[i] * w[i]`, both i32: unbounded.
    I32Product,
    /// `x[i] * w[i]`, both f32.
    F32Product,
}

impl Elem {
    fn ty(self) -> (T, T) {
        match self {
            Elem::I8Product => (T::I8, T::I32),
            Elem::Dot4 => (T::U32, T::I32),
            Elem::I32Product => (T::I32, T::I32),
            Elem::F32Product => (T::F32, T::F32),
        }
    }
}

/// `y[o] = sum!(i in 0..len, order, elem(x[i], w[o * k + i]))` over `n` outputs, where `len`
/// is `k` or `min(k, cap)`.
fn row_sum(name: &str, elem: Elem, order: Schedule, cap: Option<u64>) -> Kernel {
    let (in_ty, out_ty) = elem.ty();
    let mut k = Kernel::new(name);
    let x = input(&mut k, "x", in_ty);
    let w = input(&mut k, "w", in_ty);
    let y = output(&mut k, "y", out_ty);
    let kk = scalar(&mut k, "k", T::INDEX);
    let n = scalar(&mut k, "n", T::INDEX);
    k.grid = vec![p(n)];
    let i = k.add_var("i", T::INDEX, false);
    let o = Expr::GroupId(0);
    let (a, b) = (ld(x, v(i)), ld(w, add(mul(o.clone(), p(kk)), v(i))));
    let body = match elem {
        Elem::I8Product => mul(Expr::cast(T::I32, a), Expr::cast(T::I32, b)),
        Elem::Dot4 => Expr::dot4(Dot4Kind::I8I8, a, b, c(T::I32, 0)),
        Elem::I32Product | Elem::F32Product => mul(a, b),
    };
    let len = match cap {
        Some(cap) => bin(BinOp::Min, p(kk), ix(cap)),
        None => p(kk),
    };
    let r = Reduce { op: ReduceOp::Add, ty: out_ty, schedule: order, var: i, len, body };
    k.body = vec![st(y, o, Expr::Reduce(Box::new(r)))];
    k
}

fn order_free_error(k: &Kernel) -> String {
    let errs = check_wellformed(k).expect_err("an unproven order-free reduction must be rejected");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].kind, ErrorKind::OrderFree);
    assert_eq!(errs[0].location.reduce, Some(0), "the error names the reduction");
    errs[0].message.clone()
}

#[test]
fn a_sum_whose_length_has_no_bound_is_rejected_naming_it() {
    let m = order_free_error(&row_sum("unbounded_len", Elem::I8Product, Schedule::Any, None));
    assert_eq!(
        m,
        "an order-free i32 sum (`order = any`) needs its length bounded when the kernel is compiled, found length `p3:k` with no bound: \
         expected a constant, or a capped length such as `k.min(N)`, so that no partial sum can leave i32 [-2147483648, 2147483647]"
    );
}

#[test]
fn a_sum_whose_partial_sums_may_overflow_is_rejected_with_the_bound() {
    // i8·i8 products lie in [-16256, 16384]; 2^17 of them may reach 2^31: one too many.
    let m = order_free_error(&row_sum("too_long", Elem::I8Product, Schedule::Any, Some(1 << 17)));
    assert_eq!(
        m,
        "an order-free i32 sum (`order = any`) must provably not overflow: expected every partial sum within i32 [-2147483648, 2147483647], \
         found elements in [-16256, 16384] over at most 131072 elements, so partial sums in [-2130706432, 2147483648]; shorten the length or declare an order"
    );
    // i32 elements have no narrower range: even two of them may overflow.
    let m = order_free_error(&row_sum("i32_elems", Elem::I32Product, Schedule::Any, Some(2)));
    assert!(m.contains("found elements in [-2147483648, 2147483647] over at most 2 elements"), "{m}");
    assert!(m.ends_with("the elements are unbounded (a load, parameter or operation of the sum's own type): build them from i8/u8 values, or declare an order"), "{m}");
}

#[test]
fn a_float_reduction_declared_order_free_is_rejected() {
    let m = order_free_error(&row_sum("float_any", Elem::F32Product, Schedule::Any, Some(64)));
    assert_eq!(
        m,
        "a reduction over f32 cannot be order-free (`order = any`): floating-point addition depends on the order, \
         expected an integer reduction or a declared order (seq, lanes(N)..., chunked(C), blocked(B, ORDER))"
    );
}

#[test]
fn bounded_integer_sums_are_accepted_and_verified() {
    // 2^17 − 1 i8 products fit; so do 2^14 dot4s (each in [-65024, 65536]).
    for k in [
        row_sum("i8_fits", Elem::I8Product, Schedule::Any, Some((1 << 17) - 1)),
        row_sum("dot4_fits", Elem::Dot4, Schedule::Any, Some(1 << 14)),
    ] {
        check_wellformed(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
    }
    let k = row_sum("i8_small", Elem::I8Product, Schedule::Any, Some(256));
    let proof = verify_kernel(&k).unwrap_or_else(|e| panic!("{e:?}"));
    // A long order-free sum in uniform code is spread over 32 lanes (a butterfly), and the
    // verifier checked the code against that tree; a short one stays a loop.
    assert!(proof.regions_checked > 0, "{proof:?}");
    let lanes_of = |k: &Kernel| -> Vec<String> {
        let x = baro_dsl::lanes::expand(k).unwrap();
        x.body
            .iter()
            .filter_map(|s| match s {
                baro_dsl::ir::Stmt::Lanes { count, implements: Some(imp), .. } => {
                    Some(format!("{count}: {}", imp.reduce.schedule))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(lanes_of(&k), vec!["32: lanes(32, butterfly)".to_string()]);
    let short = row_sum("i8_short", Elem::I8Product, Schedule::Any, Some(64));
    assert_eq!(lanes_of(&short), Vec::<String>::new());
    verify_kernel(&short).unwrap_or_else(|e| panic!("{e:?}"));
    // Text form: `any` prints and reads back.
    let text = k.to_string();
    assert!(text.contains(", any, "), "{text}");
    assert_eq!(Kernel::from_text(&text).unwrap(), k);
}

#[test]
fn a_rows_sibling_of_an_order_free_sum_is_proven() {
    let m1 = row_sum("q8_dot", Elem::Dot4, Schedule::Any, Some(64));
    // Rows kernel: x strided by k per row, y by n.
    let mut rows = row_sum("q8_dot_rows", Elem::Dot4, Schedule::Any, Some(64));
    let r_param = scalar(&mut rows, "rows", T::INDEX);
    let r = rows.add_var("r", T::INDEX, false);
    let (x, y, kk, n) = (ParamId(0), ParamId(2), ParamId(3), ParamId(4));
    let baro_dsl::ir::Stmt::Store { value, .. } = rows.body[0].clone() else { unreachable!() };
    let mut value = value;
    // x[i] -> x[r * k + i]; y[o] -> y[r * n + o].
    fn shift_x(e: &mut Expr, x: ParamId, off: &Expr) {
        if let Expr::Load { buf: baro_dsl::ir::Buf::Param(b), index } = e {
            if *b == x {
                **index = add(off.clone(), (**index).clone());
                return;
            }
        }
        match e {
            Expr::Reduce(r) => shift_x(&mut r.body, x, off),
            Expr::Dot4 { a, b, c, .. } => {
                shift_x(a, x, off);
                shift_x(b, x, off);
                shift_x(c, x, off);
            }
            _ => {}
        }
    }
    shift_x(&mut value, x, &mul(v(r), p(kk)));
    rows.body = vec![baro_dsl::ir::Stmt::For {
        var: r,
        start: ix(0),
        end: p(r_param),
        step: ix(1),
        body: vec![st(y, add(mul(v(r), p(n)), Expr::GroupId(0)), value)],
    }];
    rows.sibling = Some(Sibling::strided("q8_dot", r_param, vec![(x, p(kk)), (y, p(n))]));
    check_sibling(&rows, &m1).unwrap_or_else(|e| panic!("{e:?}"));
}

/// The i64 sum, which is the i32 result when the bound holds.
fn reference_i8(x: &[i8], w: &[i8], k: usize, len: usize, o: usize) -> i32 {
    let s: i64 = (0..len).map(|i| x[i] as i64 * w[o * k + i] as i64).sum();
    i32::try_from(s).expect("the bound proves the sum fits")
}

#[test]
fn host_order_free_i8_sums_are_exact() {
    const CAP: u64 = 4096;
    let kernel = compile(&row_sum("i8_dot_any", Elem::I8Product, Schedule::Any, Some(CAP)));
    let mut rng = Rng(0x1234_5678);
    for (k, n) in [(0usize, 1usize), (1, 2), (37, 3), (4096, 2), (5000, 2)] {
        let len = k.min(CAP as usize);
        let mut x: Vec<i8> = (0..k).map(|_| rng.next() as i8).collect();
        let mut w: Vec<i8> = (0..k * n).map(|_| rng.next() as i8).collect();
        if n >= 2 && k > 0 {
            // Row 1 and x all −128: the largest sum, 4096 · 2^14 = 2^26 at k = 4096.
            x.iter_mut().for_each(|v| *v = -128);
            w[k..2 * k].iter_mut().for_each(|v| *v = -128);
        }
        let mut y = vec![0i32; n];
        kernel.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(k), Arg::from(n)]).unwrap();
        for o in 0..n {
            assert_eq!(y[o], reference_i8(&x, &w, k, len, o), "k = {k}, output {o}");
        }
        if n >= 2 && len > 0 {
            assert_eq!(y[1], (len as i32) << 14);
        }
    }
}

#[test]
fn host_order_free_dot4_sums_are_exact() {
    let kernel = compile(&row_sum("dot4_any", Elem::Dot4, Schedule::Any, Some(1024)));
    let mut rng = Rng(99);
    let (k, n) = (300usize, 3usize);
    let mut x: Vec<u32> = (0..k).map(|_| rng.next() as u32).collect();
    let mut w: Vec<u32> = (0..k * n).map(|_| rng.next() as u32).collect();
    x[..8].iter_mut().for_each(|v| *v = 0x8080_8080);
    w[2 * k..2 * k + 8].iter_mut().for_each(|v| *v = 0x8080_8080);
    let mut y = vec![0i32; n];
    kernel.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(k), Arg::from(n)]).unwrap();
    for o in 0..n {
        let s: i64 = (0..k)
            .map(|i| {
                let (a, b) = (x[i].to_le_bytes(), w[o * k + i].to_le_bytes());
                (0..4).map(|j| a[j] as i8 as i64 * b[j] as i8 as i64).sum::<i64>()
            })
            .sum();
        assert_eq!(y[o] as i64, s, "output {o}");
    }
}

#[test]
fn an_order_free_dot4_sum_compiles_to_dp4a_and_v_dot4_over_lanes() {
    use crate::gpu_codegen_common::{check_args, parse_kernels, run_tool, tool};
    use baro_dsl::cache::CompileCache;
    use baro_dsl::compile::compile_gpu;
    use baro_dsl::options::CompileOptions;
    use baro_dsl::target::Target;
    let k = row_sum("dot4_any_gpu", Elem::Dot4, Schedule::Any, Some(1024));
    let cache = CompileCache::new(None);
    let o = CompileOptions::default();
    let a = compile_gpu(&k, &Target::Nvptx { sm: 90 }, &o, &cache).unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::str::from_utf8(&a.image).unwrap();
    assert!(ptx.contains("dp4a.s32.s32"), "{ptx}");
    // lanes(32) butterfly: 16-8-4-2-1, then the broadcast from lane 0.
    assert_eq!(ptx.matches("shfl.sync.bfly.b32").count(), 5, "{ptx}");
    let tmp = tempfile::tempdir().unwrap();
    let a = compile_gpu(&k, &"gfx1100".parse::<Target>().unwrap(), &o, &cache).unwrap_or_else(|e| panic!("{e}"));
    let path = tmp.path().join("dot4_any_gpu.hsaco");
    std::fs::write(&path, &a.image).unwrap();
    let metas = parse_kernels(&run_tool(&tool("llvm-readelf-19", "llvm-19"), &["--notes"], &path));
    assert_eq!(metas.len(), 1);
    assert_eq!(metas[0].num(".wavefront_size"), 32);
    assert_eq!(metas[0].num(".private_segment_fixed_size"), 0);
    check_args(&k, &metas[0]);
    let disasm = run_tool(&tool("llvm-objdump-19", "llvm-19"), &["-d", "--mcpu=gfx1100"], &path);
    assert!(disasm.contains("v_dot4_i32_iu8"), "{disasm}");
    assert!(disasm.contains("ds_bpermute_b32"), "lane exchange: {disasm}");
}

#[test]
fn order_free_across_blocks_needs_the_same_proof() {
    // `blocked(32, any)`: block sums in sequence, combined in any order.
    let across = |_: u32| Schedule::Blocked { block: 32, across: Box::new(Schedule::Any) };
    let f = row_sum("float_blocked_any", Elem::F32Product, across(0), Some(256));
    assert!(order_free_error(&f).starts_with("a reduction over f32 cannot be order-free"));
    let long = row_sum("i8_blocked_any_long", Elem::I8Product, across(0), Some(1 << 17));
    assert!(order_free_error(&long).contains("over at most 131072 elements"));
    let ok = row_sum("i8_blocked_any", Elem::I8Product, across(0), Some(4096));
    verify_kernel(&ok).unwrap_or_else(|e| panic!("{e:?}"));
    let text = ok.to_string();
    assert!(text.contains("blocked(32, any)"), "{text}");
    assert_eq!(Kernel::from_text(&text).unwrap(), ok);
    let kernel = compile(&ok);
    let mut rng = Rng(5);
    let (k, n) = (3000usize, 2usize);
    let x: Vec<i8> = (0..k).map(|_| rng.next() as i8).collect();
    let w: Vec<i8> = (0..k * n).map(|_| rng.next() as i8).collect();
    let mut y = vec![0i32; n];
    kernel.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(k), Arg::from(n)]).unwrap();
    for o in 0..n {
        assert_eq!(y[o], reference_i8(&x, &w, k, k, o));
    }
}
