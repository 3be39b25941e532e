use baro_macros::kernel;

// A `max!` over rows whose results are read by literal indices and scaled before their
// store. (`rows_reduce.rs`' `dot_rows4_indexed` reads them in an unrolled loop.)
#[kernel(grid = [n])]
pub fn peak(x: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = max!(i in 0..k, order = lanes(32).butterfly(), x[o * k + i]) * 0.5;
}

#[kernel(grid = [n, (rows + 1) / 2], rows_of = peak, rows = rows, row_stride(x = n * k, y = n))]
pub fn peak_rows2(x: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let r0 = group_id(1) * 2;
    let ms = max!(r in 0..2, i in 0..k, order = lanes(32).butterfly(), x[(r0 + r).min(rows - 1) * n * k + o * k + i]);
    y[r0 * n + o] = ms[0] * 0.5;
    if r0 + 1 < rows {
        y[(r0 + 1) * n + o] = ms[1] * 0.5;
    }
}

#[test]
fn runs() {
    // The build proved the pair; the verifier run here must agree.
    baro_dsl::verify::check_sibling(&peak_rows2(), &peak()).expect("peak_rows2 is peak's rows sibling");
}
