// Order-free integer sums the verifier proves: i8 products over at most 4096 elements
// (|sum| ≤ 2^26), and `dot4_i8` over 32-bit words of four i8 (a block of 32 = 8 words),
// with a rows sibling proven row for row.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn i8_dot(x: &[i8], w: &[i8], y: &mut [i32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k.min(4096), order = any, (x[i] as i32) * (w[o * k + i] as i32));
}

/// Per block of 32 i8 (8 words): the exact integer dot, then one f32 product per block,
/// summed over blocks in a declared order.
#[kernel(grid = [n])]
pub fn q8_block_dot(x: &[u32], w: &[u32], d: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    let nb = k / 32;
    y[o] = sum!(b in 0..nb, order = seq,
        d[o * nb + b] * (sum!(j in 0..8, order = any, dot4_i8(x[b * 8 + j], w[o * (k / 4) + b * 8 + j], 0)) as f32));
}

#[kernel(grid = [n], rows_of = q8_block_dot, rows = rows, row_stride(x = k / 4, y = n), verify(k = [32, 64, 96]))]
pub fn q8_block_dot_rows(x: &[u32], w: &[u32], d: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let nb = k / 32;
    for r in 0..rows {
        y[r * n + o] = sum!(b in 0..nb, order = seq,
            d[o * nb + b] * (sum!(j in 0..8, order = any, dot4_i8(x[r * (k / 4) + b * 8 + j], w[o * (k / 4) + b * 8 + j], 0)) as f32));
    }
}

/// An integer max needs no bound: it is exact in any order.
#[kernel(grid = [n])]
pub fn i32_max(x: &[i32], y: &mut [i32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = max!(i in 0..k, order = any, x[o * k + i]);
}

#[test]
fn runs() {
    baro_dsl::verify::check_sibling(&q8_block_dot_rows(), &q8_block_dot()).expect("rows sibling verifies");
    for k in [i8_dot(), q8_block_dot(), i32_max()] {
        baro_dsl::verify::check_wellformed(&k).expect("well formed");
    }
    assert!(i8_dot().to_string().contains(", any, "));
}
