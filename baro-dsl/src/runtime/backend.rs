//! The backend interface: what the host JIT, CUDA and HIP each implement (`Backend`, one
//! file per backend), and the type-erased form `Device`, `Buffer`, `Stream` and `Event`
//! hold (`DynBackend`, `Handle`). A backend names its own types for kernels, memory, pinned
//! memory, streams and events and only ever sees its own: the blanket `impl DynBackend`
//! below recovers them from the handles and answers an object of another device with the
//! same error on every backend.
//!
//! Cost: a `Device` call is one dynamic call into its backend; recovering a backend's
//! objects from their handles is a comparison of type ids kept in the handle, never a
//! dynamic call or an allocation (a launch names many buffers).
//!
//! Adding a backend: implement `Backend` in a new file and open it in `Device::open`'s
//! constructor for its `DeviceKind`. This file never names a backend.

use std::any::{Any, TypeId};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::device::{DeviceArg, DeviceError, DeviceKernel, DeviceKind, MemoryInfo};
use super::graph::{LaunchGraph, Node, Replay};
use crate::ir::Kernel;
use crate::target::Target;

/// A compiled kernel as its backend keeps it.
pub(crate) trait BackendKernel: Send + Sync + 'static {
    /// The kernel's IR (as the backend compiled it: the host keeps the expanded form).
    fn kernel(&self) -> &Kernel;
}

/// Page-locked host memory as its backend keeps it.
pub(crate) trait PinnedMemory: Send + Sync + 'static {
    fn len(&self) -> usize;
    fn as_slice(&self) -> Result<&[u8], DeviceError>;
    /// The bytes, for writing, once no queued copy still reads them.
    fn as_mut_slice(&mut self) -> Result<&mut [u8], DeviceError>;
}

/// One kind of device. Every method receives only this backend's own objects; the caller
/// (`Device`, `Stream`, `Event`) has checked lengths, ranges and recording state.
pub(crate) trait Backend: Send + Sync + 'static {
    const KIND: DeviceKind;
    type Kernel: BackendKernel;
    /// Device memory of at least the bytes asked for, rounded up to whole 4-byte words.
    type Mem: Send + Sync + 'static;
    type Pinned: PinnedMemory;
    type Stream: Send + Sync + 'static;
    type Event: Send + Sync + 'static;

    fn name(&self) -> String;
    fn driver_version(&self) -> String;
    fn target(&self) -> Target;
    /// Checks and compiles `k` (cached per device by kernel).
    fn compile(&self, k: &Kernel) -> Result<Arc<Self::Kernel>, DeviceError>;
    /// `bytes` zeroed bytes.
    fn alloc(&self, bytes: usize) -> Result<Self::Mem, DeviceError>;
    /// `None` where the device's memory is the process's own.
    fn memory_info(&self) -> Result<Option<MemoryInfo>, DeviceError>;
    /// Overwrites the first `bytes.len()` bytes of `m`; synchronous.
    fn write(&self, m: &mut Self::Mem, bytes: &[u8]) -> Result<(), DeviceError>;
    /// The first `len` bytes of `m`, after the work queued on the default stream.
    fn read(&self, m: &Self::Mem, len: usize) -> Result<Vec<u8>, DeviceError>;
    /// Queues a copy of the first `len` bytes of `src` into `dst` on `q`.
    fn copy(&self, q: &Self::Stream, src: &Self::Mem, dst: &mut Self::Mem, len: usize) -> Result<(), DeviceError>;
    fn alloc_pinned(&self, bytes: usize) -> Result<Self::Pinned, DeviceError>;
    /// Queues a copy of `src[src_off..][..len]` into `dst[dst_off..]` on `q` (ranges checked,
    /// `len` > 0).
    fn copy_from_pinned(
        &self,
        q: &Self::Stream,
        src: &Self::Pinned,
        src_off: usize,
        dst: &mut Self::Mem,
        dst_off: usize,
        len: usize,
    ) -> Result<(), DeviceError>;
    /// The stream every synchronous call uses.
    fn default_stream(&self) -> Result<Self::Stream, DeviceError>;
    fn new_stream(&self) -> Result<Self::Stream, DeviceError>;
    fn new_event(&self) -> Result<Self::Event, DeviceError>;
    /// Waits for `q`'s work, then reports the first failed bounds check since the last one.
    fn synchronize(&self, q: &Self::Stream) -> Result<(), DeviceError>;
    /// Work queued on `q` from now on waits for `e`.
    fn wait_event(&self, q: &Self::Stream, e: &Self::Event) -> Result<(), DeviceError>;
    /// Marks in `e` the point after all work queued on `q` so far.
    fn record_event(&self, e: &Self::Event, q: &Self::Stream) -> Result<(), DeviceError>;
    /// Milliseconds from `start` to `end`; waits for `end`.
    fn elapsed_ms(&self, start: &Self::Event, end: &Self::Event) -> Result<f32, DeviceError>;
    /// Checks the arguments (`check::check_args`'s messages) and queues the launch.
    fn launch(
        &self,
        q: &Self::Stream,
        k: KernelRef<'_, Self::Kernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<(), DeviceError>;
    /// `launch`'s checks, then the launch as a graph node instead of queueing it.
    fn record(
        &self,
        q: &Self::Stream,
        k: KernelRef<'_, Self::Kernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<Node, DeviceError>;
    /// Replays `nodes` (just recorded on `q`) through `graph`, settling it.
    ///
    /// # Safety
    ///
    /// Every buffer the nodes name is alive and not otherwise used (`Device::replay`).
    unsafe fn replay(&self, q: &Self::Stream, graph: &mut LaunchGraph, nodes: Vec<Node>)
        -> Result<Replay, DeviceError>;
}

/// A kernel of backend `K`'s type, with the `DeviceKernel` that a graph node or a pending
/// error record keeps (cloning it is a reference count).
pub(crate) struct KernelRef<'a, K> {
    pub(crate) kernel: &'a K,
    pub(crate) handle: &'a DeviceKernel,
}

impl<K> Deref for KernelRef<'_, K> {
    type Target = K;
    fn deref(&self) -> &K {
        self.kernel
    }
}

/// A backend's object behind a type-erased pointer, with its device kind (for messages)
/// and its concrete type's id kept beside it, so that `get` is a comparison.
pub(crate) struct Handle<P> {
    kind: DeviceKind,
    ty: TypeId,
    ptr: P,
}

/// Memory, streams, events: owned by their `Buffer`, `Stream` or `Event`.
pub(crate) type AnyHandle = Handle<Box<dyn Any + Send + Sync>>;
/// A compiled kernel, shared by its clones and by the graph nodes that name it.
pub(crate) type KernelHandle = Handle<Arc<dyn BackendKernel>>;
pub(crate) type PinnedHandle = Handle<Box<dyn PinnedMemory>>;

impl AnyHandle {
    pub(crate) fn new<T: Any + Send + Sync>(kind: DeviceKind, v: T) -> AnyHandle {
        Handle { kind, ty: TypeId::of::<T>(), ptr: Box::new(v) }
    }
}

impl KernelHandle {
    pub(crate) fn new<T: BackendKernel>(kind: DeviceKind, k: Arc<T>) -> KernelHandle {
        Handle { kind, ty: TypeId::of::<T>(), ptr: k }
    }

    pub(crate) fn kernel(&self) -> &Kernel {
        self.ptr.kernel()
    }

    /// The same loaded kernel (not merely an equal one).
    pub(crate) fn same(&self, other: &KernelHandle) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.ptr), Arc::as_ptr(&other.ptr))
    }
}

impl PinnedHandle {
    pub(crate) fn new<T: PinnedMemory>(kind: DeviceKind, p: T) -> PinnedHandle {
        Handle { kind, ty: TypeId::of::<T>(), ptr: Box::new(p) }
    }

    pub(crate) fn memory(&self) -> &dyn PinnedMemory {
        &*self.ptr
    }

    pub(crate) fn memory_mut(&mut self) -> &mut dyn PinnedMemory {
        &mut *self.ptr
    }
}

impl<P: Deref> Handle<P> {
    /// Which kind of device made the object.
    pub(crate) fn kind(&self) -> DeviceKind {
        self.kind
    }

    /// The object, if it is a `T`.
    pub(crate) fn get<T: 'static>(&self) -> Option<&T> {
        if self.ty != TypeId::of::<T>() {
            return None;
        }
        // SAFETY: `ty` is the type id of the value `ptr` points to (every constructor takes
        // them from one `T`, and neither changes afterwards), so that value is a `T`.
        Some(unsafe { &*(&*self.ptr as *const P::Target).cast::<T>() })
    }
}

impl<P: DerefMut> Handle<P> {
    /// The object for writing, if it is a `T`.
    pub(crate) fn get_mut<T: 'static>(&mut self) -> Option<&mut T> {
        if self.ty != TypeId::of::<T>() {
            return None;
        }
        // SAFETY: as in `get`; the borrow of `self` is exclusive.
        Some(unsafe { &mut *(&mut *self.ptr as *mut P::Target).cast::<T>() })
    }
}

impl Clone for KernelHandle {
    fn clone(&self) -> KernelHandle {
        Handle { kind: self.kind, ty: self.ty, ptr: self.ptr.clone() }
    }
}

/// `Backend` over handles: what `Device`, `Stream` and `Event` call. Implemented once, for
/// every `Backend`, below.
pub(crate) trait DynBackend: Send + Sync {
    fn kind(&self) -> DeviceKind;
    fn name(&self) -> String;
    fn driver_version(&self) -> String;
    fn target(&self) -> Target;
    fn compile(&self, k: &Kernel) -> Result<DeviceKernel, DeviceError>;
    fn alloc(&self, bytes: usize) -> Result<AnyHandle, DeviceError>;
    fn memory_info(&self) -> Result<Option<MemoryInfo>, DeviceError>;
    fn write(&self, m: &mut AnyHandle, bytes: &[u8]) -> Result<(), DeviceError>;
    fn read(&self, m: &AnyHandle, len: usize) -> Result<Vec<u8>, DeviceError>;
    fn copy(&self, q: &AnyHandle, src: &AnyHandle, dst: &mut AnyHandle, len: usize) -> Result<(), DeviceError>;
    fn alloc_pinned(&self, bytes: usize) -> Result<PinnedHandle, DeviceError>;
    fn copy_from_pinned(
        &self,
        q: &AnyHandle,
        src: &PinnedHandle,
        src_off: usize,
        dst: &mut AnyHandle,
        dst_off: usize,
        len: usize,
    ) -> Result<(), DeviceError>;
    fn default_stream(&self) -> Result<AnyHandle, DeviceError>;
    fn new_stream(&self) -> Result<AnyHandle, DeviceError>;
    fn new_event(&self) -> Result<AnyHandle, DeviceError>;
    fn synchronize(&self, q: &AnyHandle) -> Result<(), DeviceError>;
    fn wait_event(&self, q: &AnyHandle, e: &AnyHandle) -> Result<(), DeviceError>;
    fn record_event(&self, e: &AnyHandle, q: &AnyHandle) -> Result<(), DeviceError>;
    fn elapsed_ms(&self, start: &AnyHandle, end: &AnyHandle) -> Result<f32, DeviceError>;
    fn launch(&self, q: &AnyHandle, k: &DeviceKernel, args: &mut [DeviceArg<'_>]) -> Result<(), DeviceError>;
    fn record(&self, q: &AnyHandle, k: &DeviceKernel, args: &mut [DeviceArg<'_>]) -> Result<Node, DeviceError>;
    /// # Safety
    ///
    /// As `Backend::replay`.
    unsafe fn replay(&self, q: &AnyHandle, graph: &mut LaunchGraph, nodes: Vec<Node>) -> Result<Replay, DeviceError>;
}

/// "buffer: expected one made by this cuda device, found one made by a host device".
pub(crate) fn foreign(what: &'static str, kind: DeviceKind, found: DeviceKind) -> DeviceError {
    DeviceError::Mismatch {
        what,
        expected: format!("one made by this {kind} device"),
        found: format!("one made by a {found} device"),
    }
}

fn two_devices(expected: &str) -> DeviceError {
    DeviceError::Mismatch { what: "event", expected: expected.into(), found: "two devices".into() }
}

impl<B: Backend> DynBackend for B {
    fn kind(&self) -> DeviceKind {
        B::KIND
    }
    fn name(&self) -> String {
        Backend::name(self)
    }
    fn driver_version(&self) -> String {
        Backend::driver_version(self)
    }
    fn target(&self) -> Target {
        Backend::target(self)
    }
    fn compile(&self, k: &Kernel) -> Result<DeviceKernel, DeviceError> {
        Ok(DeviceKernel { handle: KernelHandle::new(B::KIND, Backend::compile(self, k)?) })
    }
    fn alloc(&self, bytes: usize) -> Result<AnyHandle, DeviceError> {
        Ok(AnyHandle::new(B::KIND, Backend::alloc(self, bytes)?))
    }
    fn memory_info(&self) -> Result<Option<MemoryInfo>, DeviceError> {
        Backend::memory_info(self)
    }
    fn write(&self, m: &mut AnyHandle, bytes: &[u8]) -> Result<(), DeviceError> {
        let found = m.kind();
        let m = m.get_mut::<B::Mem>().ok_or_else(|| foreign("buffer", B::KIND, found))?;
        Backend::write(self, m, bytes)
    }
    fn read(&self, m: &AnyHandle, len: usize) -> Result<Vec<u8>, DeviceError> {
        Backend::read(self, mem::<B>(m)?, len)
    }
    fn copy(&self, q: &AnyHandle, src: &AnyHandle, dst: &mut AnyHandle, len: usize) -> Result<(), DeviceError> {
        let found = if src.kind() == B::KIND { dst.kind() } else { src.kind() };
        let (Some(s), Some(d)) = (src.get::<B::Mem>(), dst.get_mut::<B::Mem>()) else {
            return Err(foreign("buffer", B::KIND, found));
        };
        Backend::copy(self, stream::<B>(q)?, s, d, len)
    }
    fn alloc_pinned(&self, bytes: usize) -> Result<PinnedHandle, DeviceError> {
        Ok(PinnedHandle::new(B::KIND, Backend::alloc_pinned(self, bytes)?))
    }
    fn copy_from_pinned(
        &self,
        q: &AnyHandle,
        src: &PinnedHandle,
        src_off: usize,
        dst: &mut AnyHandle,
        dst_off: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        let found = dst.kind();
        let d = dst.get_mut::<B::Mem>().ok_or_else(|| foreign("buffer", B::KIND, found))?;
        let s = src.get::<B::Pinned>().ok_or_else(|| DeviceError::Mismatch {
            what: "pinned memory",
            expected: format!("memory from this {} device's alloc_pinned", B::KIND),
            found: "pinned memory of another device".into(),
        })?;
        Backend::copy_from_pinned(self, stream::<B>(q)?, s, src_off, d, dst_off, len)
    }
    fn default_stream(&self) -> Result<AnyHandle, DeviceError> {
        Ok(AnyHandle::new(B::KIND, Backend::default_stream(self)?))
    }
    fn new_stream(&self) -> Result<AnyHandle, DeviceError> {
        Ok(AnyHandle::new(B::KIND, Backend::new_stream(self)?))
    }
    fn new_event(&self) -> Result<AnyHandle, DeviceError> {
        Ok(AnyHandle::new(B::KIND, Backend::new_event(self)?))
    }
    fn synchronize(&self, q: &AnyHandle) -> Result<(), DeviceError> {
        Backend::synchronize(self, stream::<B>(q)?)
    }
    fn wait_event(&self, q: &AnyHandle, e: &AnyHandle) -> Result<(), DeviceError> {
        match (q.get::<B::Stream>(), e.get::<B::Event>()) {
            (Some(q), Some(e)) => Backend::wait_event(self, q, e),
            _ => Err(two_devices("an event and a stream of one device")),
        }
    }
    fn record_event(&self, e: &AnyHandle, q: &AnyHandle) -> Result<(), DeviceError> {
        match (e.get::<B::Event>(), q.get::<B::Stream>()) {
            (Some(e), Some(q)) => Backend::record_event(self, e, q),
            _ => Err(two_devices("an event and a stream of one device")),
        }
    }
    fn elapsed_ms(&self, start: &AnyHandle, end: &AnyHandle) -> Result<f32, DeviceError> {
        match (start.get::<B::Event>(), end.get::<B::Event>()) {
            (Some(a), Some(b)) => Backend::elapsed_ms(self, a, b),
            _ => Err(two_devices("two events of one device")),
        }
    }
    fn launch(&self, q: &AnyHandle, k: &DeviceKernel, args: &mut [DeviceArg<'_>]) -> Result<(), DeviceError> {
        let k = kernel::<B>(k)?;
        Backend::launch(self, stream::<B>(q)?, k, args)
    }
    fn record(&self, q: &AnyHandle, k: &DeviceKernel, args: &mut [DeviceArg<'_>]) -> Result<Node, DeviceError> {
        let k = kernel::<B>(k)?;
        Backend::record(self, stream::<B>(q)?, k, args)
    }
    unsafe fn replay(&self, q: &AnyHandle, graph: &mut LaunchGraph, nodes: Vec<Node>) -> Result<Replay, DeviceError> {
        // SAFETY: as this function's contract.
        unsafe { Backend::replay(self, stream::<B>(q)?, graph, nodes) }
    }
}

fn mem<B: Backend>(m: &AnyHandle) -> Result<&B::Mem, DeviceError> {
    m.get::<B::Mem>().ok_or_else(|| foreign("buffer", B::KIND, m.kind()))
}

fn stream<B: Backend>(q: &AnyHandle) -> Result<&B::Stream, DeviceError> {
    q.get::<B::Stream>().ok_or_else(|| DeviceError::Mismatch {
        what: "stream",
        expected: format!("a {} stream", B::KIND),
        found: "a stream of another device".into(),
    })
}

fn kernel<B: Backend>(k: &DeviceKernel) -> Result<KernelRef<'_, B::Kernel>, DeviceError> {
    let kernel = k.handle.get::<B::Kernel>().ok_or_else(|| foreign("kernel", B::KIND, k.handle.kind()))?;
    Ok(KernelRef { kernel, handle: k })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkernels;

    struct Fake(Kernel);

    impl BackendKernel for Fake {
        fn kernel(&self) -> &Kernel {
            &self.0
        }
    }

    #[test]
    fn a_handle_gives_back_only_its_own_type() {
        let mut h = AnyHandle::new(DeviceKind::Cuda, 7u32);
        assert_eq!(h.kind(), DeviceKind::Cuda);
        assert_eq!(h.get::<u32>(), Some(&7));
        assert_eq!(h.get::<u64>(), None);
        assert_eq!(h.get_mut::<i32>(), None);
        *h.get_mut::<u32>().unwrap() = 8;
        assert_eq!(h.get::<u32>(), Some(&8));
    }

    #[test]
    fn kernel_handles_are_the_same_only_as_their_clones() {
        let a = KernelHandle::new(DeviceKind::Host, Arc::new(Fake(testkernels::matvec())));
        let b = KernelHandle::new(DeviceKind::Host, Arc::new(Fake(testkernels::matvec())));
        assert!(a.same(&a.clone()));
        assert!(!a.same(&b), "an equal kernel loaded twice is not the same kernel");
        assert_eq!(a.kernel().name, "matvec");
        assert!(a.get::<Fake>().is_some());
        assert!(a.get::<u32>().is_none());
    }
}
