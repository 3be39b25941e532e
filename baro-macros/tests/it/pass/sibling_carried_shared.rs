use baro_macros::kernel;

// A decay scan whose state is staged in workgroup memory: decode copies it in, steps it once
// and copies it back; the rows kernel copies it in once, steps it row after row there and
// copies it back after the last row. The workgroup array carries the state between rows, and
// the proof compares what leaves the kernel (every row's y, the final state) with decode's.
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
            s[j] = s[j] * 0.5 + x[r * n + j];
            y[r * n + j] = s[j];
        }
    }
    for j in par(0..n) {
        state[j] = s[j];
    }
}

#[test]
fn runs() {
    // The build proved the pair; the verifier run here must agree.
    baro_dsl::verify::check_sibling(&decay_rows(), &decay_step()).expect("decay_rows is decay_step's rows sibling");
}
