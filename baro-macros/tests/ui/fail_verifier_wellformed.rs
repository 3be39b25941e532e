// Errors the verifier's well-formedness check finds land on the statement it names.
use baro_macros::kernel;

#[kernel(grid = [1])]
pub fn scatter(x: &[f32], y: &mut [f32], n: usize) {
    for j in par(0..n) {
        y[j] = x[j];
        if j == 0 {
            barrier();
        }
    }
}

fn main() {}
