//! Matrix-vector products with f16 and bf16 weights split over 256 lanes per output (wider
//! than one wave on every GPU: the butterfly's high steps cross waves through workgroup
//! memory), and their row-batched siblings. Each weight is widened to f32 exactly before the
//! multiply; every lane sums its strided slice in order, then a 256-lane butterfly combines.
//!
//! Run: `cargo run --example matvec_wide`

use baro::dsl::runtime::{Arg, HostRuntime};
use baro::kernel;
use baro::reference::{bits, sum_lanes_butterfly, Rng};
use half::{bf16, f16};

/// Lanes per output row.
pub const LANES: usize = 256;

#[kernel(grid = [n])]
pub fn matvec_wide_f16(x: &[f32], w: &[f16], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(256).butterfly(), x[i] * w[o * k + i].to_f32());
}

#[kernel(grid = [n], rows_of = matvec_wide_f16, rows = rows, row_stride(x = k, y = n))]
pub fn matvec_wide_f16_rows(x: &[f32], w: &[f16], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(256).butterfly(), x[r * k + i] * w[o * k + i].to_f32());
    }
}

#[kernel(grid = [n])]
pub fn matvec_wide_bf16(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(256).butterfly(), x[i] * w[o * k + i].to_f32());
}

#[kernel(grid = [n], rows_of = matvec_wide_bf16, rows = rows, row_stride(x = k, y = n))]
pub fn matvec_wide_bf16_rows(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(256).butterfly(), x[r * k + i] * w[o * k + i].to_f32());
    }
}

/// The plain-Rust schedule: 256 strided lane sums from +0.0, then the butterfly.
pub fn reference(x: &[f32], w: &[f32], k: usize, n: usize) -> Vec<f32> {
    (0..n).map(|o| sum_lanes_butterfly(k, LANES, |i| x[i] * w[o * k + i])).collect()
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (k, n, rows) = (2053, 48, 3);
    let mut rng = Rng::new(13);
    let x = rng.vec_f32(rows * k);
    let w32 = rng.vec_f32(n * k);
    let wh: Vec<f16> = w32.iter().map(|&v| f16::from_f32(v)).collect();
    let wb: Vec<bf16> = w32.iter().map(|&v| bf16::from_f32(v)).collect();
    let wh32: Vec<f32> = wh.iter().map(|v| v.to_f32()).collect();
    let wb32: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();

    let rt = HostRuntime::new()?;
    let (h1, hr) = (rt.compile(&matvec_wide_f16())?, rt.compile(&matvec_wide_f16_rows())?);
    let (b1, br) = (rt.compile(&matvec_wide_bf16())?, rt.compile(&matvec_wide_bf16_rows())?);

    let mut yh = vec![0.0f32; rows * n];
    let mut yb = vec![0.0f32; rows * n];
    hr.launch(&mut [Arg::buf(&x), Arg::buf(&wh), Arg::buf_mut(&mut yh), Arg::from(k), Arg::from(n), Arg::from(rows)])?;
    br.launch(&mut [Arg::buf(&x), Arg::buf(&wb), Arg::buf_mut(&mut yb), Arg::from(k), Arg::from(n), Arg::from(rows)])?;
    for r in 0..rows {
        let xr = &x[r * k..(r + 1) * k];
        let (mut y1, mut y2) = (vec![0.0f32; n], vec![0.0f32; n]);
        h1.launch(&mut [Arg::buf(xr), Arg::buf(&wh), Arg::buf_mut(&mut y1), Arg::from(k), Arg::from(n)])?;
        b1.launch(&mut [Arg::buf(xr), Arg::buf(&wb), Arg::buf_mut(&mut y2), Arg::from(k), Arg::from(n)])?;
        assert_eq!(bits(&y1), bits(&reference(xr, &wh32, k, n)));
        assert_eq!(bits(&y2), bits(&reference(xr, &wb32, k, n)));
        assert_eq!(bits(&y1), bits(&yh[r * n..(r + 1) * n]));
        assert_eq!(bits(&y2), bits(&yb[r * n..(r + 1) * n]));
    }
    println!("matvec_wide_f16 and matvec_wide_bf16 ({LANES} lanes), k={k} n={n}: host == plain-Rust reference, rows sibling over {rows} rows == m=1 replay, byte for byte");
    Ok(())
}
