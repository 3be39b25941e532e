//! Argument checking shared by every runtime: count, element type, writability and scalar
//! type, against a kernel's parameters, with the same messages on every target.
//!
//! This module only reads shapes; it never touches buffer contents.

use super::error::LaunchError;
use crate::ir::{Access, Kernel, ParamKind, ScalarType};

/// What one launch argument is, without its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArgShape {
    Buf { elem: ScalarType, writable: bool },
    Scalar(ScalarType),
}

impl ArgShape {
    /// How the argument reads in an error message (`&[f32]`, `&mut [bf16]`, `usize`).
    pub(crate) fn describe(self) -> String {
        match self {
            ArgShape::Buf { elem, writable: false } => format!("&[{elem}]"),
            ArgShape::Buf { elem, writable: true } => format!("&mut [{elem}]"),
            ArgShape::Scalar(t) => t.to_string(),
        }
    }
}

/// Checks every argument against `k.params`; the first mismatch is the error.
pub(crate) fn check_args(k: &Kernel, args: impl ExactSizeIterator<Item = ArgShape>) -> Result<(), LaunchError> {
    if args.len() != k.params.len() {
        return Err(LaunchError::ArgCount { kernel: k.name.clone(), expected: k.params.len(), found: args.len() });
    }
    for (position, (p, a)) in k.params.iter().zip(args).enumerate() {
        let mismatch =
            |expected: String| LaunchError::ArgType { name: p.name.clone(), position, expected, found: a.describe() };
        match (&p.kind, a) {
            (ParamKind::Scalar(t), ArgShape::Scalar(s)) if s == *t => {}
            (ParamKind::Scalar(t), _) => return Err(mismatch(t.to_string())),
            (ParamKind::Buffer { elem, access }, ArgShape::Buf { elem: e, writable }) if e == *elem => {
                if *access == Access::ReadWrite && !writable {
                    return Err(LaunchError::ReadOnly { name: p.name.clone(), position, elem: *elem });
                }
            }
            (ParamKind::Buffer { elem, access }, _) => {
                let m = if *access == Access::ReadWrite { "mut " } else { "" };
                return Err(mismatch(format!("&{m}[{elem}]")));
            }
        }
    }
    Ok(())
}
