//! The order-equivalence verifier: well-formedness, undeclared-accumulation detection,
//! symbolic execution over concrete small shapes, the check that expanded code implements
//! each declared schedule, and the rows-vs-m=1 sibling check.
//!
//! The verifier never changes IR; it reads kernels and reports errors as data.

mod report;

pub use report::{ErrorKind, KernelProof, Location, Mismatch, SiblingError, SiblingProof, VerifyError};
