use baro_macros::kernel;

// The state staged in workgroup memory, as decode does, but the rows kernel folds the rows
// newest-first there: the workgroup array may carry the state, yet what it carries is checked.
#[kernel(grid = [1], verify(n = [1, 3, 40]))]
pub fn decay_step(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize) {
    let s = shared::<f32, 64>();
    for j in par(0..n) {
        s[j] = state[j];
    }
    for j in par(0..n) {
        s[j] = s[j] * 0.5 + x[j];
        y[j] = s[j];
    }
    for j in par(0..n) {
        state[j] = s[j];
    }
}

#[kernel(grid = [1], rows_of = decay_step, rows = rows, row_stride(x = n, y = n), carry(state), verify(n = [1, 3, 40], rows = [1, 2, 5]))]
pub fn decay_rows(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize, rows: usize) {
    let s = shared::<f32, 64>();
    for j in par(0..n) {
        s[j] = state[j];
    }
    for r in 0..rows {
        for j in par(0..n) {
            let q = rows - 1 - r;
            s[j] = s[j] * 0.5 + x[q * n + j];
            y[q * n + j] = s[j];
        }
    }
    for j in par(0..n) {
        state[j] = s[j];
    }
}

fn main() {}
