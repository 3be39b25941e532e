//! Runtimes that launch compiled kernels, behind one interface (`device`): the host JIT
//! (`host`, wrapped by `host_device`), CUDA (`cuda`, feature `cuda`) and HIP (`hip`, feature
//! `hip`). `args` holds the typed arguments of a direct host launch; `check`, `grid` and
//! `error` are the argument checks, grid evaluation and error messages every runtime shares.

mod args;
mod buffer;
mod check;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
mod error;
pub mod grid;
#[cfg(feature = "hip")]
pub mod hip;
pub mod host;
mod host_jit;
mod host_device;
mod stream;

pub use args::{Arg, Element, ScalarArg};
pub use buffer::{Buffer, PinnedBuffer};
pub use device::{Device, DeviceArg, DeviceError, DeviceKernel, DeviceKind, MemoryInfo};
pub use error::LaunchError;
pub use host::{CompileError, HostKernel, HostRuntime, RuntimeError};
pub use stream::{Event, Stream};
