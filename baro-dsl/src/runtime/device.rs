//! The one runtime interface: a `Device` (the host JIT, a CUDA GPU or a HIP GPU) that
//! compiles kernels, holds `Buffer`s, orders work on `Stream`s, times it with `Event`s and
//! launches with the same argument checks and error messages on every target. Tests, benches
//! and the engine are written once against this file.
//!
//! This file holds what every backend shares: argument and range checks, the recording
//! state of `replay`, the error type. Each backend is one file implementing
//! `backend::Backend` (`host_device.rs`, `cuda.rs` with feature `cuda`, `hip.rs` with feature
//! `hip`); `Device` holds it as a `DynBackend` and calls it once per operation. A backend
//! that was not built is a clear error, never a panic.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::backend::{Backend, DynBackend, KernelHandle};
use super::buffer::{Buffer, PinnedBuffer};
use super::error::LaunchError;
use super::graph::{LaunchGraph, Replay};
use super::host_device::HostDevice;
use super::kernel_args::KernelArgs;
use super::stream::{Event, Stream};
use super::Element;
use crate::ir::{Const, Kernel, ScalarType};
use crate::target::Target;

/// Which kind of device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Host,
    Cuda,
    Hip,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Host => "host",
            DeviceKind::Cuda => "cuda",
            DeviceKind::Hip => "hip",
        })
    }
}

impl std::str::FromStr for DeviceKind {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<DeviceKind, DeviceError> {
        match s {
            "host" => Ok(DeviceKind::Host),
            "cuda" => Ok(DeviceKind::Cuda),
            "hip" => Ok(DeviceKind::Hip),
            other => Err(DeviceError::UnknownKind { found: other.to_string() }),
        }
    }
}

/// Anything that can go wrong on a device. `NoDriver`, `NoDevice`, `NotBuilt` are the
/// environment's; `Driver` is the driver's (or a bug in baro); `Compile` is the kernel
/// author's or baro's (the message says which); `Launch`, `Mismatch` and `Recording` are the
/// caller's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error("{message}")]
    NoDriver { message: String },
    #[error("no {kind} device {ordinal}: expected an ordinal below the device count, found {count} device(s)")]
    NoDevice { kind: DeviceKind, ordinal: usize, count: usize },
    #[error("{kind} support is not built into this binary: expected a build with `--features baro-dsl/{kind}`")]
    NotBuilt { kind: DeviceKind },
    #[error("{call} failed: {message}")]
    Driver { call: &'static str, message: String },
    #[error("compiling kernel `{kernel}` for {target}: {message}")]
    Compile { kernel: String, target: String, message: String },
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("{what}: expected {expected}, found {found}")]
    Mismatch { what: &'static str, expected: String, found: String },
    #[error("unknown device `{found}`: expected cuda, hip or host")]
    UnknownKind { found: String },
    /// Something other than a kernel launch while `Device::replay` records the stream.
    #[error("{op} while the stream records launches for `Device::replay`: expected only kernel launches until its closure returns")]
    Recording { op: &'static str },
}

/// One launch argument, in the kernel's parameter order.
pub enum DeviceArg<'a> {
    /// A buffer the kernel only reads.
    Buf(&'a Buffer),
    /// A buffer the kernel may write.
    BufMut(&'a mut Buffer),
    /// A read-only `u8` buffer seen by the kernel as little-endian `u32` words (a `&[u32]`
    /// parameter of `byte_len.div_ceil(4)` elements; the last word's bytes past the end read
    /// as 0, since every allocation is rounded up to whole words). Quantized weights are
    /// stored as raw bytes and read four at a time this way.
    Words(&'a Buffer),
    Scalar(Const),
}

impl<'a> DeviceArg<'a> {
    pub fn buf(b: &'a Buffer) -> DeviceArg<'a> {
        DeviceArg::Buf(b)
    }
    pub fn buf_mut(b: &'a mut Buffer) -> DeviceArg<'a> {
        DeviceArg::BufMut(b)
    }
    pub fn scalar(c: Const) -> DeviceArg<'a> {
        DeviceArg::Scalar(c)
    }
    /// `b` (a `u8` buffer) as little-endian `u32` words: see `DeviceArg::Words`.
    pub fn words(b: &'a Buffer) -> DeviceArg<'a> {
        DeviceArg::Words(b)
    }
    pub(crate) fn shape(&self) -> super::check::ArgShape {
        use super::check::ArgShape;
        match self {
            DeviceArg::Buf(b) => ArgShape::Buf { elem: b.elem(), writable: false },
            DeviceArg::BufMut(b) => ArgShape::Buf { elem: b.elem(), writable: true },
            // A words view of anything but bytes is refused at launch (`abi::buffer`, the host's).
            DeviceArg::Words(_) => ArgShape::Buf { elem: crate::ir::ScalarType::U32, writable: false },
            DeviceArg::Scalar(c) => ArgShape::Scalar(c.ty),
        }
    }
}

macro_rules! device_scalar_from {
    ($($t:ty),*) => {$(
        impl From<$t> for DeviceArg<'_> {
            fn from(v: $t) -> Self {
                DeviceArg::Scalar(super::args::ScalarArg::to_const(v))
            }
        }
    )*};
}
device_scalar_from!(usize, u64, i64, u32, i32, u8, i8, bool, f32, half::f16, half::bf16, Const);

/// A compiled kernel, ready to launch on the device that compiled it. Cheap to clone.
#[derive(Clone)]
pub struct DeviceKernel {
    pub(crate) handle: KernelHandle,
}

impl DeviceKernel {
    /// The kernel's IR (as the backend compiled it: the host keeps the expanded form).
    pub fn kernel(&self) -> &Kernel {
        self.handle.kernel()
    }
    pub fn name(&self) -> &str {
        &self.kernel().name
    }
    /// The same loaded kernel (not merely an equal one).
    pub(crate) fn same(&self, other: &DeviceKernel) -> bool {
        self.handle.same(&other.handle)
    }
}

/// A compute device. `Send + Sync`; every method takes `&self`.
pub struct Device {
    backend: Arc<dyn DynBackend>,
    default_stream: Stream,
    /// Bytes `alloc` has handed out since the device was opened (never decreases).
    allocated: AtomicU64,
}

/// A device's memory as its driver reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    pub free: u64,
    pub total: u64,
}

impl Device {
    /// A device of an opened backend, with its default stream.
    fn with_backend(backend: impl Backend) -> Result<Device, DeviceError> {
        let backend: Arc<dyn DynBackend> = Arc::new(backend);
        let default_stream = Stream::new(backend.clone(), backend.default_stream()?);
        Ok(Device { backend, default_stream, allocated: AtomicU64::new(0) })
    }

    /// The host JIT as a device ("device buffers" are host memory, launches run in place).
    pub fn host() -> Result<Device, DeviceError> {
        Device::with_backend(HostDevice::new()?)
    }

    /// The host JIT as a device whose launch graphs replay in a seeded random order of their
    /// data dependencies (`GraphOrder::Data`: an order a CUDA graph of `BARO_GRAPH_ORDER=data`
    /// may run them in) instead of their recording order; everything else as `host()`. For
    /// tests that a recording's data dependencies leave every byte as its recording order.
    pub fn host_replaying_by_data(seed: u64) -> Result<Device, DeviceError> {
        Device::with_backend(HostDevice::replaying_by_data(seed)?)
    }

    /// CUDA device `ordinal`. Without a driver: "no CUDA driver (libcuda.so.1) found".
    pub fn cuda(ordinal: usize) -> Result<Device, DeviceError> {
        #[cfg(feature = "cuda")]
        return Device::with_backend(super::cuda::CudaDevice::new(ordinal)?);
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            Err(DeviceError::NotBuilt { kind: DeviceKind::Cuda })
        }
    }

    /// HIP device `ordinal` (an AMD GPU). Without one: "no hip device 0: ...".
    pub fn hip(ordinal: usize) -> Result<Device, DeviceError> {
        #[cfg(feature = "hip")]
        return Device::with_backend(super::hip::HipDevice::new(ordinal)?);
        #[cfg(not(feature = "hip"))]
        {
            let _ = ordinal;
            Err(DeviceError::NotBuilt { kind: DeviceKind::Hip })
        }
    }

    pub fn open(kind: DeviceKind, ordinal: usize) -> Result<Device, DeviceError> {
        match kind {
            DeviceKind::Host => Device::host(),
            DeviceKind::Cuda => Device::cuda(ordinal),
            DeviceKind::Hip => Device::hip(ordinal),
        }
    }

    /// CUDA device 0 if one is present, else HIP device 0 if one is present, else the host.
    pub fn best_available() -> Result<Device, DeviceError> {
        Device::cuda(0).or_else(|_| Device::hip(0)).or_else(|_| Device::host())
    }

    pub fn kind(&self) -> DeviceKind {
        self.backend.kind()
    }

    /// A human-readable device name ("NVIDIA H200", "host (x86_64-unknown-linux-gnu)").
    pub fn name(&self) -> String {
        self.backend.name()
    }

    /// The driver's version as text ("CUDA driver API 13.0"; the host: the LLVM version).
    pub fn driver_version(&self) -> String {
        self.backend.driver_version()
    }

    /// The compilation target kernels are built for.
    pub fn target(&self) -> Target {
        self.backend.target()
    }

    /// Checks and compiles `k` (cached per device by kernel).
    pub fn compile(&self, k: &Kernel) -> Result<DeviceKernel, DeviceError> {
        self.backend.compile(k)
    }

    /// A zeroed buffer of `len` elements of `elem`.
    pub fn alloc(&self, elem: ScalarType, len: usize) -> Result<Buffer, DeviceError> {
        let bytes = byte_len(elem, len)?;
        let mem = self.backend.alloc(bytes)?;
        self.allocated.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(Buffer::new(elem, len, mem))
    }

    /// Bytes of device buffers `alloc` (and so `upload`) has handed out since this device was
    /// opened, freed ones included: the difference around a constructor is what it allocated.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }

    /// Free and total device memory as the driver reports them; `None` on the host, whose
    /// "device memory" is the process's own.
    pub fn memory_info(&self) -> Result<Option<MemoryInfo>, DeviceError> {
        self.backend.memory_info()
    }

    /// A buffer holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<Buffer, DeviceError> {
        self.upload_bytes(T::TYPE, super::buffer::as_bytes(data))
    }

    /// A buffer of `elem` holding a copy of `bytes` (a whole number of elements).
    pub fn upload_bytes(&self, elem: ScalarType, bytes: &[u8]) -> Result<Buffer, DeviceError> {
        if bytes.len() % elem.size_bytes() != 0 {
            return Err(DeviceError::Mismatch {
                what: "upload",
                expected: format!("a multiple of {} bytes (one {elem})", elem.size_bytes()),
                found: format!("{} bytes", bytes.len()),
            });
        }
        let mut b = self.alloc(elem, bytes.len() / elem.size_bytes())?;
        self.write_bytes(&mut b, bytes)?;
        Ok(b)
    }

    /// Overwrites all of `buf` with `bytes` (exactly `buf.byte_len()` of them). Synchronous.
    pub fn write_bytes(&self, buf: &mut Buffer, bytes: &[u8]) -> Result<(), DeviceError> {
        self.default_stream.refuse_while_recording("a buffer write")?;
        if bytes.len() != buf.byte_len() {
            return Err(DeviceError::Mismatch {
                what: "write",
                expected: format!("{} bytes", buf.byte_len()),
                found: format!("{} bytes", bytes.len()),
            });
        }
        self.backend.write(&mut buf.mem, bytes)
    }

    /// Overwrites all of `buf` with `data`.
    pub fn write<T: Element>(&self, buf: &mut Buffer, data: &[T]) -> Result<(), DeviceError> {
        buf.expect_elem(T::TYPE)?;
        self.write_bytes(buf, super::buffer::as_bytes(data))
    }

    /// A copy of `buf`'s bytes. Synchronous: waits for work queued on the default stream.
    pub fn read_bytes(&self, buf: &Buffer) -> Result<Vec<u8>, DeviceError> {
        self.read_bytes_prefix(buf, buf.byte_len())
    }

    /// A copy of the first `len` bytes of `buf` (at most its length).
    fn read_bytes_prefix(&self, buf: &Buffer, len: usize) -> Result<Vec<u8>, DeviceError> {
        self.default_stream.refuse_while_recording("a buffer read")?;
        if len > buf.byte_len() {
            return Err(DeviceError::Mismatch {
                what: "read",
                expected: format!("at most the buffer's {} bytes", buf.byte_len()),
                found: format!("{len} bytes"),
            });
        }
        self.backend.read(&buf.mem, len)
    }

    /// A copy of `buf`'s elements, which must be of `T`'s type.
    pub fn read<T: Element>(&self, buf: &Buffer) -> Result<Vec<T>, DeviceError> {
        buf.expect_elem(T::TYPE)?;
        super::buffer::from_bytes(&self.read_bytes(buf)?)
    }

    /// A copy of the first `n` elements of `buf` (of `T`'s type; `n` at most its length), for a
    /// buffer sized for more than one call uses. Synchronous, as `read`.
    pub fn read_prefix<T: Element>(&self, buf: &Buffer, n: usize) -> Result<Vec<T>, DeviceError> {
        buf.expect_elem(T::TYPE)?;
        let len = n.checked_mul(T::TYPE.size_bytes()).ok_or_else(|| DeviceError::Mismatch {
            what: "read",
            expected: "an element count whose bytes fit in usize".into(),
            found: format!("{n} elements"),
        })?;
        super::buffer::from_bytes(&self.read_bytes_prefix(buf, len)?)
    }

    /// Queues a device-to-device copy of all of `src` into `dst` (same byte length) on `stream`.
    pub fn copy(&self, stream: &Stream, src: &Buffer, dst: &mut Buffer) -> Result<(), DeviceError> {
        stream.refuse_while_recording("a device-to-device copy")?;
        if src.byte_len() != dst.byte_len() {
            return Err(DeviceError::Mismatch {
                what: "copy",
                expected: format!("{} bytes in the destination", src.byte_len()),
                found: format!("{} bytes", dst.byte_len()),
            });
        }
        self.backend.copy(&stream.queue, &src.mem, &mut dst.mem, src.byte_len())
    }

    /// Queues a copy of `len` bytes from `src[src_off..]` (pinned host memory) into
    /// `dst[dst_off..]` (bytes of the buffer) on `stream`. Both ranges are checked first.
    /// Asynchronous on CUDA: `src` must not be written until the stream has passed the copy
    /// (`PinnedBuffer::as_mut_slice` and dropping the buffer wait for the device). On the host
    /// it is a plain copy; on HIP, whose pinned memory is pageable for now, it waits for
    /// `stream` before returning.
    pub fn copy_from_pinned(
        &self,
        stream: &Stream,
        src: &PinnedBuffer,
        src_off: usize,
        dst: &mut Buffer,
        dst_off: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        stream.refuse_while_recording("a copy from pinned memory")?;
        check_range("copy source", "bytes of pinned memory", src_off, len, src.len())?;
        check_range("copy destination", "bytes in the buffer", dst_off, len, dst.byte_len())?;
        if len == 0 {
            return Ok(());
        }
        self.backend.copy_from_pinned(&stream.queue, &src.mem, src_off, &mut dst.mem, dst_off, len)
    }

    /// Page-locked host memory of `bytes` bytes (plain memory on the host device), for fast
    /// transfers: pass its slice to `write_bytes`.
    pub fn alloc_pinned(&self, bytes: usize) -> Result<PinnedBuffer, DeviceError> {
        Ok(PinnedBuffer { mem: self.backend.alloc_pinned(bytes)? })
    }

    /// The stream every synchronous call (`run`, `read`, `write`) uses.
    pub fn default_stream(&self) -> &Stream {
        &self.default_stream
    }

    pub fn new_stream(&self) -> Result<Stream, DeviceError> {
        Ok(Stream::new(self.backend.clone(), self.backend.new_stream()?))
    }

    /// An event for timing (`record` on a stream, then `elapsed_ms`).
    pub fn new_event(&self) -> Result<Event, DeviceError> {
        Ok(Event { backend: self.backend.clone(), event: self.backend.new_event()? })
    }

    /// Queues `kernel` on `stream`. Arguments are checked now (count, element type,
    /// writability, scalar type: the host's messages); a failed bounds check inside the
    /// kernel is reported by the next `stream.synchronize()` (on the host: right here).
    /// While `replay` records `stream`, the checked launch is recorded instead of queued.
    pub fn launch(
        &self,
        stream: &Stream,
        kernel: &DeviceKernel,
        args: &mut [DeviceArg<'_>],
    ) -> Result<(), DeviceError> {
        if stream.record_if_recording(|| self.backend.record(&stream.queue, kernel, args))? {
            return Ok(());
        }
        self.backend.launch(&stream.queue, kernel, args)
    }

    /// `launch` with a kernel's typed arguments (`KernelArgs`, the struct `#[kernel]` writes:
    /// `KvAppendArgs { .. }`, or `Rows(args, rows)` for a rows sibling), in the kernel's
    /// parameter order. Debug builds first check that the struct's parameter names are the
    /// kernel's (`DeviceError::Mismatch` otherwise); release builds rely on `launch`'s checks
    /// of the kinds and types, which are the same.
    pub fn launch_args<'a, A: KernelArgs<'a>>(
        &self,
        stream: &Stream,
        kernel: &DeviceKernel,
        args: A,
    ) -> Result<(), DeviceError> {
        if cfg!(debug_assertions) {
            super::kernel_args::fits::<A>(kernel.kernel())?;
        }
        self.launch(stream, kernel, &mut args.into_args())
    }

    /// Runs `f` with `stream` recording its kernel launches instead of queueing them, then
    /// replays the recording on `stream` through `graph`: on CUDA one `cuGraphLaunch` of a
    /// chain of kernel nodes, built at the first replay and afterwards only updated where
    /// the parameter words changed (rebuilt when the node count, a kernel or a grid differs);
    /// on the host and on HIP the recorded launches in order through `launch`'s path. The
    /// same kernels with the same arguments in the same order as launching them directly.
    ///
    /// Inside `f`, `launch` on `stream` checks its arguments as always (an argument error is
    /// returned there) and records; anything else on `stream` (a copy, a read or write, an
    /// event, a synchronisation, a nested `replay`) is `DeviceError::Recording`. An error
    /// from `f` replays nothing. A failed bounds check inside a replayed kernel is reported
    /// by the next `stream.synchronize()` with the kernel's name (on the host: here).
    ///
    /// # Safety
    ///
    /// The recording holds the addresses of the buffers its launches name, not borrows:
    /// every such buffer must stay alive (not dropped or replaced, also not inside `f` after
    /// its launch) and must not be read or written other than through these launches until
    /// this call returns. On CUDA a replayed graph does not take part in cudarc's per-buffer
    /// event tracking: work on other streams touching its buffers must be ordered with
    /// `Event`s.
    pub unsafe fn replay<T, E: From<DeviceError>>(
        &self,
        stream: &Stream,
        graph: &mut LaunchGraph,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<(T, Replay), E> {
        graph.bind(self.kind())?;
        let recording = stream.begin_recording()?;
        let out = f();
        let nodes = recording.finish();
        let out = out?;
        // SAFETY: the caller keeps every recorded buffer alive and unaliased until we return.
        let replayed = unsafe { self.backend.replay(&stream.queue, graph, nodes) };
        if replayed.is_err() {
            graph.clear();
        }
        Ok((out, replayed?))
    }

    /// Launches on the default stream and waits: any error, bounds checks included, is
    /// returned here.
    pub fn run(&self, kernel: &DeviceKernel, args: &mut [DeviceArg<'_>]) -> Result<(), DeviceError> {
        self.launch(&self.default_stream, kernel, args)?;
        self.default_stream.synchronize()
    }
}

/// `off..off + len` lies within `0..size`.
fn check_range(what: &'static str, unit: &str, off: usize, len: usize, size: usize) -> Result<(), DeviceError> {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(DeviceError::Mismatch {
            what,
            expected: format!("a range within the {size} {unit}"),
            found: format!("bytes {off}..{}", off as u128 + len as u128),
        }),
    }
}

fn byte_len(elem: ScalarType, len: usize) -> Result<usize, DeviceError> {
    len.checked_mul(elem.size_bytes()).ok_or_else(|| DeviceError::Mismatch {
        what: "buffer length",
        expected: format!("at most {} elements of {elem}", usize::MAX / elem.size_bytes()),
        found: len.to_string(),
    })
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({}: {})", self.kind(), self.name())
    }
}

impl fmt::Debug for DeviceKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceKernel({} on {})", self.name(), self.handle.kind())
    }
}
