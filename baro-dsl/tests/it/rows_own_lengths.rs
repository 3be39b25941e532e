//! Reductions over rows whose length depends on the row (`let [..] = sum!(r in 0..R, t in
//! 0..len(r), ..)`, a causal row attending to its own positions): `lanes::expand` writes one
//! loop below the shortest row's length and a second up to the longest's with each row's
//! update under its own guard, so each row takes exactly its elements in its own order. The
//! rows kernels (the texts `#[kernel]` writes for `baro-macros/tests/it/pass/
//! rows_reduce_own_lengths.rs`) are proven siblings; an expansion missing a guard, a
//! length off by one and an order that cannot stop rows apart are rejected; the host JIT gives
//! each row the m = 1 kernel's bytes.

use baro_dsl::ir::{Kernel, Stmt};
use baro_dsl::lanes;
use baro_dsl::verify::{check_expanded, check_sibling, verify_kernel, ErrorKind, SiblingError};

const CAUSAL: &str = r"kernel causal {
    param p0 p: &[f32]
    param p1 v: &[f32]
    param p2 y: &mut [f32]
    param p3 len: usize
    param p4 n: usize
    param p5 ps: usize
    var v0 d: usize
    var v1 t: usize
    grid [p4:n]
    body {
        let v0:d = group_id(0)
        store p2:y[v0:d] = reduce(sum, f32, seq, v1:t, p3:len, mul(load(p0:p, v1:t), load(p1:v, add(mul(v1:t, p4:n), v0:d))))
    }
}";

const CAUSAL_ROWS4: &str = r"kernel causal_rows4 {
    param p0 p: &[f32]
    param p1 v: &[f32]
    param p2 y: &mut [f32]
    param p3 len: usize
    param p4 n: usize
    param p5 ps: usize
    param p6 rows: usize
    var v0 d: usize
    var v1 r0: usize
    var v2 last: usize
    var v3 r: usize
    var v4 t: usize
    var v5 y0: f32
    var v6 y1: f32
    var v7 y2: f32
    var v8 y3: f32
    grid [p4:n, div(add(p6:rows, 3:usize), 4:usize)]
    sibling of causal rows p6:rows strides [p0:p = p5:ps, p2:y = p4:n] steps [p3:len = 1:usize]
    verify p5:ps in [12]
    verify p3:len in [1, 2, 5]
    body {
        let v0:d = group_id(0)
        let v1:r0 = mul(group_id(1), 4:usize)
        let v2:last = sub(p6:rows, 1:usize)
        let [v5:y0, v6:y1, v7:y2, v8:y3] = rows(v3:r, reduce(sum, f32, seq, v4:t, add(p3:len, min(add(v1:r0, v3:r), v2:last)), mul(load(p0:p, add(mul(min(add(v1:r0, v3:r), v2:last), p5:ps), v4:t)), load(p1:v, add(mul(v4:t, p4:n), v0:d)))))
        store p2:y[add(mul(v1:r0, p4:n), v0:d)] = v5:y0
        if lt(add(v1:r0, 1:usize), p6:rows) {
            store p2:y[add(mul(add(v1:r0, 1:usize), p4:n), v0:d)] = v6:y1
        }
        if lt(add(v1:r0, 2:usize), p6:rows) {
            store p2:y[add(mul(add(v1:r0, 2:usize), p4:n), v0:d)] = v7:y2
        }
        if lt(add(v1:r0, 3:usize), p6:rows) {
            store p2:y[add(mul(add(v1:r0, 3:usize), p4:n), v0:d)] = v8:y3
        }
    }
}";

const CAUSAL_LANES: &str = r"kernel causal_lanes {
    param p0 p: &[f32]
    param p1 v: &[f32]
    param p2 y: &mut [f32]
    param p3 len: usize
    param p4 n: usize
    param p5 ps: usize
    var v0 d: usize
    var v1 t: usize
    grid [p4:n]
    body {
        let v0:d = group_id(0)
        store p2:y[v0:d] = reduce(fma_sum, f32, lanes(4, butterfly), v1:t, p3:len, mul(load(p0:p, v1:t), load(p1:v, add(mul(v1:t, p4:n), v0:d))))
    }
}";

const CAUSAL_LANES_ROWS2: &str = r"kernel causal_lanes_rows2 {
    param p0 p: &[f32]
    param p1 v: &[f32]
    param p2 y: &mut [f32]
    param p3 len: usize
    param p4 n: usize
    param p5 ps: usize
    param p6 rows: usize
    var v0 d: usize
    var v1 r0: usize
    var v2 last: usize
    var v3 r: usize
    var v4 t: usize
    var v5 y0: f32
    var v6 y1: f32
    grid [p4:n, div(add(p6:rows, 1:usize), 2:usize)]
    sibling of causal_lanes rows p6:rows strides [p0:p = p5:ps, p2:y = p4:n] steps [p3:len = 1:usize]
    verify p5:ps in [12]
    verify p3:len in [1, 3, 6]
    body {
        let v0:d = group_id(0)
        let v1:r0 = mul(group_id(1), 2:usize)
        let v2:last = sub(p6:rows, 1:usize)
        let [v5:y0, v6:y1] = rows(v3:r, reduce(fma_sum, f32, lanes(4, butterfly), v4:t, add(p3:len, min(add(v1:r0, v3:r), v2:last)), mul(load(p0:p, add(mul(min(add(v1:r0, v3:r), v2:last), p5:ps), v4:t)), load(p1:v, add(mul(v4:t, p4:n), v0:d)))))
        store p2:y[add(mul(v1:r0, p4:n), v0:d)] = v5:y0
        if lt(add(v1:r0, 1:usize), p6:rows) {
            store p2:y[add(mul(add(v1:r0, 1:usize), p4:n), v0:d)] = v6:y1
        }
    }
}";

/// The length of `causal_rows4`'s reduction, as written.
const ROWS4_LEN: &str = "add(p3:len, min(add(v1:r0, v3:r), v2:last))";

fn kernel(text: &str) -> Kernel {
    Kernel::from_text(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn pairs() -> [(Kernel, Kernel); 2] {
    [(kernel(CAUSAL_ROWS4), kernel(CAUSAL)), (kernel(CAUSAL_LANES_ROWS2), kernel(CAUSAL_LANES))]
}

#[test]
fn rows_with_their_own_lengths_are_proven_siblings() {
    for (rows, m1) in pairs() {
        verify_kernel(&rows).unwrap_or_else(|e| panic!("{}: {e:?}", rows.name));
        let p = check_sibling(&rows, &m1).unwrap_or_else(|e| panic!("{}: {e}", rows.name));
        assert!(p.shapes >= 4 && p.outputs > 0, "{}: {p:?}", rows.name);
    }
}

/// The loop past the shortest length: the last `for` whose body holds the rows' guards.
fn tail_loop(b: &mut [Stmt]) -> Option<&mut Vec<Stmt>> {
    for s in b.iter_mut().rev() {
        let guarded = matches!(s, Stmt::For { body, .. } if body.iter().any(|s| matches!(s, Stmt::If { .. })));
        let (Stmt::Lanes { body, .. } | Stmt::For { body, .. } | Stmt::ParFor { body, .. }) = s else { continue };
        if guarded {
            return Some(body);
        }
        if let Some(x) = tail_loop(body) {
            return Some(x);
        }
    }
    None
}

#[test]
fn expansion_shares_each_element_and_guards_only_the_tail() {
    for (rows, _) in pairs() {
        let x = lanes::expand(&rows).unwrap();
        let text = x.to_string();
        // One load of v per loop (shared by the rows), one of p per row and loop, and the
        // claim of the lane region repeating the source's loads once.
        let claims = usize::from(rows.name.contains("lanes"));
        let r = if claims == 1 { 2 } else { 4 };
        assert_eq!(text.matches("load(p1:v").count(), 2 + claims, "{text}");
        assert_eq!(text.matches("load(p0:p").count(), 2 * r + claims, "{text}");
        assert_eq!(text.matches("if lt(").count() - (r - 1), r, "one guard per row in the tail\n{text}");
    }
}

#[test]
fn an_expansion_missing_a_rows_guard_is_rejected() {
    for (rows, _) in pairs() {
        let mut x = lanes::expand(&rows).unwrap();
        let tail = tail_loop(&mut x.body).expect("a guarded loop");
        // Row 0 is the tile's shortest: past its length it must take nothing.
        let at = tail.iter().position(|s| matches!(s, Stmt::If { .. })).unwrap();
        let Stmt::If { then_body, .. } = tail.remove(at) else { unreachable!() };
        tail.splice(at..at, then_body);
        let errs = check_expanded(&rows, &x).expect_err("row 0 takes elements past its length");
        println!("{}: {}", rows.name, errs[0]);
        if rows.name.contains("lanes") {
            assert_eq!(errs[0].kind, ErrorKind::ScheduleNotImplemented, "{}", errs[0]);
            assert!(errs[0].message.contains("(row 0 of 2)"), "{}", errs[0]);
        }
    }
}

#[test]
fn a_row_length_off_by_one_is_not_a_sibling() {
    let longer = CAUSAL_ROWS4.replace(ROWS4_LEN, &format!("add({ROWS4_LEN}, 1:usize)"));
    assert_ne!(longer, CAUSAL_ROWS4);
    match check_sibling(&kernel(&longer), &kernel(CAUSAL)) {
        Err(SiblingError::Arithmetic(m)) => println!("{}", m.first_difference),
        other => panic!("expected an arithmetic mismatch, found {other:?}"),
    }
}

#[test]
fn orders_whose_rows_cannot_stop_apart_are_refused() {
    for order in ["chunked(4, seq)", "blocked(4, seq)"] {
        let k = kernel(&CAUSAL_ROWS4.replace("reduce(sum, f32, seq,", &format!("reduce(sum, f32, {order},")));
        let e = lanes::expand(&k).expect_err(order);
        println!("{e}");
        assert!(e.message.contains("whose length depends on the row"), "{order}: {e}");
        assert!(e.message.contains("expected `seq` or `lanes(..)`"), "{order}: {e}");
    }
}

/// The host JIT runs each rows kernel and its m = 1 kernel once per row (on that row's slice
/// of p and its length len + r): byte-equal, at row counts around the tiles and lengths around
/// the lane count.
#[cfg(feature = "llvm")]
#[test]
fn host_rows_with_their_own_lengths_equal_m1_per_row() {
    use crate::host_common::{compile, Rng};
    use baro_dsl::runtime::Arg;
    let mut compared = 0;
    for (rows_k, m1_k) in pairs() {
        let (a, b) = (compile(&rows_k), compile(&m1_k));
        for (len, m, n) in [(1usize, 1usize, 3usize), (1, 6, 2), (3, 5, 4), (9, 9, 3), (30, 11, 2)] {
            let ps = len + m + 2;
            let mut rng = Rng(0x51ed + (len * 97 + m) as u64);
            let (p, v) = (rng.vec_f32(m * ps), rng.vec_f32((len + m) * n));
            let mut y = vec![f32::NAN; m * n];
            a.launch(&mut [
                Arg::buf(&p),
                Arg::buf(&v),
                Arg::buf_mut(&mut y),
                Arg::from(len),
                Arg::from(n),
                Arg::from(ps),
                Arg::from(m),
            ])
            .unwrap();
            for r in 0..m {
                let mut y1 = vec![f32::NAN; n];
                b.launch(&mut [
                    Arg::buf(&p[r * ps..(r + 1) * ps]),
                    Arg::buf(&v),
                    Arg::buf_mut(&mut y1),
                    Arg::from(len + r),
                    Arg::from(n),
                    Arg::from(ps),
                ])
                .unwrap();
                let got: Vec<u32> = y[r * n..(r + 1) * n].iter().map(|x| x.to_bits()).collect();
                let want: Vec<u32> = y1.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "{} len={len} rows={m} row {r}", rows_k.name);
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 2 * (1 + 6 + 5 + 9 + 11));
}
