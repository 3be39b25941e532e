use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn rows_syntax(x: &[f32], y: &mut [f32], k: usize, n: usize, m: usize) {
    let o = group_id(0);
    // Three rows, two names.
    let [a, b] = sum!(r in 0..3, i in 0..k, order = seq, x[r * k + i]);
    // The row count must be a literal.
    let [c, d] = sum!(r in 0..m, i in 0..k, order = seq, x[r * k + i]);
    // A reduction over rows used as one value.
    y[o] = sum!(r in 0..2, i in 0..k, order = seq, x[r * k + i]);
    // A one-result reduction bound to several names.
    let [e, f] = sum!(i in 0..k, order = seq, x[i]);
    // `let [..]` of something that is not a reduction.
    let [g, h] = x;
    y[o + 1] = a + b + c + d + e + f + g + h;
}

fn main() {}
