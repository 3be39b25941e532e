//! RMSNorm, `y = x · rsqrt(mean(x²) + eps) · w`, and the zero-centred variant with `(1 + w)`
//! that Qwen3.5 uses, each with a row-batched sibling (one workgroup per row).
//!
//! Run: `cargo run --example rmsnorm`

use baro::dsl::mathlib;
use baro::dsl::runtime::{Arg, HostRuntime};
use baro::kernel;
use baro::reference::{bits, sum_lanes_butterfly, Rng};

#[kernel(grid = [1])]
pub fn rmsnorm(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32) {
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[i] * x[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[i] = x[i] * scale * w[i];
    }
}

#[kernel(grid = [rows], rows_of = rmsnorm, rows = rows, row_stride(x = n, y = n))]
pub fn rmsnorm_rows(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32, rows: usize) {
    let r = group_id(0);
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[r * n + i] * x[r * n + i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[r * n + i] = x[r * n + i] * scale * w[i];
    }
}

#[kernel(grid = [1])]
pub fn rmsnorm_zc(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32) {
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[i] * x[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[i] = x[i] * scale * (1.0 + w[i]);
    }
}

#[kernel(grid = [rows], rows_of = rmsnorm_zc, rows = rows, row_stride(x = n, y = n))]
pub fn rmsnorm_zc_rows(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32, rows: usize) {
    let r = group_id(0);
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[r * n + i] * x[r * n + i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[r * n + i] = x[r * n + i] * scale * (1.0 + w[i]);
    }
}

/// The same arithmetic in plain Rust; `zero_centred` selects `(1 + w)`.
pub fn reference(x: &[f32], w: &[f32], eps: f32, zero_centred: bool) -> Vec<f32> {
    let n = x.len();
    let ss = sum_lanes_butterfly(n, 32, |i| x[i] * x[i]);
    let scale = mathlib::rsqrt(ss / n as f32 + eps);
    (0..n).map(|i| x[i] * scale * if zero_centred { 1.0 + w[i] } else { w[i] }).collect()
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, rows, eps) = (2048, 6, 1e-6f32);
    let mut rng = Rng::new(3);
    let x = rng.vec_f32(rows * n);
    let w = rng.vec_f32(n);
    let rt = HostRuntime::new()?;
    for (zc, single, batched) in [(false, rmsnorm(), rmsnorm_rows()), (true, rmsnorm_zc(), rmsnorm_zc_rows())] {
        let (single, batched) = (rt.compile(&single)?, rt.compile(&batched)?);
        let mut yb = vec![0.0f32; rows * n];
        batched.launch(&mut [
            Arg::buf(&x),
            Arg::buf(&w),
            Arg::buf_mut(&mut yb),
            Arg::from(n),
            Arg::from(eps),
            Arg::from(rows),
        ])?;
        for r in 0..rows {
            let xr = &x[r * n..(r + 1) * n];
            let mut y = vec![0.0f32; n];
            single.launch(&mut [Arg::buf(xr), Arg::buf(&w), Arg::buf_mut(&mut y), Arg::from(n), Arg::from(eps)])?;
            assert_eq!(bits(&y), bits(&reference(xr, &w, eps, zc)));
            assert_eq!(bits(&y), bits(&yb[r * n..(r + 1) * n]));
        }
        println!(
            "rmsnorm (zero-centred: {zc}) n={n}: host == reference, {rows} rows == {rows} m=1 runs, byte for byte"
        );
    }
    Ok(())
}
