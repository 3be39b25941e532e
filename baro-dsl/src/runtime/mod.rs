//! Runtimes that launch compiled kernels. `host` JIT-compiles kernels with LLVM and runs
//! them in process; `args` holds the typed launch arguments every runtime accepts.

mod args;
pub mod host;

pub use args::{Arg, Element};
pub use host::{CompileError, HostKernel, HostRuntime, LaunchError, RuntimeError};
