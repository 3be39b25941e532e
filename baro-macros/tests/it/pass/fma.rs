// `fma(a, b, c)` rounds once, as a value and inside a declared reduction's terms; a rows
// sibling that writes the same fmas in the same order is proven.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn fused(x: &[f32], w: &[f32], b: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    let dot = sum!(i in 0..k, order = lanes(32).butterfly(), fma(x[i], w[o * k + i], b[i]));
    y[o] = fma(dot, 0.5, b[o]);
}

#[kernel(grid = [n], rows_of = fused, rows = rows, row_stride(x = k, y = n), verify(k = [1, 31, 70]))]
pub fn fused_rows(x: &[f32], w: &[f32], b: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        let dot = sum!(i in 0..k, order = lanes(32).butterfly(), fma(x[r * k + i], w[o * k + i], b[i]));
        y[r * n + o] = fma(dot, 0.5, b[o]);
    }
}

#[test]
fn runs() {
    let k = fused_rows();
    let text = k.to_string();
    assert_eq!(text.matches("fma(").count(), 2, "two fma nodes, no multiply-add:\n{text}");
    assert_eq!(baro_dsl::ir::Kernel::from_text(&text).as_ref(), Ok(&k));
    let _ = fused();
    check_fused();
}

// `sum!(.., fma(x, w))`: every lane accumulates `acc = fma(x_i, w_i, acc)` in its declared
// order, the lane partials are added by the butterfly; the rows sibling does the same per row.
#[kernel(grid = [n])]
pub fn fused_dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), fma(x[i], w[o * k + i]));
}

#[kernel(grid = [n], rows_of = fused_dot, rows = rows, row_stride(x = k, y = n))]
pub fn fused_dot_rows(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), fma(x[r * k + i], w[o * k + i]));
    }
}

fn check_fused() {
    let k = fused_dot_rows();
    let text = k.to_string();
    assert!(text.contains("reduce(fma_sum, f32, lanes(32, butterfly)"), "{text}");
    assert_eq!(baro_dsl::ir::Kernel::from_text(&text).as_ref(), Ok(&k));
    let _ = fused_dot();
}
