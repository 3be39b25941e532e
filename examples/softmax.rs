//! Softmax over a row: a max reduction (exact in any order), baro's own `exp`, and a sum in
//! a declared order; the row-batched sibling runs one workgroup per row.
//!
//! Run: `cargo run --example softmax`

use baro::dsl::mathlib;
use baro::dsl::runtime::{Arg, HostRuntime};
use baro::kernel;
use baro::reference::{bits, max_lanes_butterfly, sum_lanes_butterfly, Rng};

#[kernel(grid = [1])]
pub fn softmax(x: &[f32], y: &mut [f32], n: usize) {
    let m = max!(i in 0..n, order = lanes(32).butterfly(), x[i]);
    let s = sum!(i in 0..n, order = lanes(32).butterfly(), exp(x[i] - m));
    let inv = 1.0 / s;
    for i in par(0..n) {
        y[i] = exp(x[i] - m) * inv;
    }
}

#[kernel(grid = [rows], rows_of = softmax, rows = rows, row_stride(x = n, y = n))]
pub fn softmax_rows(x: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let r = group_id(0);
    let m = max!(i in 0..n, order = lanes(32).butterfly(), x[r * n + i]);
    let s = sum!(i in 0..n, order = lanes(32).butterfly(), exp(x[r * n + i] - m));
    let inv = 1.0 / s;
    for i in par(0..n) {
        y[r * n + i] = exp(x[r * n + i] - m) * inv;
    }
}

pub fn reference(x: &[f32]) -> Vec<f32> {
    let n = x.len();
    let m = max_lanes_butterfly(n, 32, |i| x[i]);
    let s = sum_lanes_butterfly(n, 32, |i| mathlib::exp(x[i] - m));
    let inv = 1.0 / s;
    x.iter().map(|&v| mathlib::exp(v - m) * inv).collect()
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, rows) = (1000, 4);
    let mut rng = Rng::new(5);
    let x: Vec<f32> = rng.vec_f32(rows * n).iter().map(|v| v * 8.0).collect();
    let rt = HostRuntime::new()?;
    let (single, batched) = (rt.compile(&softmax())?, rt.compile(&softmax_rows())?);
    let mut yb = vec![0.0f32; rows * n];
    batched.launch(&mut [Arg::buf(&x), Arg::buf_mut(&mut yb), Arg::from(n), Arg::from(rows)])?;
    for r in 0..rows {
        let xr = &x[r * n..(r + 1) * n];
        let mut y = vec![0.0f32; n];
        single.launch(&mut [Arg::buf(xr), Arg::buf_mut(&mut y), Arg::from(n)])?;
        assert_eq!(bits(&y), bits(&reference(xr)));
        assert_eq!(bits(&y), bits(&yb[r * n..(r + 1) * n]));
    }
    println!("softmax n={n}: host == reference, {rows} rows == {rows} m=1 runs, byte for byte");
    Ok(())
}
