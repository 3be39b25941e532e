// A rows kernel on the integer matrix step, proven at build time to compute for every row
// exactly what the m = 1 kernel of order-free dot4 sums (the q8 kernels' form) computes on
// that row: a step's element is Σ_w dot4_i8(a[w], b[w], 0), the sums' own tree on the same
// operands. One block of 32 int8 (8 words) per output, up to 8 outputs, rows in tiles of 16.
use baro_macros::kernel;

#[kernel(grid = [1], verify(n = [1, 3, 8]))]
pub fn dot_block(x: &[u32], w: &[u32], y: &mut [i32], n: usize) {
    for o in par(0..n) {
        y[o] = sum!(k in 0..8, order = any, dot4_i8(x[k], w[o * 8 + k], 0));
    }
}

#[kernel(grid = [1], rows_of = dot_block, rows = rows, row_stride(x = 8, y = n), verify(n = [1, 3, 8]))]
pub fn dot_block_rows(x: &[u32], w: &[u32], y: &mut [i32], n: usize, rows: usize) {
    let sa = shared::<u32, 128>();
    let sb = shared::<u32, 64>();
    let sc = shared::<i32, 128>();
    for i in par(0..n.min(8) * 8) {
        sb[i] = w[i];
    }
    for t in 0..(rows + 15) / 16 {
        let r0 = t * 16;
        let nr = (rows - r0).min(16);
        for i in par(0..nr * 8) {
            sa[i] = x[r0 * 8 + i];
        }
        mma_i8(sc, 0, 8, sa, 0, 8, sb, 0, 8, 1);
        for i in par(0..nr * n) {
            y[r0 * n + i] = sc[i / n * 8 + i % n];
        }
    }
}

#[test]
fn runs() {
    let k = dot_block_rows();
    assert!(k.to_string().contains("mma_i8"));
}
