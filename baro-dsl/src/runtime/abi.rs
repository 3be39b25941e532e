//! The GPU kernel ABI of `compile_gpu`'s kernels, written once for CUDA and HIP: a launch's
//! parameters are 8-byte words, per buffer its device address and the element count the
//! kernel sees (it bounds-checks every access against it), per scalar its canonical bits,
//! then the address of the launch's zeroed `ErrorRecord`. A `DeviceArg::Words` view of a
//! `u8` buffer is the same address with `byte_len.div_ceil(4)` elements.
//!
//! `pack` checks a launch exactly as the host does before laying it out, so the three
//! runtimes refuse the same arguments with the same messages. This module never calls a
//! driver: the backends turn the words into a launch (`param_ptrs`) or a graph node.

use std::ffi::c_void;

use super::buffer::Buffer;
use super::check::check_args;
use super::device::{DeviceArg, DeviceError, DeviceKind};
use super::grid::{check_limits, grid_size};
use crate::ir::{Kernel, ParamKind, ScalarType};
use crate::lower::ErrorRecord;

/// Words of one `ErrorRecord`.
pub(crate) const RECORD_WORDS: usize = 4;
/// Bytes of one `ErrorRecord`.
pub(crate) const RECORD_BYTES: usize = std::mem::size_of::<ErrorRecord>();
const _: () = assert!(RECORD_BYTES == RECORD_WORDS * 8);

/// A checked launch, laid out.
#[derive(Debug)]
pub(crate) struct Packed {
    /// The parameter words, less the error record's address (each backend appends its own).
    pub(crate) words: Vec<u64>,
    /// Each parameter's element count (0 for scalars), for out-of-bounds messages.
    pub(crate) lens: Vec<u64>,
    /// Workgroups per axis.
    pub(crate) grid: [u32; 3],
}

/// Checks a launch like the host does (argument shapes, then every buffer an `M` of `kind`,
/// then the grid within `limits` workgroups per axis) and lays out its words, a buffer's
/// address being `addr` of its memory.
pub(crate) fn pack<M: 'static>(
    kernel: &Kernel,
    kind: DeviceKind,
    args: &[DeviceArg<'_>],
    limits: [u64; 3],
    addr: impl Fn(&M) -> u64,
) -> Result<Packed, DeviceError> {
    check_args(kernel, args.iter().map(DeviceArg::shape))?;
    let mut words = Vec::with_capacity(2 * args.len() + 1);
    let mut lens = vec![0u64; args.len()];
    let mut scalars = vec![0u64; args.len()];
    for (i, a) in args.iter().enumerate() {
        let Some((b, len)) = buffer(a)? else {
            if let DeviceArg::Scalar(c) = a {
                scalars[i] = c.bits;
                words.push(c.ty.canonical_bits(c.bits));
            }
            continue;
        };
        let m = b.mem.get::<M>().ok_or_else(|| DeviceError::Mismatch {
            what: "launch argument",
            expected: format!("a {kind} buffer at #{i}"),
            found: format!("a {} buffer", b.device_kind()),
        })?;
        lens[i] = len as u64;
        words.push(addr(m));
        words.push(lens[i]);
    }
    let grid = check_limits(kernel, grid_size(kernel, &scalars)?, limits)?;
    Ok(Packed { words, lens, grid })
}

/// The buffer behind a buffer argument and the element count the kernel sees (None for a
/// scalar); a words view of a buffer that does not hold `u8` is an error.
pub(crate) fn buffer<'b>(a: &'b DeviceArg<'_>) -> Result<Option<(&'b Buffer, usize)>, DeviceError> {
    Ok(match a {
        DeviceArg::Buf(b) => Some((b, b.len())),
        DeviceArg::BufMut(b) => Some((b, b.len())),
        DeviceArg::Words(b) => {
            b.expect_elem(ScalarType::U8)?;
            Some((b, b.byte_len().div_ceil(4)))
        }
        DeviceArg::Scalar(_) => None,
    })
}

/// The driver's `kernelParams` for `words` (the record's address appended): a pointer to
/// each word, valid while `words` is neither moved nor changed.
pub(crate) fn param_ptrs(words: &mut [u64]) -> Vec<*mut c_void> {
    words.iter_mut().map(|w| (w as *mut u64).cast::<c_void>()).collect()
}

/// Each parameter's element count (0 for scalars) from a launch's `words`, for
/// out-of-bounds messages.
pub(crate) fn lens(kernel: &Kernel, words: &[u64]) -> Vec<u64> {
    let mut at = 0;
    kernel
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Buffer { .. } => {
                at += 2;
                words.get(at - 1).copied().unwrap_or(0)
            }
            ParamKind::Scalar(_) => {
                at += 1;
                0
            }
        })
        .collect()
}
