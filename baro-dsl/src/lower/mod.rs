//! LLVM lowering of expanded, call-free kernel IR (`lanes::expand` then
//! `mathlib::expand_calls`). `host` builds the in-process JIT module; `convert` holds the
//! integer-only float conversions every LLVM target shares; `ir` is a thin builder helper.
//!
//! Lowering never reorders floating-point operations, never emits fast-math flags or
//! `llvm.fmuladd`, and emits `llvm.fma` only for an explicit `Expr::Fma`, never by contracting
//! a multiply and an add. The only libcalls are those LLVM makes for exact operations the
//! host's generic x86-64 lacks instructions for (`floorf`, `fmaf`), resolved in the process.

pub mod convert;
mod expr;
pub mod gpu;
pub mod host;
mod ir;
mod ops;

pub use host::{
    lower_host, shared_layout, ErrorRecord, ENTRY_NAME, ERR_CHECK, ERR_FOR_STEP, ERR_READ, ERR_READ_SHARED, ERR_WRITE,
    ERR_WRITE_SHARED,
};

/// Lowering failed: the kernel uses something this lowering cannot express, or is malformed
/// in a way the verifier should have caught (a bug in baro if it got this far).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("lowering kernel `{kernel}`: {message}")]
pub struct LowerError {
    pub kernel: String,
    pub message: String,
}

/// A lowering failure before the kernel name is attached.
#[derive(Clone, Debug)]
pub(crate) struct Fail(pub String);

impl From<inkwell::builder::BuilderError> for Fail {
    fn from(e: inkwell::builder::BuilderError) -> Fail {
        Fail(format!("llvm builder: {e}"))
    }
}

pub(crate) type R<T> = Result<T, Fail>;

pub(crate) fn fail<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail(msg.into()))
}
