use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn copy(x: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o];
}

// A rows kernel cannot derive another rows kernel.
#[kernel(grid = [n, rows], rows_of = copy, rows = rows, row_stride(x = n, y = n), rows(name = copy_rows_rows))]
pub fn copy_rows(x: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let o = group_id(0);
    let r = group_id(1);
    y[r * n + o] = x[r * n + o];
}

fn main() {}
