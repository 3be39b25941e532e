//! The device's copy bandwidths, the yardsticks every benchmark ratio is taken against:
//! device-to-device copy (bytes read + written per second, median of N, each copy timed with
//! events behind a "filler" copy so no launch gap lands inside the measurement) and pinned
//! host-to-device upload (synchronous writes, wall clock). Shared by `matvec_bw` and
//! `decode_bw`; holds measurement only, never a kernel.

use std::time::Instant;

use baro_dsl::runtime::{Buffer, Device, DeviceError};
use baro_dsl::ScalarType;

fn err(e: DeviceError) -> String {
    e.to_string()
}

/// The median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// A large copy queued before each timed operation: it keeps the GPU busy while the CPU queues
/// the start event, the operation and the end event, so the timing holds no launch gap.
pub struct Filler {
    src: Buffer, // (byte) u8
    dst: Buffer, // (byte) u8
}

impl Filler {
    /// Two buffers of `bytes` bytes on `dev`.
    pub fn new(dev: &Device, bytes: usize) -> Result<Filler, String> {
        Ok(Filler {
            src: dev.alloc(ScalarType::U8, bytes).map_err(err)?,
            dst: dev.alloc(ScalarType::U8, bytes).map_err(err)?,
        })
    }

    fn queue(&mut self, dev: &Device) -> Result<(), String> {
        dev.copy(dev.default_stream(), &self.src, &mut self.dst).map_err(err)
    }
}

/// Milliseconds of one queued operation, timed with events behind the filler.
pub fn time_one(dev: &Device, filler: &mut Filler, op: &mut dyn FnMut() -> Result<(), String>) -> Result<f64, String> {
    let s = dev.default_stream();
    let (a, b) = (dev.new_event().map_err(err)?, dev.new_event().map_err(err)?);
    filler.queue(dev)?;
    a.record(s).map_err(err)?;
    op()?;
    b.record(s).map_err(err)?;
    s.synchronize().map_err(err)?;
    Ok(a.elapsed_ms(&b).map_err(err)? as f64)
}

/// Device-to-device copy bandwidth: `warmup` untimed then `iters` timed copies of `bytes`
/// bytes; returns (bytes moved per copy = read + written, median bytes per second).
pub fn copy_bandwidth(
    dev: &Device,
    bytes: usize,
    warmup: usize,
    iters: usize,
    filler: &mut Filler,
) -> Result<(u64, f64), String> {
    let src = dev.alloc(ScalarType::U8, bytes).map_err(err)?;
    let mut dst = dev.alloc(ScalarType::U8, bytes).map_err(err)?;
    let s = dev.default_stream();
    for _ in 0..warmup {
        dev.copy(s, &src, &mut dst).map_err(err)?;
    }
    s.synchronize().map_err(err)?;
    let mut ms = Vec::new();
    for _ in 0..iters {
        ms.push(time_one(dev, filler, &mut || dev.copy(s, &src, &mut dst).map_err(err))?);
    }
    let moved = 2 * bytes as u64;
    Ok((moved, moved as f64 / (median(ms) * 1e-3)))
}

/// Pinned host-to-device upload bandwidth: one untimed then `iters` timed synchronous writes
/// of `bytes` bytes from page-locked memory; median bytes per second (wall clock).
pub fn pinned_upload_bandwidth(dev: &Device, bytes: usize, iters: usize) -> Result<f64, String> {
    let mut pinned = dev.alloc_pinned(bytes).map_err(err)?;
    for (i, b) in pinned.as_mut_slice().map_err(err)?.iter_mut().enumerate() {
        *b = i as u8;
    }
    let mut dst = dev.alloc(ScalarType::U8, bytes).map_err(err)?;
    let src = pinned.as_slice().map_err(err)?;
    dev.write_bytes(&mut dst, src).map_err(err)?;
    let mut secs = Vec::new();
    for _ in 0..iters.max(1) {
        let t = Instant::now();
        dev.write_bytes(&mut dst, src).map_err(err)?;
        secs.push(t.elapsed().as_secs_f64());
    }
    Ok(bytes as f64 / median(secs))
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
