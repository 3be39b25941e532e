//! The CUDA driver runtime (feature `cuda`), through `cudarc` with run-time loading of
//! `libcuda.so.1`: no CUDA is needed to build, and a machine without the driver gets a clear
//! error ("no CUDA driver (libcuda.so.1) found"), never a panic.
//!
//! Kernels come from `compile::compile_gpu` as PTX (`GpuArtifact`) and are launched with the
//! GPU kernel ABI (`abi`). Each stream owns a ring of error records (`records`), one slot
//! per launch since its last synchronisation. A replayed launch graph (`cuda_graph`) brings
//! its own records, one per node, checked at the same synchronisation in the same launch
//! order.
//!
//! This module never calls into cudarc before `is_culib_present()` said the library loads
//! (cudarc panics when it cannot load a symbol), and never lets a driver error become a panic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
};

use super::abi::{self, Packed, RECORD_WORDS};
use super::backend::{Backend, BackendKernel, KernelRef, PinnedMemory};
use super::cuda_graph::{CudaGraph, GraphPending};
use super::device::{DeviceArg, DeviceError, DeviceKind, MemoryInfo};
use super::graph::{changed_nodes, node_deps, LaunchGraph, Node, Replay};
use super::records::Ring;
use crate::cache::CompileCache;
use crate::compile::{compile_gpu, GpuArtifact};
use crate::ir::Kernel;
use crate::options::{CompileOptions, GraphOrder};
use crate::target::Target;

/// CUDA's grid limits per axis (x, y, z) for compute capability 3.0 and later.
const GRID_LIMITS: [u64; 3] = [(1 << 31) - 1, 65535, 65535];

/// A driver call failed.
pub(crate) fn driver_error(call: &'static str, e: DriverError) -> DeviceError {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    DeviceError::Driver { call, message: if text.is_empty() { name } else { format!("{name} ({text})") } }
}

/// Whether `libcuda.so.1` (or `libcuda.so`) can be loaded; nothing else in cudarc is safe to
/// call before this says yes.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its candidate names.
    unsafe { sys::is_culib_present() }
}

fn require_driver() -> Result<(), DeviceError> {
    if driver_present() {
        Ok(())
    } else {
        Err(DeviceError::NoDriver { message: "no CUDA driver (libcuda.so.1) found".into() })
    }
}

/// How many CUDA devices the driver sees (0 without a driver).
pub fn device_count() -> Result<usize, DeviceError> {
    require_driver()?;
    cudarc::driver::result::init().map_err(|e| driver_error("cuInit", e))?;
    let n = CudaContext::device_count().map_err(|e| driver_error("cuDeviceGetCount", e))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

pub(crate) struct CudaDevice {
    ctx: Arc<CudaContext>,
    name: String,
    sm: u32,
    driver: i32,
    options: CompileOptions,
    cache: CompileCache,
    kernels: Mutex<HashMap<Kernel, Arc<CudaKernel>>>,
}

/// A kernel loaded into a CUDA context.
pub(crate) struct CudaKernel {
    artifact: Arc<GpuArtifact>,
    func: CudaFunction,
    _module: Arc<CudaModule>,
}

impl BackendKernel for CudaKernel {
    fn kernel(&self) -> &Kernel {
        &self.artifact.kernel
    }
}

impl CudaKernel {
    pub(crate) fn cu_function(&self) -> sys::CUfunction {
        self.func.cu_function()
    }

    /// Lanes per workgroup (the block's x size; y and z are 1).
    pub(crate) fn block_dim(&self) -> u32 {
        self.artifact.block_dim
    }
}

/// Device memory. At least one byte is allocated (the driver rejects empty allocations);
/// the buffer's own length is what kernels see.
pub(crate) struct CudaMem {
    slice: CudaSlice<u8>,
}

/// Page-locked host memory. Copies from it are asynchronous and cudarc does not know about
/// them (they go through `cuMemcpyHtoDAsync` on a range), so writing it and freeing it first
/// wait for the whole context: nothing queued may still read it.
pub(crate) struct CudaPinned {
    slice: PinnedHostSlice<u8>,
    ctx: Arc<CudaContext>,
}

impl PinnedMemory for CudaPinned {
    fn len(&self) -> usize {
        self.slice.len()
    }

    fn as_slice(&self) -> Result<&[u8], DeviceError> {
        self.slice.as_slice().map_err(|e| driver_error("cuEventSynchronize (pinned memory)", e))
    }

    fn as_mut_slice(&mut self) -> Result<&mut [u8], DeviceError> {
        self.ctx.synchronize().map_err(|e| driver_error("cuCtxSynchronize (pinned memory)", e))?;
        self.slice.as_mut_slice().map_err(|e| driver_error("cuEventSynchronize (pinned memory)", e))
    }
}

impl Drop for CudaPinned {
    fn drop(&mut self) {
        // A failure here leaves nothing better to do than free the memory anyway.
        let _ = self.ctx.synchronize();
    }
}

/// A CUDA stream and its error-record ring.
pub(crate) struct CudaQueue {
    stream: Arc<CudaStream>,
    records: Mutex<Records>,
}

/// The ring's slots: (slot, 4) words, one ErrorRecord per launch since the last check.
type Records = Ring<CudaSlice<u64>, GraphPending>;

impl CudaDevice {
    pub(crate) fn new(ordinal: usize) -> Result<CudaDevice, DeviceError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(DeviceError::NoDevice { kind: DeviceKind::Cuda, ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error("cuDevicePrimaryCtxRetain", e))?;
        let name = ctx.name().map_err(|e| driver_error("cuDeviceGetName", e))?;
        let (major, minor) = ctx.compute_capability().map_err(|e| driver_error("cuDeviceGetAttribute", e))?;
        let mut driver = 0i32;
        // SAFETY: the library is present (checked above); `driver` outlives the call.
        unsafe { sys::cuDriverGetVersion(&mut driver) }.result().map_err(|e| driver_error("cuDriverGetVersion", e))?;
        let options = CompileOptions::from_env().map_err(|e| DeviceError::Compile {
            kernel: "*".into(),
            target: "cuda".into(),
            message: e.to_string(),
        })?;
        let cache = CompileCache::new(options.cache_dir.clone());
        let sm = (major * 10 + minor) as u32;
        Ok(CudaDevice { ctx, name, sm, driver, options, cache, kernels: Mutex::new(HashMap::new()) })
    }

    fn queue(&self, stream: Arc<CudaStream>) -> Result<CudaQueue, DeviceError> {
        let slots = stream
            .alloc_zeros::<u64>(super::records::RECORD_SLOTS * RECORD_WORDS)
            .map_err(|e| driver_error("cuMemAlloc (error records)", e))?;
        Ok(CudaQueue { stream, records: Mutex::new(Ring::new(slots)) })
    }

    /// Loads an artifact's PTX and finds its entry.
    pub(crate) fn load(&self, artifact: Arc<GpuArtifact>) -> Result<CudaKernel, DeviceError> {
        let bad = |message: String| DeviceError::Compile {
            kernel: artifact.kernel.name.clone(),
            target: artifact.target.to_string(),
            message,
        };
        if !matches!(artifact.target, Target::Nvptx { .. }) {
            return Err(bad(format!("expected an nvptx artifact, found one for {}", artifact.target)));
        }
        let ptx = std::str::from_utf8(&artifact.image)
            .map_err(|e| bad(format!("expected PTX text, found invalid UTF-8 ({e})")))?;
        if ptx.contains('\0') || artifact.entry.contains('\0') {
            return Err(bad("expected PTX text and an entry name without NUL bytes, found a NUL".into()));
        }
        let module =
            self.ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)).map_err(|e| driver_error("cuModuleLoadData", e))?;
        let func = module.load_function(&artifact.entry).map_err(|e| driver_error("cuModuleGetFunction", e))?;
        Ok(CudaKernel { artifact, func, _module: module })
    }

    /// Checks a launch like the host does and lays out its words (a buffer's address as
    /// `addr` of its memory).
    fn check_launch(
        &self,
        k: &CudaKernel,
        args: &[DeviceArg<'_>],
        addr: impl Fn(&CudaMem) -> u64,
    ) -> Result<Packed, DeviceError> {
        abi::pack(&k.artifact.kernel, DeviceKind::Cuda, args, GRID_LIMITS, addr)
    }
}

impl Backend for CudaDevice {
    const KIND: DeviceKind = DeviceKind::Cuda;
    type Kernel = CudaKernel;
    type Mem = CudaMem;
    type Pinned = CudaPinned;
    type Stream = CudaQueue;
    type Event = CudaEvent;

    fn name(&self) -> String {
        format!("{} (sm_{})", self.name, self.sm)
    }

    fn driver_version(&self) -> String {
        format!("CUDA driver API {}.{}", self.driver / 1000, (self.driver % 1000) / 10)
    }

    fn target(&self) -> Target {
        Target::Nvptx { sm: self.sm }
    }

    /// The legacy default stream: with only it in use, cudarc tracks no events per buffer.
    fn default_stream(&self) -> Result<CudaQueue, DeviceError> {
        self.queue(self.ctx.default_stream())
    }

    fn new_stream(&self) -> Result<CudaQueue, DeviceError> {
        let s = self.ctx.new_stream().map_err(|e| driver_error("cuStreamCreate", e))?;
        self.queue(s)
    }

    fn new_event(&self) -> Result<CudaEvent, DeviceError> {
        self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| driver_error("cuEventCreate", e))
    }

    fn compile(&self, k: &Kernel) -> Result<Arc<CudaKernel>, DeviceError> {
        if let Some(hit) = self.kernels.lock().unwrap_or_else(|e| e.into_inner()).get(k) {
            return Ok(hit.clone());
        }
        let target = Backend::target(self);
        let compile_err =
            |message: String| DeviceError::Compile { kernel: k.name.clone(), target: target.to_string(), message };
        let artifact = compile_gpu(k, &target, &self.options, &self.cache).map_err(|e| compile_err(e.to_string()))?;
        let loaded = Arc::new(self.load(artifact)?);
        let mut kernels = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        Ok(kernels.entry(k.clone()).or_insert(loaded).clone())
    }

    fn alloc(&self, bytes: usize) -> Result<CudaMem, DeviceError> {
        let stream = self.ctx.default_stream();
        // Whole 4-byte words, so that a `DeviceArg::Words` view never reads past the allocation.
        let slice =
            stream.alloc_zeros::<u8>(bytes.max(1).next_multiple_of(4)).map_err(|e| driver_error("cuMemAlloc", e))?;
        Ok(CudaMem { slice })
    }

    fn write(&self, m: &mut CudaMem, bytes: &[u8]) -> Result<(), DeviceError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let stream = self.ctx.default_stream();
        let mut view = m.slice.slice_mut(0..bytes.len());
        stream.memcpy_htod(bytes, &mut view).map_err(|e| driver_error("cuMemcpyHtoD", e))?;
        stream.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))
    }

    fn read(&self, m: &CudaMem, len: usize) -> Result<Vec<u8>, DeviceError> {
        let mut out = vec![0u8; len];
        if len == 0 {
            return Ok(out);
        }
        let stream = self.ctx.default_stream();
        stream.memcpy_dtoh(&m.slice.slice(0..len), &mut out).map_err(|e| driver_error("cuMemcpyDtoH", e))?;
        stream.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))?;
        Ok(out)
    }

    fn copy(&self, q: &CudaQueue, src: &CudaMem, dst: &mut CudaMem, len: usize) -> Result<(), DeviceError> {
        if len == 0 {
            return Ok(());
        }
        let mut view = dst.slice.slice_mut(0..len);
        q.stream.memcpy_dtod(&src.slice.slice(0..len), &mut view).map_err(|e| driver_error("cuMemcpyDtoD", e))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<CudaPinned, DeviceError> {
        // SAFETY: `u8` is valid for any bytes; cudarc zero-fills nothing, but a `u8` slice of
        // uninitialised page-locked memory is only handed out after `cuMemHostAlloc`
        // returned it, and we write zeros before anyone reads it.
        let mut p =
            unsafe { self.ctx.alloc_pinned::<u8>(bytes.max(1)) }.map_err(|e| driver_error("cuMemHostAlloc", e))?;
        p.as_mut_slice().map_err(|e| driver_error("cuEventSynchronize (pinned memory)", e))?.fill(0);
        Ok(CudaPinned { slice: p, ctx: self.ctx.clone() })
    }

    /// Queues `len` bytes from `src[src_off..]` into `dst[dst_off..]` on `q` (ranges checked
    /// by the caller).
    fn copy_from_pinned(
        &self,
        q: &CudaQueue,
        src: &CudaPinned,
        src_off: usize,
        dst: &mut CudaMem,
        dst_off: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        let host = &src.as_slice()?[src_off..src_off + len];
        // The guard records cudarc's write event on `q` after the copy (kept until then), so a
        // later launch on another stream that reads `dst` is ordered after it too.
        let (base, _guard) = dst.slice.device_ptr_mut(&q.stream);
        // SAFETY: `dst` holds at least `dst_off + len` bytes (checked by the caller) and
        // `host` is `len` bytes of live page-locked memory, which `CudaPinned` keeps alive and
        // unwritten until the context has finished (its `as_mut_slice` and `Drop` synchronise).
        unsafe { cudarc::driver::result::memcpy_htod_async(base + dst_off as u64, host, q.stream.cu_stream()) }
            .map_err(|e| driver_error("cuMemcpyHtoDAsync", e))
    }

    fn memory_info(&self) -> Result<Option<MemoryInfo>, DeviceError> {
        let (free, total) = self.ctx.mem_get_info().map_err(|e| driver_error("cuMemGetInfo", e))?;
        Ok(Some(MemoryInfo { free: free as u64, total: total as u64 }))
    }

    fn synchronize(&self, q: &CudaQueue) -> Result<(), DeviceError> {
        q.synchronize()
    }

    fn wait_event(&self, q: &CudaQueue, e: &CudaEvent) -> Result<(), DeviceError> {
        q.stream.wait(e).map_err(|e| driver_error("cuStreamWaitEvent", e))
    }

    fn record_event(&self, e: &CudaEvent, q: &CudaQueue) -> Result<(), DeviceError> {
        e.record(&q.stream).map_err(|e| driver_error("cuEventRecord", e))
    }

    fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f32, DeviceError> {
        start.elapsed_ms(end).map_err(|e| driver_error("cuEventElapsedTime", e))
    }

    /// A launch checked as `launch` checks it, as a graph node: per buffer its device address
    /// and element count, per scalar its bits (the words `launch` passes, less the record).
    /// Taking the addresses makes `q` wait for earlier writes on other streams (cudarc's event
    /// tracking); later users on other streams must order themselves with `Event`s.
    fn record(
        &self,
        q: &CudaQueue,
        k: KernelRef<'_, CudaKernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<Node, DeviceError> {
        let Packed { words, grid, .. } = self.check_launch(&k, args, |m| m.slice.device_ptr(&q.stream).0)?;
        Ok(Node { kernel: k.handle.clone(), grid, words })
    }

    /// Replays `nodes` (just recorded, their buffers alive) on `q` through `graph`'s CUDA
    /// graph, its edges those of the device's `GraphOrder` (`BARO_GRAPH_ORDER`): built when
    /// there is none or the shape or the edges changed, else updated where the words
    /// changed; then one `cuGraphLaunch`.
    unsafe fn replay(&self, q: &CudaQueue, graph: &mut LaunchGraph, nodes: Vec<Node>) -> Result<Replay, DeviceError> {
        let nodes = Arc::new(nodes);
        let n = nodes.len();
        let order = self.options.graph_order;
        let deps = || node_deps(nodes.iter().map(|x| (x.kernel.kernel(), &x.words[..])), order);
        let exec = graph.exec.as_mut().and_then(|g| g.downcast_mut::<CudaGraph>());
        let replay = match (exec, changed_nodes(&graph.nodes, &nodes)) {
            // A chain of the same shape has the same edges; data edges are compared.
            (Some(g), Some(changed)) if order == GraphOrder::Chain || g.deps() == deps().as_slice() => {
                g.update(&nodes, &changed)?;
                Replay::Updated { nodes: n, changed: changed.len() }
            }
            _ => {
                graph.exec = None;
                if n > 0 {
                    graph.exec = Some(Box::new(CudaGraph::build(&self.ctx, &q.stream, &nodes, deps())?));
                }
                Replay::Built { nodes: n }
            }
        };
        if let Some(g) = graph.exec.as_ref().and_then(|g| g.downcast_ref::<CudaGraph>()) {
            let mut records = q.records.lock().unwrap_or_else(|e| e.into_inner());
            g.launch(&q.stream)?;
            records.graph_launched(g.pending(nodes.clone()), |x| x.is_of(g));
        }
        graph.settle(nodes, replay);
        Ok(replay)
    }

    fn launch(
        &self,
        q: &CudaQueue,
        k: KernelRef<'_, CudaKernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<(), DeviceError> {
        // The words of the kernel ABI; a buffer's address word is passed as its slice instead
        // (the same address), so that cudarc orders the launch after other streams' use of it.
        let Packed { words, lens, grid } = self.check_launch(&k, args, |_| 0)?;
        let mut records = q.records.lock().unwrap_or_else(|e| e.into_inner());
        if records.is_full() {
            q.check(&mut records)?;
        }
        let slot = records.next_slot();
        let record_view = records.slots.slice(slot * RECORD_WORDS..(slot + 1) * RECORD_WORDS);
        let mut b = q.stream.launch_builder(&k.func);
        let mut at = 0;
        for a in args.iter_mut() {
            match a {
                DeviceArg::Buf(buf) | DeviceArg::Words(buf) => {
                    if let Some(m) = buf.mem.get::<CudaMem>() {
                        b.arg(&m.slice);
                    }
                    b.arg(&words[at + 1]);
                    at += 2;
                }
                DeviceArg::BufMut(buf) => {
                    if let Some(m) = buf.mem.get_mut::<CudaMem>() {
                        b.arg(&mut m.slice);
                    }
                    b.arg(&words[at + 1]);
                    at += 2;
                }
                DeviceArg::Scalar(_) => {
                    b.arg(&words[at]);
                    at += 1;
                }
            }
        }
        b.arg(&record_view);
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (k.artifact.block_dim, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments follow the kernel ABI of `compile_gpu` exactly (`abi`): per
        // buffer a device pointer and its element count (the kernel bounds-checks every access
        // against it), per scalar its canonical bits, then a 32-byte zeroed error record;
        // every buffer is a live allocation of this context of at least that many elements
        // (`check_launch` found each one a `CudaMem`).
        unsafe { b.launch(cfg) }.map_err(|e| driver_error("cuLaunchKernel", e))?;
        records.launched(k.handle.clone(), lens);
        Ok(())
    }
}

impl CudaQueue {
    fn synchronize(&self) -> Result<(), DeviceError> {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        self.check(&mut records)
    }

    /// Reads `n` error records from the start of `slots` and zeroes them (queued on this
    /// stream; the caller synchronises before trusting the zeroes).
    pub(crate) fn take_records(&self, slots: &mut CudaSlice<u64>, n: usize) -> Result<Vec<u64>, DeviceError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let words = self
            .stream
            .clone_dtoh(&slots.slice(0..n * RECORD_WORDS))
            .map_err(|e| driver_error("cuMemcpyDtoH (error records)", e))?;
        self.stream
            .memset_zeros(&mut slots.slice_mut(0..n * RECORD_WORDS))
            .map_err(|e| driver_error("cuMemsetD8 (error records)", e))?;
        Ok(words)
    }

    /// Waits for the stream, reads the error records of the pending launches and replayed
    /// graphs, clears them and reports the first failure in launch order.
    fn check(&self, records: &mut Records) -> Result<(), DeviceError> {
        self.stream.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))?;
        let first = records.check(|slots, n| self.take_records(slots, n), |g| g.take_first_error(self))?;
        self.stream.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))?;
        first.map_or(Ok(()), Err)
    }
}
