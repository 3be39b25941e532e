//! The DSL demonstration: verify, compile and run the example kernel pairs on the host.
//!
//! The example kernels are the files in `examples/`, included as modules so the demo runs
//! exactly what a user copies from.

#[allow(dead_code)]
#[path = "../../examples/matvec.rs"]
mod matvec;
#[allow(dead_code)]
#[path = "../../examples/matvec_half.rs"]
mod matvec_half;
#[allow(dead_code)]
#[path = "../../examples/q8_dot.rs"]
mod q8_dot;
#[allow(dead_code)]
#[path = "../../examples/rmsnorm.rs"]
mod rmsnorm;
#[allow(dead_code)]
#[path = "../../examples/softmax.rs"]
mod softmax;

use baro::reference::{bits, Rng};
use baro_dsl::runtime::{Arg, HostRuntime};
use baro_dsl::verify;
use baro_dsl::Kernel;
use half::{bf16, f16};
use std::error::Error;

/// An m=1 kernel and its rows sibling.
struct Pair {
    single: Kernel,
    batched: Kernel,
}

fn pairs() -> Vec<Pair> {
    let p = |single, batched| Pair { single, batched };
    vec![
        p(matvec::matvec(), matvec::matvec_rows()),
        p(matvec_half::matvec_f16(), matvec_half::matvec_f16_rows()),
        p(matvec_half::matvec_bf16(), matvec_half::matvec_bf16_rows()),
        p(rmsnorm::rmsnorm(), rmsnorm::rmsnorm_rows()),
        p(rmsnorm::rmsnorm_zc(), rmsnorm::rmsnorm_zc_rows()),
        p(softmax::softmax(), softmax::softmax_rows()),
        p(q8_dot::q8_matvec(), q8_dot::q8_matvec_rows()),
    ]
}

pub fn run() -> Result<(), Box<dyn Error>> {
    println!("baro: demonstrating the DSL on the host target\n");
    println!("1. verification (symbolic execution over small ragged shapes)");
    for pair in pairs() {
        for k in [&pair.single, &pair.batched] {
            let proof = verify::verify_kernel(k).map_err(|errs| join(&errs))?;
            println!(
                "   {:<18} well-formed; {} lane regions checked against their schedules over {} shapes",
                k.name, proof.regions_checked, proof.shapes
            );
        }
        let proof = verify::check_sibling(&pair.batched, &pair.single).map_err(|e| e.to_string())?;
        println!(
            "   {:<18} is a row-for-row sibling of {}: {} output DAGs equal over {} shapes",
            pair.batched.name, pair.single.name, proof.outputs, proof.shapes
        );
    }

    println!("\n2. host execution (LLVM JIT, x86-64): rows sibling vs m=1 replay, byte for byte");
    let rt = HostRuntime::new()?;
    let mut rng = Rng::new(2026);
    let (k, n, rows) = (32 * 67, 96, 7);
    let x = rng.vec_f32(rows * k);
    let w = rng.vec_f32(n * k);
    let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
    let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();
    let q: Vec<i8> = (0..n * k).map(|_| rng.below(256) as u8 as i8).collect();
    let d: Vec<f16> = (0..n * k / 32).map(|_| f16::from_f32(rng.f32() / 64.0)).collect();
    let xs: Vec<f32> = x[..rows * 1000].iter().map(|v| v * 8.0).collect();
    let eps = 1e-6f32;

    let mut total_bytes = 0usize;
    for pair in pairs() {
        let single = rt.compile(&pair.single)?;
        let batched = rt.compile(&pair.batched)?;
        let name = pair.single.name.as_str();
        // (batched output, per-row outputs) for this pair's argument layout.
        let (out_n, yb, replay) = match name {
            "rmsnorm" | "rmsnorm_zc" | "softmax" => {
                let n = if name == "softmax" { 1000 } else { k };
                let xin = if name == "softmax" { &xs[..] } else { &x[..] };
                let mut yb = vec![0.0f32; rows * n];
                let mut replay = vec![0.0f32; rows * n];
                if name == "softmax" {
                    batched.launch(&mut [Arg::buf(xin), Arg::buf_mut(&mut yb), Arg::from(n), Arg::from(rows)])?;
                } else {
                    batched.launch(&mut [
                        Arg::buf(xin),
                        Arg::buf(&w[..n]),
                        Arg::buf_mut(&mut yb),
                        Arg::from(n),
                        Arg::from(eps),
                        Arg::from(rows),
                    ])?;
                }
                for r in 0..rows {
                    let xr = &xin[r * n..(r + 1) * n];
                    let y = &mut replay[r * n..(r + 1) * n];
                    if name == "softmax" {
                        single.launch(&mut [Arg::buf(xr), Arg::buf_mut(y), Arg::from(n)])?;
                    } else {
                        single.launch(&mut [
                            Arg::buf(xr),
                            Arg::buf(&w[..n]),
                            Arg::buf_mut(y),
                            Arg::from(n),
                            Arg::from(eps),
                        ])?;
                    }
                }
                (n, yb, replay)
            }
            _ => {
                let mut yb = vec![0.0f32; rows * n];
                let mut replay = vec![0.0f32; rows * n];
                for r in 0..=rows {
                    // r == rows: the batched launch over all rows.
                    let (xr, y, tail): (&[f32], &mut [f32], Vec<Arg>) = if r == rows {
                        (&x[..], &mut yb[..], vec![Arg::from(k), Arg::from(n), Arg::from(rows)])
                    } else {
                        (&x[r * k..(r + 1) * k], &mut replay[r * n..(r + 1) * n], vec![Arg::from(k), Arg::from(n)])
                    };
                    let kernel = if r == rows { &batched } else { &single };
                    let mut args = match name {
                        "matvec" => vec![Arg::buf(xr), Arg::buf(&w), Arg::buf_mut(y)],
                        "matvec_f16" => vec![Arg::buf(xr), Arg::buf(&wh), Arg::buf_mut(y)],
                        "matvec_bf16" => vec![Arg::buf(xr), Arg::buf(&wb), Arg::buf_mut(y)],
                        _ => vec![Arg::buf(xr), Arg::buf(&q), Arg::buf(&d), Arg::buf_mut(y)],
                    };
                    args.extend(tail);
                    kernel.launch(&mut args)?;
                }
                (n, yb, replay)
            }
        };
        let same = bits(&yb) == bits(&replay);
        total_bytes += yb.len() * 4;
        println!(
            "   {:<18} {rows} rows × {out_n} outputs: {}",
            pair.batched.name,
            if same { "identical" } else { "DIFFERENT" }
        );
        if !same {
            return Err(format!("{} differs from {rows} replays of {name}", pair.batched.name).into());
        }
    }
    println!("\n   {total_bytes} output bytes compared, 0 differ. Target: host (x86-64); the engine runs the same kernels on NVIDIA (NVPTX) and AMD (AMDGPU) GPUs with --target cuda or hip.");
    Ok(())
}

fn join(errs: &[verify::VerifyError]) -> String {
    errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n")
}
