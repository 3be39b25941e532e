// A rows kernel that reads the matrix step's tile transposed (row and column swapped) is not
// the sibling of the m = 1 kernel of dot4 sums: the build fails at the store, naming the
// first output that differs and the first differing operand.
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
            y[r0 * n + i] = sc[i % n * 8 + i / n];
        }
    }
}

fn main() {}
