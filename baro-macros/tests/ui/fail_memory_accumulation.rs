// Summing into a global (or workgroup) array across loop iterations is a reduction whose
// order nobody declared, exactly like summing into a local: it is rejected at the store.
use baro_macros::kernel;

#[kernel(grid = [1], block = 64)]
pub fn column_sums(x: &[f32], y: &mut [f32], m: usize, n: usize) {
    for j in par(0..n) {
        y[j] = 0.0;
        for i in 0..m {
            y[j] = y[j] + x[i * n + j];
        }
    }
}

fn main() {}
