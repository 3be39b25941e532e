use baro_macros::kernel;

// A rows kernel without carried state may not accumulate through a workgroup array across
// its rows: only carried state (here none is declared) is a recurrence over rows.
#[kernel(grid = [1], verify(n = [1, 3]))]
pub fn scale(x: &[f32], y: &mut [f32], n: usize) {
    for j in par(0..n) {
        y[j] = x[j] * 0.5;
    }
}

#[kernel(grid = [1], rows_of = scale, rows = rows, row_stride(x = n, y = n), verify(n = [1, 3], rows = [1, 2]))]
pub fn scale_rows(x: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let s = shared::<f32, 64>();
    for j in par(0..n) {
        s[j] = 0.0;
    }
    for r in 0..rows {
        for j in par(0..n) {
            s[j] = s[j] + x[r * n + j];
            y[r * n + j] = x[r * n + j] * 0.5;
        }
    }
}

fn main() {}
