// A rows kernel on the integer matrix step whose tile rows hold half a block each (the other
// half zero words) is the sibling of an m = 1 kernel that sums each half on its own: a zero
// word is no term of the step's sum (its dot is exactly 0), so row 2o of the tile is the low
// half's `sum!(i in 0..4, ..)` and row 2o + 1 the high half's, node for node.
use baro_macros::kernel;

#[kernel(grid = [1], verify(n = [1, 3, 8]))]
pub fn halves(x: &[u32], w: &[u32], y: &mut [i32], n: usize) {
    for o in par(0..n) {
        y[o] = 3 * sum!(i in 0..4, order = any, dot4_i8(w[o * 8 + i], x[i], 0))
            + 5 * sum!(i in 0..4, order = any, dot4_i8(w[o * 8 + i + 4], x[i + 4], 0));
    }
}

#[kernel(grid = [1], rows_of = halves, rows = rows, row_stride(x = 8, y = n), verify(n = [1, 3, 8]))]
pub fn halves_rows(x: &[u32], w: &[u32], y: &mut [i32], n: usize, rows: usize) {
    let sa = shared::<u32, 128>();
    let sb = shared::<u32, 64>();
    let sc = shared::<i32, 128>();
    for i in par(0..n.min(8) * 16) {
        // Tile row 2o + h: output o's words of half h, zeros elsewhere.
        sa[i] = if i % 8 / 4 == i / 8 % 2 {
            if i / 8 % 2 == 0 {
                w[i / 16 * 8 + i % 8]
            } else {
                w[i / 16 * 8 + i % 4 + 4]
            }
        } else {
            0
        };
    }
    for t in 0..(rows + 7) / 8 {
        let r0 = t * 8;
        let nr = (rows - r0).min(8);
        for i in par(0..nr * 8) {
            sb[i] = x[r0 * 8 + i];
        }
        mma_i8(sc, 0, 8, sa, 0, 8, sb, 0, 8, 1);
        for i in par(0..nr * n) {
            y[(r0 + i / n) * n + i % n] = 3 * sc[i % n * 16 + i / n] + 5 * sc[i % n * 16 + 8 + i / n];
        }
    }
}

#[test]
fn runs() {
    assert!(halves_rows().to_string().contains("mma_i8"));
}
