use baro_macros::kernel;

// A decay scan: each step folds one input row into the carried state and reads it out.
#[kernel(grid = [1])]
pub fn decay_step(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize) {
    for j in par(0..n) {
        state[j] = state[j] * 0.5 + x[j];
        y[j] = state[j];
    }
}

// A "faster" rows kernel that folds the rows newest-first: the carried state differs from the
// one decode builds row by row, so it is not the sibling it claims to be.
#[kernel(grid = [1], rows_of = decay_step, rows = rows, row_stride(x = n, y = n), carry(state))]
pub fn decay_rows(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize, rows: usize) {
    for j in par(0..n) {
        for r in 0..rows {
            let q = rows - 1 - r;
            state[j] = state[j] * 0.5 + x[q * n + j];
            y[q * n + j] = state[j];
        }
    }
}

fn main() {}
