//! A blocked-quantized matrix-vector product in the Q8_0 style: weights in blocks of 32
//! signed bytes with one f16 scale per block. Each block's dot product runs sequentially,
//! then the scaled block results are combined over 32 lanes with an xor butterfly.
//!
//! Run: `cargo run --example q8_dot`

use baro::dsl::runtime::{Arg, HostRuntime};
use baro::kernel;
use baro::reference::{bits, sum_lanes_butterfly, sum_sequential, Rng};
use half::f16;

#[kernel(grid = [n])]
pub fn q8_matvec(x: &[f32], q: &[i8], d: &[f16], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    let nb = k / 32;
    y[o] = sum!(b in 0..nb, order = lanes(32).butterfly(),
        d[o * nb + b].to_f32() * sum!(j in 0..32, order = seq, (q[(o * nb + b) * 32 + j] as f32) * x[b * 32 + j]));
}

#[kernel(grid = [n], rows_of = q8_matvec, rows = rows, row_stride(x = k, y = n))]
pub fn q8_matvec_rows(x: &[f32], q: &[i8], d: &[f16], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let nb = k / 32;
    for r in 0..rows {
        y[r * n + o] = sum!(b in 0..nb, order = lanes(32).butterfly(),
            d[o * nb + b].to_f32() * sum!(j in 0..32, order = seq, (q[(o * nb + b) * 32 + j] as f32) * x[r * k + b * 32 + j]));
    }
}

pub fn reference(x: &[f32], q: &[i8], d: &[f16], k: usize, n: usize) -> Vec<f32> {
    let nb = k / 32;
    (0..n)
        .map(|o| {
            sum_lanes_butterfly(nb, 32, |b| {
                d[o * nb + b].to_f32() * sum_sequential(32, |j| q[(o * nb + b) * 32 + j] as f32 * x[b * 32 + j])
            })
        })
        .collect()
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (k, n, rows) = (32 * 70, 40, 3);
    let mut rng = Rng::new(9);
    let x = rng.vec_f32(rows * k);
    let q: Vec<i8> = (0..n * k).map(|_| rng.below(256) as u8 as i8).collect();
    let d: Vec<f16> = (0..n * k / 32).map(|_| f16::from_f32(rng.f32() / 64.0)).collect();
    let rt = HostRuntime::new()?;
    let (single, batched) = (rt.compile(&q8_matvec())?, rt.compile(&q8_matvec_rows())?);
    let mut yb = vec![0.0f32; rows * n];
    batched.launch(&mut [
        Arg::buf(&x),
        Arg::buf(&q),
        Arg::buf(&d),
        Arg::buf_mut(&mut yb),
        Arg::from(k),
        Arg::from(n),
        Arg::from(rows),
    ])?;
    for r in 0..rows {
        let xr = &x[r * k..(r + 1) * k];
        let mut y = vec![0.0f32; n];
        single.launch(&mut [
            Arg::buf(xr),
            Arg::buf(&q),
            Arg::buf(&d),
            Arg::buf_mut(&mut y),
            Arg::from(k),
            Arg::from(n),
        ])?;
        assert_eq!(bits(&y), bits(&reference(xr, &q, &d, k, n)));
        assert_eq!(bits(&y), bits(&yb[r * n..(r + 1) * n]));
    }
    println!("q8_matvec k={k} n={n}: host == reference, {rows} rows == {rows} m=1 runs, byte for byte");
    Ok(())
}
