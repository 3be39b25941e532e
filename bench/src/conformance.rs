//! The cross-target conformance routine: every example kernel and every `testkernels` pair
//! (m=1 kernel and rows sibling), on random inputs and ragged shapes, run on a reference
//! device (the host JIT) and on the device under test, outputs compared byte for byte.
//!
//! Both devices get identical bytes for every buffer, outputs included (pre-filled with
//! random bytes, so an element a kernel forgets to write also compares). A case that fails to
//! compile or launch on either side is a failure, never a skip.
//!
//! Also included by path from `tests/it/conformance_host.rs`, so it may only use what the root
//! package `baro` depends on (`baro`, `baro_dsl`, `half`).

#[allow(dead_code)]
#[path = "../../examples/matvec.rs"]
pub mod matvec;
#[allow(dead_code)]
#[path = "../../examples/matvec_half.rs"]
pub mod matvec_half;
#[allow(dead_code)]
#[path = "../../examples/matvec_wide.rs"]
pub mod matvec_wide;
#[allow(dead_code)]
#[path = "../../examples/q8_dot.rs"]
pub mod q8_dot;
#[allow(dead_code)]
#[path = "../../examples/rmsnorm.rs"]
pub mod rmsnorm;
#[allow(dead_code)]
#[path = "../../examples/softmax.rs"]
pub mod softmax;

use baro::reference::Rng;
use baro_dsl::ir::{Const, ParamKind};
use baro_dsl::runtime::{Buffer, Device, DeviceArg};
use baro_dsl::{testkernels, Kernel, ScalarType};
use half::{bf16, f16};

/// The sizes of one case: `k` is the reduced length (or row length), `n` the output count
/// (or row length for row-wise kernels), `rows` the row count of a rows sibling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub k: usize,
    pub n: usize,
    pub rows: usize,
}

/// A group of kernels sharing parameter names and buffer shapes.
pub struct Family {
    pub name: &'static str,
    /// (where the kernel comes from: `examples` or `testkernels`, the kernel)
    pub kernels: Vec<(&'static str, Kernel)>,
    pub shapes: Vec<Dims>,
    /// Element count of buffer `name` for `dims` (rows already 1 for m=1 kernels).
    pub len: fn(&str, &Dims) -> Option<usize>,
}

fn matvec_len(name: &str, d: &Dims) -> Option<usize> {
    Some(match name {
        "x" => d.rows * d.k,
        "w" => d.n * d.k,
        "y" => d.rows * d.n,
        _ => return None,
    })
}

fn rowwise_len(name: &str, d: &Dims) -> Option<usize> {
    Some(match name {
        "x" | "y" => d.rows * d.n,
        "w" => d.n,
        _ => return None,
    })
}

/// Q8 kernels: `k` is a multiple of 32 (`nb = k / 32` blocks).
fn q8_len(name: &str, d: &Dims) -> Option<usize> {
    Some(match name {
        "x" => d.rows * d.k,
        "q" => d.n * d.k,
        "d" => d.n * d.k / 32,
        "y" => d.rows * d.n,
        _ => return None,
    })
}

fn dims(list: &[(usize, usize, usize)]) -> Vec<Dims> {
    list.iter().map(|&(k, n, rows)| Dims { k, n, rows }).collect()
}

/// Every family with its shapes. `quick` keeps two ragged shapes per family (for CI).
pub fn families(quick: bool) -> Vec<Family> {
    let pick = |all: Vec<Dims>| if quick { vec![all[1], all[3]] } else { all };
    // Lengths not multiples of 32, odd row counts, one output, and one long row each.
    let matvec_shapes = dims(&[(1, 1, 1), (31, 3, 2), (33, 5, 3), (100, 7, 5), (1000, 17, 7), (4099, 33, 3)]);
    let rowwise_shapes = dims(&[(0, 1, 1), (0, 31, 2), (0, 33, 3), (0, 100, 5), (0, 1000, 7), (0, 4099, 3)]);
    let q8_shapes =
        dims(&[(32, 1, 1), (96, 3, 2), (32 * 33, 5, 3), (32 * 70, 7, 5), (32 * 129, 17, 7), (32 * 4, 33, 3)]);
    vec![
        Family {
            name: "matvec",
            kernels: vec![
                ("examples", matvec::matvec()),
                ("examples", matvec::matvec_rows()),
                ("examples", matvec_half::matvec_f16()),
                ("examples", matvec_half::matvec_f16_rows()),
                ("examples", matvec_half::matvec_bf16()),
                ("examples", matvec_half::matvec_bf16_rows()),
                ("examples", matvec_wide::matvec_wide_f16()),
                ("examples", matvec_wide::matvec_wide_f16_rows()),
                ("examples", matvec_wide::matvec_wide_bf16()),
                ("examples", matvec_wide::matvec_wide_bf16_rows()),
                ("testkernels", testkernels::matvec()),
                ("testkernels", testkernels::matvec_rows_ok()),
                ("testkernels", testkernels::matvec_bf16()),
                ("testkernels", testkernels::matvec_bf16_rows()),
                ("testkernels", testkernels::matvec_seq_combine()),
                ("testkernels", testkernels::matvec_seq_combine_rows()),
            ],
            shapes: pick(matvec_shapes),
            len: matvec_len,
        },
        Family {
            name: "rowwise",
            kernels: vec![
                ("examples", rmsnorm::rmsnorm()),
                ("examples", rmsnorm::rmsnorm_rows()),
                ("examples", rmsnorm::rmsnorm_zc()),
                ("examples", rmsnorm::rmsnorm_zc_rows()),
                ("examples", softmax::softmax()),
                ("examples", softmax::softmax_rows()),
                ("testkernels", testkernels::rmsnorm(false)),
                ("testkernels", testkernels::rmsnorm_rows(false)),
                ("testkernels", testkernels::rmsnorm(true)),
                ("testkernels", testkernels::rmsnorm_rows(true)),
                ("testkernels", testkernels::softmax()),
                ("testkernels", testkernels::softmax_rows()),
            ],
            shapes: pick(rowwise_shapes),
            len: rowwise_len,
        },
        Family {
            name: "q8",
            kernels: vec![
                ("examples", q8_dot::q8_matvec()),
                ("examples", q8_dot::q8_matvec_rows()),
                ("testkernels", testkernels::q8_dot()),
                ("testkernels", testkernels::q8_dot_rows()),
            ],
            shapes: pick(q8_shapes),
            len: q8_len,
        },
    ]
}

/// One kernel at one shape, compared.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub kernel: String,
    pub shape: String,
    pub bytes_compared: u64,
    pub bytes_differing: u64,
    /// A compile or launch failure on either side.
    pub error: Option<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.bytes_differing == 0 && self.bytes_compared > 0
    }
}

/// Bytes at which `a` and `b` differ (a length difference counts every missing byte).
pub fn count_differing(a: &[u8], b: &[u8]) -> u64 {
    let common = a.iter().zip(b).filter(|(x, y)| x != y).count();
    (common + a.len().abs_diff(b.len())) as u64
}

/// A buffer's random contents for a seed: the same bytes on every device.
fn random_bytes(elem: ScalarType, len: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(len * elem.size_bytes());
    for _ in 0..len {
        match elem {
            ScalarType::F32 => out.extend_from_slice(&rng.f32().to_le_bytes()),
            ScalarType::F16 => out.extend_from_slice(&f16::from_f32(rng.f32()).to_le_bytes()),
            ScalarType::BF16 => out.extend_from_slice(&bf16::from_f32(rng.f32()).to_le_bytes()),
            ScalarType::Bool => out.push(rng.below(2) as u8),
            _ => out.extend_from_slice(&rng.next_u64().to_le_bytes()[..elem.size_bytes()]),
        }
    }
    out
}

/// The scalar value of parameter `name` for `dims`.
fn scalar(name: &str, ty: ScalarType, d: &Dims) -> Result<Const, String> {
    let v = match name {
        "k" => d.k,
        "nb" => d.k / 32,
        "n" | "m" => d.n,
        "rows" => d.rows,
        "eps" if ty == ScalarType::F32 => return Ok(Const::f32(1e-5)),
        _ => return Err(format!("no value for scalar parameter `{name}: {ty}`")),
    };
    if ty != ScalarType::INDEX {
        return Err(format!("scalar parameter `{name}`: expected usize, found {ty}"));
    }
    Ok(Const::index(v as u64))
}

/// The shape as printed: the scalar parameters the kernel takes.
fn describe_shape(k: &Kernel, d: &Dims) -> String {
    let parts: Vec<String> = k
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Scalar(ScalarType::U64)))
        .filter_map(|p| scalar(&p.name, ScalarType::INDEX, d).ok().map(|c| format!("{}={}", p.name, c.bits)))
        .collect();
    parts.join(" ")
}

/// Runs `k` on `dev` with the given buffer bytes and scalars; returns the bytes of every
/// writable buffer, in parameter order.
fn run_on(
    dev: &Device,
    k: &Kernel,
    inputs: &[Option<(ScalarType, Vec<u8>)>],
    scalars: &[Option<Const>],
) -> Result<Vec<Vec<u8>>, String> {
    let compiled = dev.compile(k).map_err(|e| e.to_string())?;
    let mut bufs: Vec<Option<Buffer>> = Vec::with_capacity(inputs.len());
    for i in inputs {
        bufs.push(match i {
            Some((elem, bytes)) => Some(dev.upload_bytes(*elem, bytes).map_err(|e| e.to_string())?),
            None => None,
        });
    }
    let writable: Vec<bool> = k
        .params
        .iter()
        .map(|p| matches!(p.kind, ParamKind::Buffer { access: baro_dsl::ir::Access::ReadWrite, .. }))
        .collect();
    {
        let mut args: Vec<DeviceArg<'_>> = Vec::with_capacity(bufs.len());
        for ((b, s), w) in bufs.iter_mut().zip(scalars).zip(&writable) {
            args.push(match (b, s) {
                (Some(b), _) => {
                    if *w {
                        DeviceArg::BufMut(b)
                    } else {
                        DeviceArg::Buf(b)
                    }
                }
                (None, Some(c)) => DeviceArg::Scalar(*c),
                (None, None) => return Err("a parameter has neither a buffer nor a scalar".into()),
            });
        }
        dev.run(&compiled, &mut args).map_err(|e| e.to_string())?;
    }
    let mut outs = Vec::new();
    for (b, w) in bufs.iter().zip(&writable) {
        if let (Some(b), true) = (b, w) {
            outs.push(dev.read_bytes(b).map_err(|e| e.to_string())?);
        }
    }
    Ok(outs)
}

/// One kernel at one shape on both devices.
/// `label` names the kernel in the outcome (e.g. `examples/matvec`).
pub fn run_case(
    reference: &Device,
    device: &Device,
    label: &str,
    k: &Kernel,
    dims: Dims,
    len: fn(&str, &Dims) -> Option<usize>,
    seed: u64,
) -> Outcome {
    let batched = k.sibling.is_some();
    let d = Dims { rows: if batched { dims.rows } else { 1 }, ..dims };
    let mut out = Outcome {
        kernel: label.to_string(),
        shape: describe_shape(k, &d),
        bytes_compared: 0,
        bytes_differing: 0,
        error: None,
    };
    let mut rng = Rng::new(seed);
    let mut inputs = Vec::new();
    let mut scalars = Vec::new();
    for p in &k.params {
        match &p.kind {
            ParamKind::Buffer { elem, .. } => match len(&p.name, &d) {
                Some(n) => {
                    inputs.push(Some((*elem, random_bytes(*elem, n, &mut rng))));
                    scalars.push(None);
                }
                None => {
                    out.error = Some(format!("no length for buffer `{}`", p.name));
                    return out;
                }
            },
            ParamKind::Scalar(t) => match scalar(&p.name, *t, &d) {
                Ok(c) => {
                    inputs.push(None);
                    scalars.push(Some(c));
                }
                Err(e) => {
                    out.error = Some(e);
                    return out;
                }
            },
        }
    }
    let want = run_on(reference, k, &inputs, &scalars);
    let got = run_on(device, k, &inputs, &scalars);
    match (want, got) {
        (Ok(want), Ok(got)) => {
            for (a, b) in want.iter().zip(&got) {
                out.bytes_compared += a.len() as u64;
                out.bytes_differing += count_differing(a, b);
            }
            if want.len() != got.len() {
                out.error = Some(format!("expected {} output buffers, found {}", want.len(), got.len()));
            }
        }
        (Err(e), _) => out.error = Some(format!("reference ({}): {e}", reference.kind())),
        (_, Err(e)) => out.error = Some(format!("device ({}): {e}", device.kind())),
    }
    out
}

/// Every kernel of every family at every shape. `progress` sees each outcome as it lands.
pub fn run_all(
    reference: &Device,
    device: &Device,
    quick: bool,
    seed: u64,
    mut progress: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let mut all = Vec::new();
    for f in families(quick) {
        for (origin, k) in &f.kernels {
            let label = format!("{origin}/{}", k.name);
            for (i, &d) in f.shapes.iter().enumerate() {
                let case_seed = seed ^ ((i as u64 + 1) << 32) ^ (all.len() as u64).wrapping_mul(0x9e37_79b9);
                let o = run_case(reference, device, &label, k, d, f.len, case_seed);
                progress(&o);
                all.push(o);
            }
        }
    }
    all
}

/// The results as a fixed-width text table, one row per case, then a total line.
pub fn table(outcomes: &[Outcome]) -> String {
    let w = outcomes.iter().map(|o| o.kernel.len()).max().unwrap_or(6).max(6);
    let s = outcomes.iter().map(|o| o.shape.len()).max().unwrap_or(5).max(5);
    let mut t =
        format!("{:<w$}  {:<s$}  {:>14}  {:>15}  status\n", "kernel", "shape", "bytes compared", "bytes differing");
    for o in outcomes {
        let status = match &o.error {
            Some(e) => format!("ERROR: {e}"),
            None if o.bytes_differing > 0 => "DIFFERS".to_string(),
            None => "ok".to_string(),
        };
        t += &format!(
            "{:<w$}  {:<s$}  {:>14}  {:>15}  {status}\n",
            o.kernel, o.shape, o.bytes_compared, o.bytes_differing
        );
    }
    let (c, d) = totals(outcomes);
    let failed = outcomes.iter().filter(|o| !o.passed()).count();
    t += &format!("total: {} cases, {c} bytes compared, {d} bytes differing, {failed} failed\n", outcomes.len());
    t
}

/// (bytes compared, bytes differing) over all outcomes.
pub fn totals(outcomes: &[Outcome]) -> (u64, u64) {
    outcomes.iter().fold((0, 0), |(c, d), o| (c + o.bytes_compared, d + o.bytes_differing))
}

/// Launches that must fail the same way on both devices: a write past the end of `y`, once
/// right away and once after `queued` good launches queued without synchronising (on CUDA
/// this walks the error-record ring past its end); then a read past the end of `x` inside the
/// lane loop, whose versioned (unchecked) copy must not be taken. Returns the device's
/// messages, or what differed from the reference.
pub fn error_parity(reference: &Device, device: &Device, queued: usize) -> Result<Vec<String>, String> {
    let kernel = testkernels::matvec(); // (w, x, y, k, m)
    let mut messages = Vec::new();
    for (before, bad) in [(0, Bad::WriteY), (queued, Bad::WriteY), (0, Bad::ReadX)] {
        let mut got = Vec::new();
        for d in [reference, device] {
            got.push(bounds_error_after(d, &kernel, before, bad)?);
        }
        if got[0] != got[1] {
            return Err(format!(
                "{bad:?} after {before} good launches: reference says `{}`, device says `{}`",
                got[0], got[1]
            ));
        }
        messages.push(got.swap_remove(1));
    }
    Ok(messages)
}

/// Which access of `bounds_error_after`'s last launch is out of range.
#[derive(Clone, Copy, Debug)]
enum Bad {
    /// The grid has one output more than `y` holds.
    WriteY,
    /// `x` is one element short of `k`: one lane's last read in the loop over `k`.
    ReadX,
}

fn bounds_error_after(d: &Device, kernel: &Kernel, before: usize, bad: Bad) -> Result<String, String> {
    let (k, m) = (40usize, 3usize);
    let c = d.compile(kernel).map_err(|e| e.to_string())?;
    let w = d.upload(&vec![0.5f32; k * (m + 1)]).map_err(|e| e.to_string())?;
    let x = d.upload(&vec![0.25f32; k]).map_err(|e| e.to_string())?;
    let short_x = d.upload(&vec![0.25f32; k - 1]).map_err(|e| e.to_string())?;
    let mut y = d.alloc(ScalarType::F32, m).map_err(|e| e.to_string())?;
    let s = d.default_stream();
    for _ in 0..before {
        d.launch(s, &c, &mut [DeviceArg::Buf(&w), DeviceArg::Buf(&x), DeviceArg::BufMut(&mut y), k.into(), m.into()])
            .map_err(|e| format!("a good launch failed: {e}"))?;
    }
    let launched = match bad {
        Bad::WriteY => d.launch(
            s,
            &c,
            &mut [DeviceArg::Buf(&w), DeviceArg::Buf(&x), DeviceArg::BufMut(&mut y), k.into(), (m + 1).into()],
        ),
        Bad::ReadX => d.launch(
            s,
            &c,
            &mut [DeviceArg::Buf(&w), DeviceArg::Buf(&short_x), DeviceArg::BufMut(&mut y), k.into(), m.into()],
        ),
    };
    match launched.and_then(|()| s.synchronize()) {
        Err(e) => Ok(e.to_string()),
        Ok(()) => Err(format!("{bad:?} after {before} good launches: the out-of-bounds access was not reported")),
    }
}
