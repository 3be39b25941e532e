// RMSNorm, y = x * rsqrt(mean(x²) + eps) * w, and its rows sibling (one workgroup per row).
use baro_macros::kernel;

#[kernel(grid = [1])]
pub fn rmsnorm(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32) {
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[i] * x[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[i] = x[i] * scale * w[i];
    }
}

#[kernel(grid = [rows], rows_of = rmsnorm, rows = rows, row_stride(x = n, y = n), verify(n = [1, 31, 70]))]
pub fn rmsnorm_rows(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32, rows: usize) {
    let r = group_id(0);
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[r * n + i] * x[r * n + i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[r * n + i] = x[r * n + i] * scale * w[i];
    }
}

#[test]
fn runs() {
    assert_eq!(rmsnorm_rows().params.len(), 6);
    baro_dsl::verify::check_sibling(&rmsnorm_rows(), &rmsnorm()).expect("rmsnorm rows verifies");
}
