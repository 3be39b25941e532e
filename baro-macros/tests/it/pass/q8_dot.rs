// A Q8_0-style matvec: blocks of 32 i8 weights with one f16 scale per block. Each block's
// dot is sequential; the scaled block results are combined over 32 lanes. The rows sibling
// shares the weights and strides x and y by row.
use baro_macros::kernel;
use half::f16;

#[kernel(grid = [n])]
pub fn q8_matvec(x: &[f32], q: &[i8], d: &[f16], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    let nb = k / 32;
    y[o] = sum!(b in 0..nb, order = lanes(32).butterfly(),
        d[o * nb + b].to_f32() * sum!(j in 0..32, order = seq, (q[o * k + b * 32 + j] as f32) * x[b * 32 + j]));
}

#[kernel(grid = [n], rows_of = q8_matvec, rows = rows, row_stride(x = k, y = n), verify(k = [32, 96, 1056]))]
pub fn q8_matvec_rows(x: &[f32], q: &[i8], d: &[f16], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let nb = k / 32;
    for r in 0..rows {
        y[r * n + o] = sum!(b in 0..nb, order = lanes(32).butterfly(),
            d[o * nb + b].to_f32() * sum!(j in 0..32, order = seq, (q[o * k + b * 32 + j] as f32) * x[r * k + b * 32 + j]));
    }
}

/// The unscaled sum of a quantized row: blocks of 32 summed in order, block sums over lanes.
#[kernel(grid = [n])]
pub fn q8_row_sum(q: &[i8], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = blocked(32, lanes(32).butterfly()), q[o * k + i] as f32);
}

#[test]
fn runs() {
    baro_dsl::verify::check_sibling(&q8_matvec_rows(), &q8_matvec()).expect("q8 rows verifies");
    assert_eq!(q8_row_sum().name, "q8_row_sum");
}
