//! Kernels that must compile and whose builders must run: one module each, every one its own
//! module scope (it sees only what it imports, as a user's crate would), with a `runs` test
//! that builds the kernels and checks what the file says. They were trybuild pass cases; as
//! modules of this binary they build with the workspace profile (the `#[kernel]` proofs in the
//! optimised verifier) and link once, instead of one LLVM-linked binary each.

mod args;
mod block_value;
mod dot4;
mod fma;
mod generic;
mod kernel_helper;
mod matvec;
mod mma_i8;
mod order_free_int;
mod par_team;
mod q8_dot;
mod rmsnorm;
mod rows_reduce;
mod rows_reduce_own_lengths;
mod rows_results_indexed;
mod sibling_carried_shared;
mod sibling_derived;
mod sibling_mma_i8;
mod sibling_mma_i8_halves;
mod sibling_under_check;
