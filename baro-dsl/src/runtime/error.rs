//! Launch errors shared by every runtime, and the one translation of a kernel's
//! `ErrorRecord` (written by the lowered code on a failed bounds check, a bad loop step or a
//! failed `check!`)
//! into the message the user reads. Host, CUDA and HIP report the same words.

use crate::ir::{Kernel, ScalarType};
use crate::lower::{self, ErrorRecord};

/// A launch failed. Every variant is the caller's (or the kernel author's) to fix. On the
/// host no user buffer was modified; on a device, buffers the kernel wrote may hold partial
/// results.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("kernel `{kernel}` takes {expected} arguments, found {found}")]
    ArgCount { kernel: String, expected: usize, found: usize },
    #[error("argument `{name}` (#{position}): expected {expected}, found {found}")]
    ArgType { name: String, position: usize, expected: String, found: String },
    #[error("argument `{name}` (#{position}): the kernel writes it, expected &mut [{elem}], found &[{elem}]")]
    ReadOnly { name: String, position: usize, elem: ScalarType },
    #[error("kernel `{kernel}` grid axis {axis}: {message}")]
    Grid { kernel: String, axis: usize, message: String },
    #[error("kernel `{kernel}` {verb} {place}`{buffer}[{index}]` but `{buffer}` has {len} elements")]
    OutOfBounds { kernel: String, verb: &'static str, place: &'static str, buffer: String, index: String, len: u64 },
    #[error("kernel `{kernel}`: check {id} failed: expected `{cond}` to hold for every launch, found a launch where it does not")]
    Check { kernel: String, id: u64, cond: String },
    #[error("kernel `{kernel}`: a `for` loop has step {step}, expected a positive step")]
    ForStep { kernel: String, step: String },
    #[error("kernel `{kernel}`: shared memory of {bytes} bytes does not fit in this process")]
    Shared { kernel: String, bytes: u64 },
}

/// The error a nonzero `ErrorRecord` stands for. `lens[i]` is the element count the launch
/// passed for parameter `i`.
pub(crate) fn describe_record(k: &Kernel, e: ErrorRecord, lens: &[u64]) -> LaunchError {
    let index = if e.signed != 0 { (e.index as i64).to_string() } else { e.index.to_string() };
    let (verb, shared) = match e.kind {
        lower::ERR_READ => ("read", false),
        lower::ERR_WRITE => ("wrote", false),
        lower::ERR_READ_SHARED => ("read", true),
        lower::ERR_WRITE_SHARED => ("wrote", true),
        lower::ERR_CHECK => {
            return LaunchError::Check {
                kernel: k.name.clone(),
                id: e.id,
                cond: check_text(k, &k.body, e.id).unwrap_or_else(|| "?".to_string()),
            }
        }
        _ => return LaunchError::ForStep { kernel: k.name.clone(), step: index },
    };
    let (buffer, len) = if shared {
        k.shared.get(e.id as usize).map_or(("?".to_string(), 0), |s| (s.name.clone(), s.len as u64))
    } else {
        let name = k.params.get(e.id as usize).map_or("?".to_string(), |p| p.name.clone());
        (name, lens.get(e.id as usize).copied().unwrap_or(0))
    };
    LaunchError::OutOfBounds {
        kernel: k.name.clone(),
        verb,
        place: if shared { "shared " } else { "" },
        buffer,
        index,
        len,
    }
}

/// The condition of check `id` in `body` (nested blocks included), as IR text.
fn check_text(k: &Kernel, body: &[crate::ir::Stmt], id: u64) -> Option<String> {
    body.iter().find_map(|s| match s {
        crate::ir::Stmt::Check { id: i, cond } if u64::from(*i) == id => Some(k.expr_text(cond)),
        crate::ir::Stmt::For { body, .. }
        | crate::ir::Stmt::ParFor { body, .. }
        | crate::ir::Stmt::Lanes { body, .. } => check_text(k, body, id),
        crate::ir::Stmt::If { then_body, else_body, .. } => {
            check_text(k, then_body, id).or_else(|| check_text(k, else_body, id))
        }
        _ => None,
    })
}
