use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn copy(x: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o];
}

#[kernel(grid = [n], rows_of = cpy, rows = rows, row_stride(x = n, y = n))]
pub fn copy_rows(x: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = x[r * n + o];
    }
}

fn main() {}
