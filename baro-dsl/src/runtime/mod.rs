//! Runtimes that launch compiled kernels, behind one interface (`device`): backends
//! implementing `backend::Backend`, one file each: the host JIT (`host`, wrapped by
//! `host_device`), CUDA (`cuda`, feature `cuda`) and HIP (`hip`, feature `hip`). `args` holds
//! the typed arguments of a direct host launch; `check`, `grid` and `error` are the argument
//! checks, grid evaluation and error messages every runtime shares; `abi` lays out a GPU
//! launch and `records` keeps a GPU stream's error records; `graph` records a stream's
//! launches and replays them (`cuda_graph`: as a CUDA graph); `kernel_args` is the trait behind
//! the typed argument struct `#[kernel]` writes for each kernel (`KernelArgs`).

#[cfg(any(feature = "cuda", feature = "hip"))]
mod abi;
mod args;
mod backend;
mod buffer;
mod check;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
mod cuda_graph;
pub mod device;
mod error;
mod graph;
pub mod grid;
#[cfg(feature = "hip")]
pub mod hip;
pub mod host;
mod host_device;
mod host_jit;
mod kernel_args;
#[cfg(any(feature = "cuda", feature = "hip"))]
mod records;
mod stream;

pub use args::{Arg, Element, ScalarArg};
pub use buffer::{Buffer, PinnedBuffer};
pub use device::{Device, DeviceArg, DeviceError, DeviceKernel, DeviceKind, MemoryInfo};
pub use error::LaunchError;
pub use graph::{GraphStats, LaunchGraph, Replay};
pub use host::{CompileError, HostKernel, HostRuntime, RuntimeError};
pub use kernel_args::{KernelArgs, ReadArg, Rows, Words};
pub use stream::{Event, Stream};
