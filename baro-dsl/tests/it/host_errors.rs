//! Launch and compile errors of the host runtime: each says what was expected and what was
//! found, and a failed launch leaves every user buffer untouched. Also: the compile cache,
//! `Send + Sync`, and concurrent launches.

use crate::host_common;

use baro_dsl::ir::{BinOp, Buf, Expr, Kernel, Reduce, ReduceOp, ScalarType as T, Stmt};
use baro_dsl::runtime::{Arg, HostRuntime, LaunchError};
use baro_dsl::Schedule;
use half::bf16;
use host_common::*;

/// `matvec(x: &[f32], w: &[bf16], y: &mut [f32], k: usize)`, grid n; reads `x[0..k]`.
fn matvec() -> Kernel {
    let mut k = Kernel::new("matvec");
    let x = input(&mut k, "x", T::F32);
    let w = input(&mut k, "w", T::BF16);
    let y = output(&mut k, "y", T::F32);
    let kk = scalar(&mut k, "k", T::INDEX);
    let n = scalar(&mut k, "n", T::INDEX);
    k.grid = vec![p(n)];
    let i = k.add_var("i", T::INDEX, false);
    let body = mul(ld(x, v(i)), Expr::cast(T::F32, ld(w, add(mul(Expr::GroupId(0), p(kk)), v(i)))));
    let r = Reduce {
        op: ReduceOp::Add,
        ty: T::F32,
        schedule: Schedule::lanes(32, baro_dsl::Combine::Butterfly),
        var: i,
        len: p(kk),
        body,
    };
    k.body = vec![st(y, Expr::GroupId(0), Expr::Reduce(Box::new(r)))];
    k
}

fn err(r: Result<(), LaunchError>) -> String {
    match r {
        Ok(()) => panic!("expected a launch error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn argument_errors_say_expected_and_found() {
    let c = compile(&matvec());
    let x = vec![1f32; 64];
    let w = vec![bf16::ONE; 64 * 2];
    let w32 = vec![1f32; 64 * 2];
    let mut y = vec![0f32; 2];
    assert_eq!(err(c.launch(&mut [Arg::buf(&x), Arg::buf(&w)])), "kernel `matvec` takes 5 arguments, found 2");
    assert_eq!(
        err(c.launch(&mut [Arg::buf(&x), Arg::buf(&w32), Arg::buf_mut(&mut y), Arg::from(64usize), Arg::from(2usize)])),
        "argument `w` (#1): expected &[bf16], found &[f32]"
    );
    assert_eq!(
        err(c.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf(&y), Arg::from(64usize), Arg::from(2usize)])),
        "argument `y` (#2): the kernel writes it, expected &mut [f32], found &[f32]"
    );
    assert_eq!(
        err(c.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(64.0f32), Arg::from(2usize)])),
        "argument `k` (#3): expected usize, found f32"
    );
    assert_eq!(
        err(c.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::from(1u32), Arg::from(64usize), Arg::from(2usize)])),
        "argument `y` (#2): expected &mut [f32], found u32"
    );
    assert_eq!(y, vec![0f32; 2]);
}

#[test]
fn out_of_bounds_is_an_error_and_leaves_buffers_untouched() {
    let c = compile(&matvec());
    let x = vec![1f32; 64];
    let w = vec![bf16::ONE; 71 * 2];
    let mut y = vec![7f32; 2];
    // k = 71 > x.len(): lane 6 reads x[70] first... whichever lane gets there first, the
    // message names the buffer, the index and the length.
    let e =
        err(c.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(71usize), Arg::from(2usize)]));
    assert!(e.starts_with("kernel `matvec` read `x[") && e.ends_with("]` but `x` has 64 elements"), "{e}");
    let idx: usize = e["kernel `matvec` read `x[".len()..e.find("]`").unwrap()].parse().unwrap();
    assert!((64..71).contains(&idx), "{e}");
    assert_eq!(y, vec![7f32; 2], "a failed launch must not write user buffers");
    // y too short: the second workgroup's store fails after the first one stored y[0].
    let mut short = vec![7f32; 1];
    let e = err(c.launch(&mut [
        Arg::buf(&x),
        Arg::buf(&w),
        Arg::buf_mut(&mut short),
        Arg::from(64usize),
        Arg::from(2usize),
    ]));
    assert_eq!(e, "kernel `matvec` wrote `y[1]` but `y` has 1 elements");
    assert_eq!(short, vec![7f32], "the store to y[0] of workgroup 0 must not leak out");
}

#[test]
fn shared_and_signed_index_errors() {
    let mut k = Kernel::new("bad_shared");
    let y = output(&mut k, "y", T::F32);
    let at = scalar(&mut k, "at", T::I32);
    let tile = k.add_shared("tile", T::F32, 4);
    k.grid = vec![ix(1)];
    let at_index = Expr::cast(T::INDEX, p(at));
    k.body = vec![
        st(y, p(at), Expr::f32(2.0)),
        Stmt::Store { buf: Buf::Shared(tile), index: at_index.clone(), value: Expr::f32(1.0) },
        st(y, p(at), Expr::load(Buf::Shared(tile), at_index)),
    ];
    let c = compile(&k);
    let mut ys = vec![0f32; 8];
    assert_eq!(
        err(c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(-1i32)])),
        "kernel `bad_shared` wrote `y[-1]` but `y` has 8 elements"
    );
    assert_eq!(
        err(c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(5i32)])),
        "kernel `bad_shared` wrote shared `tile[5]` but `tile` has 4 elements"
    );
    assert_eq!(ys, vec![0f32; 8]);
    c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(3i32)]).unwrap();
    assert_eq!(ys, vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn grid_errors() {
    let mut k = Kernel::new("grid");
    let y = output(&mut k, "y", T::U64);
    let a = scalar(&mut k, "a", T::INDEX);
    let b = scalar(&mut k, "b", T::INDEX);
    k.grid = vec![p(a), bin(BinOp::Mul, p(b), p(b))];
    k.body = vec![st(y, Expr::GroupId(1), Expr::GroupId(0))];
    let c = compile(&k);
    let mut ys = vec![0u64; 4];
    assert_eq!(
        err(c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(0usize), Arg::from(1usize)])),
        "kernel `grid` grid axis 0: expected at least 1 workgroup, found 0"
    );
    assert_eq!(
        err(c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(1usize), Arg::from(1usize << 40)])),
        "kernel `grid` grid axis 1: 1208925819614629174706176 workgroups overflow u64"
    );
    c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(3usize), Arg::from(2usize)]).unwrap();
    assert_eq!(ys, vec![2, 2, 2, 2], "the last workgroup of each row wins: group (2, y)");
}

#[test]
fn a_grid_size_may_be_chosen_by_size() {
    // grid = [if a >= 4 { (a + 3) / 4 } else { a }]: each workgroup writes its index.
    let mut k = Kernel::new("grid_select");
    let y = output(&mut k, "y", T::U64);
    let a = scalar(&mut k, "a", T::INDEX);
    let wide = bin(BinOp::Div, bin(BinOp::Add, p(a), ix(3)), ix(4));
    k.grid = vec![Expr::select(bin(BinOp::Ge, p(a), ix(4)), wide, p(a))];
    k.body = vec![st(y, Expr::GroupId(0), Expr::GroupId(0))];
    let c = compile(&k);
    for (a, groups) in [(1usize, 1usize), (3, 3), (4, 1), (9, 3)] {
        let mut ys = vec![99u64; 4];
        c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(a)]).unwrap();
        let want: Vec<u64> = (0..4).map(|i| if i < groups { i as u64 } else { 99 }).collect();
        assert_eq!(ys, want, "a = {a}: {groups} workgroups");
    }
}

#[test]
fn zero_step_loop_is_an_error_not_a_hang() {
    let mut k = Kernel::new("step");
    let y = output(&mut k, "y", T::U64);
    let s = scalar(&mut k, "s", T::INDEX);
    k.grid = vec![ix(1)];
    let j = k.add_var("j", T::INDEX, false);
    k.body = vec![Stmt::For { var: j, start: ix(0), end: ix(4), step: p(s), body: vec![st(y, v(j), v(j))] }];
    let c = compile(&k);
    let mut ys = vec![9u64; 4];
    assert_eq!(
        err(c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(0usize)])),
        "kernel `step`: a `for` loop has step 0, expected a positive step"
    );
    assert_eq!(ys, vec![9; 4]);
    c.launch(&mut [Arg::buf_mut(&mut ys), Arg::from(2usize)]).unwrap();
    assert_eq!(ys, vec![0, 9, 2, 9]);
}

#[test]
fn malformed_kernel_is_a_compile_error() {
    let mut k = Kernel::new("malformed");
    let y = output(&mut k, "y", T::F32);
    k.grid = vec![ix(1)];
    k.body = vec![st(y, ix(0), add(Expr::f32(1.0), ix(1)))];
    let e = rt().compile(&k).err().expect("a type error must not compile").to_string();
    assert!(e.contains("malformed"), "{e}");
}

#[test]
fn cache_send_sync_and_concurrent_launches() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HostRuntime>();
    assert_send_sync::<baro_dsl::runtime::HostKernel>();
    let a = compile(&matvec());
    let b = compile(&matvec());
    assert!(std::sync::Arc::ptr_eq(&a, &b), "an equal kernel must hit the cache");
    let x: Vec<f32> = Rng(1).vec_f32(100);
    let w: Vec<bf16> = Rng(2).vec_f32(300).into_iter().map(bf16::from_f32).collect();
    let run = |c: &baro_dsl::runtime::HostKernel| {
        let mut y = vec![0f32; 3];
        c.launch(&mut [Arg::buf(&x), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(100usize), Arg::from(3usize)])
            .unwrap();
        bits(&y)
    };
    let want = run(&a);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4).map(|_| s.spawn(|| run(&a))).collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), want);
        }
    });
}
