//! The macro's calls into the verifier (`baro_dsl::verify`), in one place, and the mapping
//! of what it reports onto the user's tokens.
//!
//! Only this module names verifier functions; it never changes the IR it passes on.

use crate::diag::Diag;
use crate::lower::Lowered;
use baro_dsl::ir::Kernel;
use baro_dsl::verify::{SiblingError, SiblingProof};

pub fn check_sibling(rows: &Kernel, m1: &Kernel) -> Result<SiblingProof, SiblingError> {
    baro_dsl::verify::check_sibling(rows, m1)
}

/// Records the verifier's well-formedness errors for a lowered kernel at the user's tokens.
pub fn wellformed(l: &Lowered, diag: &mut Diag) {
    if let Err(errs) = baro_dsl::verify::check_wellformed(&l.kernel) {
        for e in errs {
            diag.push(l.spans.locate(&e.location).error(&e.message));
        }
    }
}
