use baro_macros::kernel;

#[kernel(grid = [1], block = 64)]
pub fn scale(x: &[f32], y: &mut [f32], n: usize) {
    for j in par(0..n) {
        y[j] = x[j] * 2.0;
    }
}

// Each workgroup also clears the next row "to save a launch": two writers of one element.
// Run one workgroup after another, the right value is written last; on a GPU the clear may
// land after the next row's workgroup wrote its result.
#[kernel(grid = [rows], block = 64, rows_of = scale, rows = rows, row_stride(x = n, y = n))]
pub fn scale_rows(x: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let r = group_id(0);
    for j in par(0..n) {
        y[r * n + j] = x[r * n + j] * 2.0;
        if r + 1 < rows {
            y[(r + 1) * n + j] = 0.0;
        }
    }
}

#[kernel(grid = [1], block = 64)]
pub fn decay_step(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize) {
    for j in par(0..n) {
        state[j] = state[j] * 0.5 + x[j];
        y[j] = state[j];
    }
}

// One workgroup per row: row r reads the state row r - 1's workgroup writes in the same
// launch, which a GPU runs at the same time.
#[kernel(grid = [rows], block = 64, rows_of = decay_step, rows = rows, row_stride(x = n, y = n), carry(state))]
pub fn decay_groups(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize, rows: usize) {
    let r = group_id(0);
    for j in par(0..n) {
        state[j] = state[j] * 0.5 + x[r * n + j];
        y[r * n + j] = state[j];
    }
}

#[kernel(grid = [1], block = 64)]
pub fn decay_step2(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize) {
    for j in par(0..n) {
        state[j] = state[j] * 0.5 + x[j];
        y[j] = state[j];
    }
}

// The rows as parallel iterations: the carried state is stepped by several at once.
#[kernel(grid = [1], block = 64, rows_of = decay_step2, rows = rows, row_stride(x = n, y = n), carry(state))]
pub fn decay_par(x: &[f32], state: &mut [f32], y: &mut [f32], n: usize, rows: usize) {
    for r in par(0..rows) {
        for j in 0..n {
            state[j] = state[j] * 0.5 + x[r * n + j];
            y[r * n + j] = state[j];
        }
    }
}

fn main() {}
