//! The order-equivalence verifier: well-formedness, undeclared-accumulation detection,
//! symbolic execution over concrete small shapes, the check that expanded code implements
//! each declared schedule, and the rows-vs-m=1 sibling check.
//!
//! The verifier never changes IR; it reads kernels and reports errors as data.

mod coverage;
mod dag;
mod kernel_check;
mod lengths;
pub mod mutate;
mod ordinals;
mod race;
pub mod range;
mod report;
mod shapes;
mod sibling;
mod symbolic;
mod wellformed;

pub use kernel_check::{check_expanded, check_races, verify_kernel};
/// The statement walk every verifier pass shares, for the lowerings' own analyses.
#[cfg(feature = "llvm")]
pub(crate) use ordinals::{stmt_blocks, stmt_exprs};
pub use report::{ErrorKind, KernelProof, Location, Mismatch, SiblingError, SiblingProof, VerifyError};
pub use shapes::{default_shapes, MAX_SHAPES};
pub use sibling::{check_sibling, compare_rows_arithmetic};

use crate::ir::Kernel;

/// Checks that `k` is well formed (see `wellformed`), collecting every error. Applies to the
/// kernel as its author wrote it: a float accumulation in a loop must be a declared reduction.
pub fn check_wellformed(k: &Kernel) -> Result<(), Vec<VerifyError>> {
    let errs = wellformed::check(k, true);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}
