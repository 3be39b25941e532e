//! `matvec_bw`'s engine group: the decode path's own matvec kernels (the ones
//! `kernels::decode_matvec` names for each type and k, launched with decode's arguments) on
//! the model's shapes (`matvec_cases`), each timed against a device-to-device copy that moves
//! the same bytes, in the same run and the same way.
//!
//! - Bytes of a launch B: the selected matrices (for routed experts the `n_slots` experts its
//!   ids pick, not the stack), x, the ids, y. The copy moves B too: ⌈B/2⌉ bytes read and as
//!   many written, which is how the big-copy bandwidth is counted (read + written).
//! - Both are timed with events behind the filler copy (`bandwidth::time_one`), alternating a
//!   matvec and a copy, so launch and tail cost count on both sides; medians of `iters` each.
//! - Weights: random valid blocks from the pack writer (`pack::blocks::fill`: finite f16
//!   scales, random codes). Weights and copy buffers rotate so that a launch's bytes are not in
//!   L2: the weight stack holds at least 3 × L2 of matrices (the model's whole expert stack at
//!   least) and each launch takes the next id set of a shuffled order; the head (≥ 3 × L2 by
//!   itself) has one copy. At most `max_sets` rotations (tiny matrices then cycle within L2
//!   between fillers; the filler itself evicts L2).
//! - Checked first: the same kernel on the host JIT and on the device, byte for byte, at the
//!   case's k and slots with at most `CHECK_ROWS` rows and ids ≠ 0 (`MatvecCase::check_case`),
//!   so a fast wrong kernel cannot report a number.
//!
//! Measurement only; never a kernel body.

use baro::reference::Rng;
use baro_dsl::runtime::{Buffer, Device, DeviceArg as A, DeviceError, DeviceKernel};
use baro_dsl::ScalarType;
use baro_engine::engine::weights::storage_elem;
use baro_engine::pack::blocks;
use baro_engine::pack::rng::Xoshiro256;
use baro_engine::pack::values::{ValueKind, WEIGHT_STD};

use crate::bandwidth::{median, time_one, Filler};
use crate::matvec_cases::MatvecCase;
use crate::report::json_str;

/// The bar of issue 12: matvec time ≤ 1.35 × the same-bytes copy time.
pub const BAR: f64 = 1.0 / 1.35;

/// Rows of the host check of each kernel (the host JIT is too slow for the full shapes).
pub const CHECK_ROWS: usize = 32;

fn err(e: DeviceError) -> String {
    e.to_string()
}

/// How the engine group measures.
#[derive(Clone, Copy, Debug)]
pub struct EngineSetup {
    pub iters: usize,
    pub warmup: usize,
    /// The device's last-level cache in bytes; a rotation covers more than 3 × this.
    pub l2_bytes: usize,
    /// The most weight rotations (id sets) and copy buffer pairs per case.
    pub max_sets: usize,
}

impl EngineSetup {
    /// Rotations needed so `per_launch` bytes, cycled, cover more than 3 × L2.
    fn sets_for(&self, per_launch: usize) -> usize {
        let span = 3 * self.l2_bytes;
        let need = if per_launch >= span { 1 } else { span.div_ceil(per_launch.max(1)) + 1 };
        need.clamp(1, self.max_sets.max(1))
    }
}

/// One measured case.
#[derive(Clone, Debug)]
pub struct EngineRow {
    pub case: MatvecCase,
    pub kernel: String,
    /// Bytes of one launch (and moved by its copy).
    pub bytes: u64,
    /// Distinct weight bytes the launches rotate over.
    pub rotation_bytes: u64,
    pub matvec_us: f64,
    pub copy_us: f64,
}

impl EngineRow {
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 / self.matvec_us / 1e3
    }
    /// Copy time over matvec time: ≥ `BAR` passes.
    pub fn copy_over_matvec(&self) -> f64 {
        self.copy_us / self.matvec_us
    }
    /// The matvec's bytes per second over the big copy's.
    pub fn of_copy_bw(&self, copy_bw: f64) -> f64 {
        self.bytes as f64 / (self.matvec_us * 1e-6) / copy_bw
    }
}

/// `n_mats` random matrices of `case`'s type and shape (valid blocks, finite scales).
fn weight_bytes(case: &MatvecCase, n_mats: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; n_mats * case.mat_bytes()];
    let mut rng = Xoshiro256::from_words(&[seed, u64::from(case.ty.ggml_id()), case.rows as u64, case.cols as u64]);
    blocks::fill(case.ty, ValueKind::Weight { std: WEIGHT_STD }, &mut rng, &mut out);
    out
}

/// Queues one launch of `k` as decode launches it: (x, w, ids, y, k, n, x_stride, n_slots).
fn launch(
    dev: &Device,
    k: &DeviceKernel,
    case: &MatvecCase,
    x: &Buffer,
    w: &Buffer,
    ids: &Buffer,
    y: &mut Buffer,
) -> Result<(), String> {
    let mut args = [
        A::buf(x),
        baro_engine::engine::weight_arg(k.kernel(), w),
        A::buf(ids),
        A::buf_mut(y),
        A::from(case.cols),
        A::from(case.rows),
        A::from(case.x_stride),
        A::from(case.n_slots),
    ];
    dev.launch(dev.default_stream(), k, &mut args).map_err(err)
}

/// `case.check_case()` run once on `dev` with kernel `k`: y's bytes.
fn run_check(
    dev: &Device,
    k: &DeviceKernel,
    case: &MatvecCase,
    w: &[u8],
    ids: &[u32],
    x: &[f32],
) -> Result<Vec<u8>, String> {
    let wb = dev.upload_bytes(storage_elem(case.ty), w).map_err(err)?;
    let (xb, ib) = (dev.upload(x).map_err(err)?, dev.upload(ids).map_err(err)?);
    let mut y = dev.alloc(ScalarType::F32, case.n_slots * case.rows).map_err(err)?;
    launch(dev, k, case, &xb, &wb, &ib, &mut y)?;
    dev.default_stream().synchronize().map_err(err)?;
    dev.read_bytes(&y).map_err(err)
}

/// The device kernel against the host JIT's, byte for byte, on `case.check_case()`; returns the
/// bytes compared.
pub fn check(
    dev: &Device,
    host: &Device,
    case: &MatvecCase,
    dk: &DeviceKernel,
    hk: &DeviceKernel,
) -> Result<u64, String> {
    let small = case.check_case(CHECK_ROWS);
    let w = weight_bytes(&small, small.n_mats, 5);
    let ids = small.check_ids();
    let x = Rng::new(7).vec_f32(small.x_len());
    let want = run_check(host, hk, &small, &w, &ids, &x)?;
    let got = run_check(dev, dk, &small, &w, &ids, &x)?;
    let differing = want.iter().zip(&got).filter(|(a, b)| a != b).count();
    if differing > 0 || want.len() != got.len() {
        return Err(format!(
            "self-check failed: {} ({}) {} k={} n={} slots={}: expected the host's {} bytes, found {differing} differing ({} bytes)",
            dk.name(),
            case.label(),
            case.ty,
            small.cols,
            small.rows,
            small.n_slots,
            want.len(),
            got.len()
        ));
    }
    Ok(want.len() as u64)
}

/// A permutation of 0..n (Fisher–Yates on a seeded stream).
fn shuffled(n: usize, seed: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..n).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    v
}

/// Times `case` on `dev` with kernel `k` against a copy of the same bytes.
pub fn measure(
    dev: &Device,
    filler: &mut Filler,
    setup: &EngineSetup,
    case: &MatvecCase,
    k: &DeviceKernel,
) -> Result<EngineRow, String> {
    let bytes = case.bytes();
    // Weights: a stack of whole copies of the model's stack, rotated over by id sets.
    let sets = setup.sets_for(case.n_slots * case.mat_bytes());
    let reps = (sets * case.n_slots).div_ceil(case.n_mats);
    let stack_mats = reps * case.n_mats;
    let sets = (stack_mats / case.n_slots).min(setup.max_sets.max(1));
    let base = weight_bytes(case, case.n_mats, 11);
    let mut stack = Vec::with_capacity(reps * base.len());
    for _ in 0..reps {
        stack.extend_from_slice(&base);
    }
    drop(base);
    let w = dev.upload_bytes(storage_elem(case.ty), &stack).map_err(err)?;
    drop(stack);
    let order = shuffled(stack_mats, 13);
    let ids: Vec<Buffer> = order
        .chunks_exact(case.n_slots)
        .take(sets)
        .map(|set| dev.upload(set))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let x = dev.upload(&Rng::new(3).vec_f32(case.x_len())).map_err(err)?;
    let mut y = dev.alloc(ScalarType::F32, case.n_slots * case.rows).map_err(err)?;
    // The copy: ⌈B/2⌉ bytes read and written, over its own rotation of buffer pairs.
    let half = bytes.div_ceil(2) as usize;
    let pairs = setup.sets_for(2 * half);
    let src: Vec<Buffer> =
        (0..pairs).map(|_| dev.alloc(ScalarType::U8, half)).collect::<Result<_, _>>().map_err(err)?;
    let mut dst: Vec<Buffer> =
        (0..pairs).map(|_| dev.alloc(ScalarType::U8, half)).collect::<Result<_, _>>().map_err(err)?;
    let s = dev.default_stream();
    let (mut mv_turn, mut cp_turn) = (0usize, 0usize);
    let mut matvec = |turn: &mut usize| -> Result<(), String> {
        let r = launch(dev, k, case, &x, &w, &ids[*turn % ids.len()], &mut y);
        *turn += 1;
        r
    };
    let mut copy = |turn: &mut usize| -> Result<(), String> {
        let i = *turn % src.len();
        *turn += 1;
        dev.copy(s, &src[i], &mut dst[i]).map_err(err)
    };
    for _ in 0..setup.warmup {
        matvec(&mut mv_turn)?;
        copy(&mut cp_turn)?;
    }
    s.synchronize().map_err(err)?;
    let (mut mv_ms, mut cp_ms) = (Vec::new(), Vec::new());
    for _ in 0..setup.iters.max(1) {
        mv_ms.push(time_one(dev, filler, &mut || matvec(&mut mv_turn))?);
        cp_ms.push(time_one(dev, filler, &mut || copy(&mut cp_turn))?);
    }
    let rotation_bytes = (sets * case.n_slots * case.mat_bytes()) as u64;
    Ok(EngineRow {
        case: case.clone(),
        kernel: k.name().to_string(),
        bytes,
        rotation_bytes,
        matvec_us: median(mv_ms) * 1e3,
        copy_us: median(cp_ms) * 1e3,
    })
}

/// The engine rows as a fixed-width table.
pub fn table(rows: &[EngineRow], copy_bw: f64) -> String {
    let lw = rows.iter().map(|r| r.case.label().len()).max().unwrap_or(0).max(7);
    let mut t = format!(
        "{:<16} {:<lw$} {:<5} {:>5} {:>6} {:>5} {:>4} {:>11} {:>10} {:>8} {:>7} {:>8} {:>7} {:>4}\n",
        "kernel",
        "tensors",
        "type",
        "K",
        "N",
        "slots",
        "/tok",
        "bytes",
        "matvec_us",
        "copy_us",
        "cp/mv",
        "GB/s",
        "of_copy",
        "bar"
    );
    for r in rows {
        let c = &r.case;
        let ok = if r.copy_over_matvec() >= BAR { "ok" } else { "SLOW" };
        t += &format!(
            "{:<16} {:<lw$} {:<5} {:>5} {:>6} {:>5} {:>4} {:>11} {:>10.2} {:>8.2} {:>7.3} {:>8.1} {:>7.3} {:>4}\n",
            r.kernel,
            c.label(),
            c.ty.to_string(),
            c.cols,
            c.rows,
            c.n_slots,
            c.per_token,
            r.bytes,
            r.matvec_us,
            r.copy_us,
            r.copy_over_matvec(),
            r.gbps(),
            r.of_copy_bw(copy_bw),
            ok
        );
    }
    t
}

/// Per decoded token, from the model's cases (`per_token` > 0): (matvec µs, same-bytes copy µs).
pub fn per_token_us(rows: &[EngineRow]) -> (f64, f64) {
    rows.iter().fold((0.0, 0.0), |(m, c), r| {
        (m + r.case.per_token as f64 * r.matvec_us, c + r.case.per_token as f64 * r.copy_us)
    })
}

/// The engine rows as JSON objects (one per line, no trailing comma).
pub fn json_rows(rows: &[EngineRow], copy_bw: f64) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let c = &r.case;
            format!(
                "  {{\"kernel\": {}, \"tensors\": {}, \"type\": {}, \"k\": {}, \"n\": {}, \"n_mats\": {}, \"n_slots\": {}, \"x_stride\": {}, \"per_token\": {}, \"bytes\": {}, \"rotation_bytes\": {}, \"matvec_us\": {:.3}, \"copy_us\": {:.3}, \"copy_over_matvec\": {:.4}, \"gbps\": {:.2}, \"of_copy_bw\": {:.4}, \"pass\": {}}}",
                json_str(&r.kernel),
                json_str(&c.label()),
                json_str(&c.ty.to_string()),
                c.cols,
                c.rows,
                c.n_mats,
                c.n_slots,
                c.x_stride,
                c.per_token,
                r.bytes,
                r.rotation_bytes,
                r.matvec_us,
                r.copy_us,
                r.copy_over_matvec(),
                r.gbps(),
                r.of_copy_bw(copy_bw),
                r.copy_over_matvec() >= BAR
            )
        })
        .collect()
}

/// Checks then measures every case with the kernel decode launches for it (each compiled once
/// on `dev` and on `host`); returns the rows and the bytes the checks compared.
pub fn run_cases(
    dev: &Device,
    host: &Device,
    filler: &mut Filler,
    setup: &EngineSetup,
    cases: &[MatvecCase],
) -> Result<(Vec<EngineRow>, u64), String> {
    let mut compiled: Vec<(String, DeviceKernel, DeviceKernel)> = Vec::new();
    let (mut rows, mut checked) = (Vec::new(), 0);
    for case in cases {
        let ir = baro_engine::kernels::decode_matvec(case.ty, case.cols);
        let at = match compiled.iter().position(|(n, ..)| *n == ir.name) {
            Some(at) => at,
            None => {
                compiled.push((ir.name.clone(), dev.compile(&ir).map_err(err)?, host.compile(&ir).map_err(err)?));
                compiled.len() - 1
            }
        };
        let (_, dk, hk) = &compiled[at];
        checked += check(dev, host, case, dk, hk)?;
        eprintln!(
            "measuring {} on {} {} K={} N={} slots={}",
            ir.name,
            case.label(),
            case.ty,
            case.cols,
            case.rows,
            case.n_slots
        );
        rows.push(measure(dev, filler, setup, case, dk)?);
    }
    Ok((rows, checked))
}

/// The bounds error `matvec_q8_0_xs` reports on `d` for k = 64, n = 2 (four Q8_0 blocks,
/// 136 bytes = 34 words) given 33 weight words: block 3 (bytes 102..136, words 25..=33) is the
/// only one reaching word 33, read by one lane inside the inner loop whose versioning checks
/// the expert id's load and the word indices `base + (j + 2) / 4`, so the checked copy must
/// run and report the read (the conformance binary compares the message with the host's).
pub fn short_weight_words_error(d: &Device) -> Result<String, String> {
    let kernel = baro_engine::kernels::all()
        .into_iter()
        .find(|k| k.name == "matvec_q8_0_xs")
        .ok_or("the engine has no `matvec_q8_0_xs`")?;
    let (k, n) = (64usize, 2usize);
    let c = d.compile(&kernel).map_err(|e| e.to_string())?;
    let words: Vec<u32> = (0..33u32).map(|i| 0x0102_3c00 ^ i).collect();
    let w = d.upload(&words).map_err(|e| e.to_string())?;
    let x = d.upload(&vec![0.25f32; k]).map_err(|e| e.to_string())?;
    let ids = d.upload(&[0u32]).map_err(|e| e.to_string())?;
    let mut y = d.alloc(ScalarType::F32, n).map_err(|e| e.to_string())?;
    let s = d.default_stream();
    let args = &mut [
        A::Buf(&x),
        A::Buf(&w),
        A::Buf(&ids),
        A::BufMut(&mut y),
        k.into(),
        n.into(),
        0usize.into(),
        1usize.into(),
    ];
    match d.launch(s, &c, args).and_then(|()| s.synchronize()) {
        Err(e) => Ok(e.to_string()),
        Ok(()) => Err("the read past the end of the weight words was not reported".to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_weight_word_past_the_end_is_reported_on_the_host() {
        let d = baro_dsl::runtime::Device::host().unwrap();
        assert_eq!(
            super::short_weight_words_error(&d).unwrap(),
            "kernel `matvec_q8_0_xs` read `w[33]` but `w` has 33 elements"
        );
    }
}
