//! `q8_bench` (a name of `baro_gpu`): the q8 precision mode's kernels (issue 14: `q8act`,
//! `matvec_q8_0_q8`, the K-quant × q8 matvecs and every rows sibling) on the host JIT and on a
//! device, byte for byte on the same inputs; then, only if every byte matched, each q8 matvec
//! timed against the f32 `_xs` matvec the decode path launches, on the same weights and
//! expert ids in one run (a ratio, not an absolute claim), and `q8act` at decode and prefill
//! sizes. Measurement only; never a kernel body.

use std::collections::HashMap;
use std::process::ExitCode;

use baro::reference::Rng;
use baro_dsl::ir::{Access, ParamKind};
use baro_dsl::runtime::{Buffer, Device, DeviceArg as A, DeviceError, DeviceKernel, DeviceKind};
use baro_dsl::{Kernel, ScalarType};
use baro_engine::kernels::{kquant_q8, q8act, quant};
use baro_engine::model::TensorType;
use baro_engine::pack::blocks;
use baro_engine::pack::rng::Xoshiro256;
use baro_engine::pack::values::{ValueKind, WEIGHT_STD};

use crate::bandwidth::{median, time_one, Filler};
use crate::conformance::{count_differing, Outcome};

fn err(e: DeviceError) -> String {
    e.to_string()
}

/// The q8 matvec (m = 1, rows) of a weight type.
fn q8_kernels(ty: TensorType) -> (Kernel, Kernel) {
    match ty {
        TensorType::Q8_0 => (q8act::matvec_q8_0_q8(), q8act::matvec_q8_0_q8_rows()),
        TensorType::Q4_K => (kquant_q8::matvec_q4_k_q8(), kquant_q8::matvec_q4_k_q8_rows()),
        TensorType::Q5_K => (kquant_q8::matvec_q5_k_q8(), kquant_q8::matvec_q5_k_q8_rows()),
        _ => (kquant_q8::matvec_q6_k_q8(), kquant_q8::matvec_q6_k_q8_rows()),
    }
}

const TYPES: [TensorType; 4] = [TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K];

/// Random valid blocks (finite f16 scales, random codes), as `matvec_bw` uses.
fn weights(ty: TensorType, elems: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; elems / ty.block_len() * ty.block_bytes()];
    let mut rng = Xoshiro256::from_words(&[seed, u64::from(ty.ggml_id()), elems as u64]);
    blocks::fill(ty, ValueKind::Weight { std: WEIGHT_STD }, &mut rng, &mut out);
    out
}

fn le<T: Copy>(v: &[T], f: impl Fn(T) -> [u8; 4]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// Inputs by parameter name: (bytes, element type as uploaded). Scalars by name.
struct Inputs {
    bufs: HashMap<&'static str, (Vec<u8>, ScalarType)>,
    scalars: HashMap<&'static str, usize>,
}

/// Runs `k` on `dev` with buffers and scalars looked up by parameter name (a `u32` weight
/// parameter `w` gets the bytes as words); returns every writable buffer's bytes, in order.
fn run_named(dev: &Device, k: &DeviceKernel, kernel: &Kernel, inp: &Inputs) -> Result<Vec<Vec<u8>>, String> {
    let mut bufs: Vec<(Buffer, bool, bool)> = Vec::new();
    for p in &kernel.params {
        if let ParamKind::Buffer { elem, access } = &p.kind {
            let (bytes, ty) = inp
                .bufs
                .get(p.name.as_str())
                .ok_or_else(|| format!("{}: no input for buffer `{}`", kernel.name, p.name))?;
            let words = p.name == "w";
            let b = dev.upload_bytes(if words { *ty } else { *elem }, bytes).map_err(err)?;
            bufs.push((b, words, *access == Access::ReadWrite));
        }
    }
    {
        let mut it = bufs.iter_mut();
        let mut args = Vec::new();
        for p in &kernel.params {
            match &p.kind {
                ParamKind::Buffer { .. } => {
                    let (b, words, writable) = it.next().ok_or("buffer count")?;
                    args.push(if *writable {
                        A::buf_mut(b)
                    } else if *words {
                        A::words(b)
                    } else {
                        A::buf(b)
                    });
                }
                ParamKind::Scalar(_) => {
                    let v = *inp
                        .scalars
                        .get(p.name.as_str())
                        .ok_or_else(|| format!("{}: no value for scalar `{}`", kernel.name, p.name))?;
                    args.push(A::from(v));
                }
            }
        }
        dev.run(k, &mut args).map_err(err)?;
    }
    bufs.iter().filter(|(_, _, w)| *w).map(|(b, _, _)| dev.read_bytes(b).map_err(err)).collect()
}

/// q8 activations of `x` (the plain-Rust reference's bytes: both devices get the same).
fn q8_inputs(x: &[f32], inp: &mut Inputs) {
    let (q, d, s) = q8act::q8act_reference(x);
    inp.bufs.insert("xq", (le(&q, u32::to_le_bytes), ScalarType::U32));
    inp.bufs.insert("xd", (le(&d, f32::to_le_bytes), ScalarType::F32));
    inp.bufs.insert("xsum", (le(&s, i32::to_le_bytes), ScalarType::I32));
}

/// One kernel at one shape on both devices. Writable buffers start as the same random bytes.
fn compare(
    reference: &Device,
    device: &Device,
    kernel: &Kernel,
    shape: String,
    inp: &mut Inputs,
    outputs: &[(&'static str, usize)],
    seed: u64,
) -> Outcome {
    let mut rng = Rng::new(seed);
    for &(name, bytes) in outputs {
        inp.bufs.insert(name, ((0..bytes).map(|_| rng.next_u64() as u8).collect(), ScalarType::U8));
    }
    let run = |dev: &Device| -> Result<Vec<Vec<u8>>, String> {
        let k = dev.compile(kernel).map_err(err)?;
        run_named(dev, &k, kernel, inp)
    };
    let mut o = Outcome { kernel: kernel.name.clone(), shape, bytes_compared: 0, bytes_differing: 0, error: None };
    match (run(reference), run(device)) {
        (Ok(want), Ok(got)) => {
            for (a, b) in want.iter().zip(&got) {
                o.bytes_compared += a.len() as u64;
                o.bytes_differing += count_differing(a, b);
            }
        }
        (Err(e), _) => o.error = Some(format!("reference: {e}")),
        (_, Err(e)) => o.error = Some(format!("device: {e}")),
    }
    o
}

/// Every q8 kernel at ragged shapes, host JIT against `device`.
pub fn parity(reference: &Device, device: &Device, seed: u64) -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut rng = Rng::new(seed);
    for nb in [1usize, 70, 64 * 9] {
        let x = rng.vec_f32(nb * 32);
        let mut inp = Inputs { bufs: HashMap::new(), scalars: HashMap::from([("nb", nb)]) };
        inp.bufs.insert("x", (le(&x, f32::to_le_bytes), ScalarType::F32));
        out.push(compare(
            reference,
            device,
            &q8act::q8act(),
            format!("nb={nb}"),
            &mut inp,
            &[("q", nb * 32), ("d", nb * 4), ("s", nb * 4)],
            seed ^ nb as u64,
        ));
    }
    for ty in TYPES {
        let (m1, rows) = q8_kernels(ty);
        let q8k = if ty == TensorType::Q8_0 { 32 } else { 256 };
        // (k, n, matrices, ids, x per slot): shared x over slots, ragged n; x per slot.
        for (k, n, n_mats, ids, per_slot) in
            [(2048usize, 37usize, 4usize, vec![3u32, 1], false), (3 * q8k, 9, 2, vec![1, 0, 1], true)]
        {
            let x = rng.vec_f32(if per_slot { ids.len() * k } else { k });
            let mut inp = Inputs {
                bufs: HashMap::new(),
                scalars: HashMap::from([
                    ("k", k),
                    ("n", n),
                    ("x_stride", if per_slot { k } else { 0 }),
                    ("n_slots", ids.len()),
                ]),
            };
            q8_inputs(&x, &mut inp);
            inp.bufs.insert("w", (weights(ty, n_mats * n * k, k as u64), ScalarType::U8));
            inp.bufs.insert("ids", (le(&ids, u32::to_le_bytes), ScalarType::U32));
            let shape = format!("k={k} n={n} ids={ids:?}{}", if per_slot { " x per slot" } else { "" });
            out.push(compare(reference, device, &m1, shape, &mut inp, &[("y", ids.len() * n * 4)], seed ^ k as u64));
        }
        // Rows: nine rows (a tile of 8 and one), each its own expert and activations.
        let (k, n, n_mats, r) = (5 * q8k, 17usize, 3usize, 9usize);
        let ids: Vec<u32> = (0..r as u32).map(|i| (i * 2 + 1) % n_mats as u32).collect();
        let x = rng.vec_f32(r * k);
        let mut inp = Inputs {
            bufs: HashMap::new(),
            scalars: HashMap::from([("k", k), ("n", n), ("x_stride", 0), ("n_slots", 1), ("rows", r)]),
        };
        q8_inputs(&x, &mut inp);
        inp.bufs.insert("w", (weights(ty, n_mats * n * k, 99), ScalarType::U8));
        inp.bufs.insert("ids", (le(&ids, u32::to_le_bytes), ScalarType::U32));
        out.push(compare(
            reference,
            device,
            &rows,
            format!("k={k} n={n} rows={r}"),
            &mut inp,
            &[("y", r * n * 4)],
            seed ^ 0x55,
        ));
    }
    out
}

/// The f32 matvec decode launches for `ty` at k ≤ 4096.
fn f32_xs(ty: TensorType) -> Kernel {
    match ty {
        TensorType::Q8_0 => quant::matvec_q8_0_xs(),
        TensorType::Q4_K => quant::matvec_q4_k_xs(),
        TensorType::Q5_K => quant::matvec_q5_k_xs(),
        _ => quant::matvec_q6_k_xs(),
    }
}

/// Median µs of the q8 matvec and of the f32 `_xs` matvec of `ty` on one stack of
/// `n_mats` (k × n) matrices, `slots` experts per launch rotating over the stack (so a launch's
/// weights are not in L2 from the one before), alternating the two kernels.
#[allow(clippy::too_many_arguments)]
fn time_pair(
    dev: &Device,
    filler: &mut Filler,
    ty: TensorType,
    k: usize,
    n: usize,
    n_mats: usize,
    slots: usize,
    iters: usize,
) -> Result<(f64, f64), String> {
    let s = dev.default_stream();
    let w = dev.upload_bytes(ScalarType::U8, &weights(ty, n_mats * n * k, 7)).map_err(err)?;
    let x = Rng::new(1).vec_f32(k);
    let (q, d, sums) = q8act::q8act_reference(&x);
    let (xb, qb, db, sb) = (
        dev.upload(&x).map_err(err)?,
        dev.upload(&q).map_err(err)?,
        dev.upload(&d).map_err(err)?,
        dev.upload(&sums).map_err(err)?,
    );
    let sets: Vec<Buffer> = (0..n_mats / slots)
        .map(|i| dev.upload(&(0..slots as u32).map(|j| (i * slots) as u32 + j).collect::<Vec<_>>()))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let mut y = dev.alloc(ScalarType::F32, slots * n).map_err(err)?;
    let (q8, _) = q8_kernels(ty);
    let (kq, kf) = (dev.compile(&q8).map_err(err)?, dev.compile(&f32_xs(ty)).map_err(err)?);
    let mut turn = 0usize;
    let (mut tq, mut tf) = (Vec::new(), Vec::new());
    for i in 0..iters + 3 {
        let ids = &sets[turn % sets.len()];
        turn += 1;
        let a = time_one(dev, filler, &mut || {
            let mut args = vec![A::buf(&qb), A::buf(&db)];
            if ty == TensorType::Q4_K || ty == TensorType::Q5_K {
                args.push(A::buf(&sb));
            }
            args.extend([
                A::words(&w),
                A::buf(ids),
                A::buf_mut(&mut y),
                A::from(k),
                A::from(n),
                A::from(0usize),
                A::from(slots),
            ]);
            dev.launch(s, &kq, &mut args).map_err(err)
        })?;
        let ids = &sets[turn % sets.len()];
        turn += 1;
        let b = time_one(dev, filler, &mut || {
            let mut args = [
                A::buf(&xb),
                A::words(&w),
                A::buf(ids),
                A::buf_mut(&mut y),
                A::from(k),
                A::from(n),
                A::from(0usize),
                A::from(slots),
            ];
            dev.launch(s, &kf, &mut args).map_err(err)
        })?;
        if i >= 3 {
            tq.push(a * 1e3);
            tf.push(b * 1e3);
        }
    }
    Ok((median(tq), median(tf)))
}

/// Median µs of `q8act` over `nb` blocks.
fn time_q8act(dev: &Device, filler: &mut Filler, nb: usize, iters: usize) -> Result<f64, String> {
    let k = dev.compile(&q8act::q8act()).map_err(err)?;
    let x = dev.upload(&Rng::new(2).vec_f32(nb * 32)).map_err(err)?;
    let mut q = dev.alloc(ScalarType::U32, nb * 8).map_err(err)?;
    let mut d = dev.alloc(ScalarType::F32, nb).map_err(err)?;
    let mut s = dev.alloc(ScalarType::I32, nb).map_err(err)?;
    let mut t = Vec::new();
    for i in 0..iters + 3 {
        let ms = time_one(dev, filler, &mut || {
            dev.launch(
                dev.default_stream(),
                &k,
                &mut [A::buf(&x), A::buf_mut(&mut q), A::buf_mut(&mut d), A::buf_mut(&mut s), A::from(nb)],
            )
            .map_err(err)
        })?;
        if i >= 3 {
            t.push(ms * 1e3);
        }
    }
    Ok(median(t))
}

pub fn main() -> ExitCode {
    let target = std::env::args().nth(1).unwrap_or_else(|| "cuda".into());
    match run(&target) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("q8_bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(target: &str) -> Result<bool, String> {
    let kind: DeviceKind = target.parse().map_err(|e: DeviceError| e.to_string())?;
    let reference = Device::host().map_err(err)?;
    let device = Device::open(kind, 0).map_err(err)?;
    println!("q8_bench: host JIT vs {} ({}), {}", device.name(), device.driver_version(), device.target());
    let outcomes = parity(&reference, &device, 0x9814);
    let mut ok = true;
    for o in &outcomes {
        println!(
            "{:<24} {:<28} {:>8} bytes compared, {} differing{}",
            o.kernel,
            o.shape,
            o.bytes_compared,
            o.bytes_differing,
            o.error.as_deref().map(|e| format!(", {e}")).unwrap_or_default()
        );
        ok &= o.passed();
    }
    let compared: u64 = outcomes.iter().map(|o| o.bytes_compared).sum();
    println!("PARITY {}: {} cases, {compared} bytes compared", if ok { "PASS" } else { "FAIL" }, outcomes.len());
    if !ok {
        return Ok(false);
    }
    let mut filler = Filler::new(&device, 256 << 20)?;
    let (_, copy_bw) = crate::bandwidth::copy_bandwidth(&device, 1 << 30, 3, 20, &mut filler)?;
    println!("\ndevice-to-device copy (read + written): {:.0} GB/s", copy_bw / 1e9);
    // (label, type, k, n, matrices in the stack, slots per launch): the routed experts'
    // gate/up (8 of 256) and down shapes, and one dense 2048 × 4096 matrix, as decode meets them.
    let cases = [
        ("experts gate/up", 2048usize, 512usize, 256usize, 8usize),
        ("experts down", 512, 2048, 256, 8),
        ("dense", 2048, 4096, 8, 1),
    ];
    println!("\nmedian µs per launch (q8 kernel | f32 _xs kernel | f32/q8), weights rotating beyond L2:");
    for ty in TYPES {
        // The output head (Q6_K in the community mix; Q8_0 beside it): 2048 × 248,320, one
        // matrix of 417–540 MB, bandwidth-bound.
        let head = [("head", 2048usize, 248_320usize, 1usize, 1usize)];
        let extra: &[_] = if ty == TensorType::Q6_K || ty == TensorType::Q8_0 { &head } else { &[] };
        for &(label, k, n, mats, slots) in cases.iter().chain(extra) {
            let (q, f) = time_pair(&device, &mut filler, ty, k, n, mats, slots, 50)?;
            let bytes = (slots * n * k / ty.block_len() * ty.block_bytes()) as f64;
            println!("{ty:?} {label:<16} k={k:<5} n={n:<5} slots={slots}: {q:>8.2} | {f:>8.2} | {:>5.2}   q8 weights {:.0} GB/s", f / q, bytes / q / 1e3);
        }
    }
    for nb in [64usize, 64 * 512] {
        println!("q8act nb={nb}: {:.2} µs", time_q8act(&device, &mut filler, nb, 50)?);
    }
    Ok(true)
}
