use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn rows_results(x: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let ys = sum!(r in 0..4, i in 0..k, order = seq, x[r * k + i]);
    // A loop whose bounds are not literals is not unrolled: its variable is no row number.
    for r in 0..rows {
        y[r * n + o] = ys[r];
    }
    // Rows 4 and 5 do not exist.
    for r in 2..6 {
        y[r * n + o] = ys[r];
    }
    // The results are read one at a time.
    y[o] = ys;
    // They are immutable.
    ys = 0.0;
}

fn main() {}
