//! A matrix-vector product with f32 weights and its row-batched sibling.
//!
//! `matvec` computes one output per workgroup: 32 lanes each sum a strided slice of the row,
//! then an xor butterfly combines the 32 partials. `matvec_rows` does the same for `rows`
//! input vectors; the build fails if any row's arithmetic differs from `matvec`'s.
//!
//! Run: `cargo run --example matvec`

use baro::dsl::runtime::{Arg, HostRuntime};
use baro::kernel;
use baro::reference::{bits, sum_lanes_butterfly, sum_sequential, Rng};

#[kernel(grid = [n])]
pub fn matvec(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).strided().butterfly(), x[i] * w[o * k + i]);
}

/// Row `r` reads `x[r * k ..]` and writes `y[r * n ..]`; the weights are shared by every row.
#[kernel(grid = [n], rows_of = matvec, rows = rows, row_stride(x = k, y = n))]
pub fn matvec_rows(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).strided().butterfly(), x[r * k + i] * w[o * k + i]);
    }
}

/// The schedule spelled out in plain Rust.
pub fn reference(x: &[f32], w: &[f32], k: usize, n: usize) -> Vec<f32> {
    (0..n).map(|o| sum_lanes_butterfly(k, 32, |i| x[i] * w[o * k + i])).collect()
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (k, n, rows) = (1031, 64, 5);
    let mut rng = Rng::new(7);
    let x = rng.vec_f32(rows * k);
    let w = rng.vec_f32(n * k);

    let rt = HostRuntime::new()?;
    let single = rt.compile(&matvec())?;
    let batched = rt.compile(&matvec_rows())?;

    let mut replay = vec![0.0f32; rows * n];
    for r in 0..rows {
        let mut y = vec![0.0f32; n];
        single.launch(&mut [
            Arg::buf(&x[r * k..(r + 1) * k]),
            Arg::buf(&w),
            Arg::buf_mut(&mut y),
            Arg::from(k),
            Arg::from(n),
        ])?;
        replay[r * n..(r + 1) * n].copy_from_slice(&y);
        assert_eq!(bits(&y), bits(&reference(&x[r * k..], &w, k, n)), "host differs from the plain-Rust reference");
    }
    let mut y = vec![0.0f32; rows * n];
    batched.launch(&mut [
        Arg::buf(&x),
        Arg::buf(&w),
        Arg::buf_mut(&mut y),
        Arg::from(k),
        Arg::from(n),
        Arg::from(rows),
    ])?;

    let naive: Vec<f32> = (0..n).map(|o| sum_sequential(k, |i| x[i] * w[o * k + i])).collect();
    let differ = naive.iter().zip(&replay).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    println!(
        "matvec k={k} n={n}: rows sibling over {rows} rows == {rows} m=1 runs, byte for byte: {}",
        bits(&y) == bits(&replay)
    );
    println!("a naive sequential sum differs in {differ} of {n} outputs of row 0 (the order is real)");
    assert_eq!(bits(&y), bits(&replay));
    Ok(())
}
