use baro_macros::kernel;

// Generic kernels: one definition with `const` parameters, made into several kernels by
// `instances(..)`. A constant reaches the places that need a literal (a workgroup array's
// size, a rows reduction's count, an unrolled loop); a word (`FMT`) keeps or drops the
// statements and parameters marked `#[when(..)]`. Each instance is compiled and proven as if
// written out, and equals the kernel written out by hand.

#[kernel(grid = [1], instances(reverse16(N = 16), reverse32(N = 32)))]
pub fn reverse<const N: usize>(x: &[f32], y: &mut [f32]) {
    let t = shared::<f32, N>();
    for i in par(0..N) {
        t[i] = x[i];
    }
    for i in par(0..N) {
        y[i] = t[N - 1 - i];
    }
}

#[kernel(grid = [1])]
pub fn reverse16_by_hand(x: &[f32], y: &mut [f32]) {
    let t = shared::<f32, 16>();
    for i in par(0..16) {
        t[i] = x[i];
    }
    for i in par(0..16) {
        y[i] = t[16 - 1 - i];
    }
}

#[kernel(grid = [n])]
pub fn dot_f32(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

#[kernel(grid = [n])]
pub fn dot_scaled(x: &[f32], w: &[f32], s: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    let sc = s[o];
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]) * sc;
}

// Tiles of R rows; an instance's own keys (`rows_of`, `grid`) replace the definition's.
#[kernel(grid = [n, (rows + 1) / 2], rows = rows, row_stride(x = k, y = n), verify(k = [1, 33], n = [1, 2], rows = [1, 3, 5]),
         instances(dot_f32_rows2(FMT = F32, R = 2, rows_of = dot_f32),
                   dot_scaled_rows4(FMT = SCALED, R = 4, rows_of = dot_scaled, grid = [n, (rows + 3) / 4])))]
pub fn dot_tile<const FMT: Format, const R: usize>(
    x: &[f32],
    w: &[f32],
    #[when(FMT == SCALED)] s: &[f32],
    y: &mut [f32],
    k: usize,
    n: usize,
    rows: usize,
) {
    let o = group_id(0);
    let r0 = group_id(1) * R;
    let last = rows - 1;
    let ys = sum!(r in 0..R, i in 0..k, order = lanes(32).butterfly(), x[(r0 + r).min(last) * k + i] * w[o * k + i]);
    #[when(FMT == SCALED)]
    let sc = s[o];
    for r in 0..R {
        if r0 + r < rows {
            #[when(FMT == F32)]
            y[(r0 + r) * n + o] = ys[r];
            #[when(FMT == SCALED)]
            y[(r0 + r) * n + o] = ys[r] * sc;
        }
    }
}

#[kernel(grid = [n, (rows + 3) / 4], rows = rows, row_stride(x = k, y = n), verify(k = [1, 33], n = [1, 2], rows = [1, 3, 5]), rows_of = dot_scaled)]
pub fn dot_scaled_rows4_by_hand(x: &[f32], w: &[f32], s: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let r0 = group_id(1) * 4;
    let last = rows - 1;
    let ys = sum!(r in 0..4, i in 0..k, order = lanes(32).butterfly(), x[(r0 + r).min(last) * k + i] * w[o * k + i]);
    let sc = s[o];
    for r in 0..4 {
        if r0 + r < rows {
            y[(r0 + r) * n + o] = ys[r] * sc;
        }
    }
}

/// The IR text of `made` equals that of `by_hand` under `made`'s name.
fn same(made: baro_dsl::ir::Kernel, mut by_hand: baro_dsl::ir::Kernel) {
    by_hand.name = made.name.clone();
    assert_eq!(made.to_string(), by_hand.to_string());
}

#[test]
fn runs() {
    same(reverse16(), reverse16_by_hand());
    assert!(reverse32().to_string().contains("[f32; 32]"), "{}", reverse32());
    same(dot_scaled_rows4(), dot_scaled_rows4_by_hand());
    assert_eq!(dot_f32_rows2().params.len(), 6, "`s` is left out where FMT is F32");
    // Proven while this file compiled; the check runs the same way at run time.
    baro_dsl::verify::check_sibling(&dot_f32_rows2(), &dot_f32()).expect("dot_f32_rows2 is dot_f32's sibling");
    baro_dsl::verify::check_sibling(&dot_scaled_rows4(), &dot_scaled())
        .expect("dot_scaled_rows4 is dot_scaled's sibling");
}
