//! The CUDA driver runtime (feature `cuda`), through `cudarc` with run-time loading of
//! `libcuda.so.1`: no CUDA is needed to build, and a machine without the driver gets a clear
//! error ("no CUDA driver (libcuda.so.1) found"), never a panic.
//!
//! Kernels come from `compile::compile_gpu` as PTX (`GpuArtifact`) and are launched with the
//! GPU kernel ABI: per buffer (pointer, i64 element count), per scalar one i64 of canonical
//! bits, then a pointer to a zeroed `ErrorRecord`. Each stream owns a ring of error records,
//! one slot per launch since its last synchronisation, so launches stay asynchronous and a
//! failed bounds check is still attributed to the right kernel with the host's message. A
//! replayed launch graph (`cuda_graph`) brings its own records, one per node, checked at the
//! same synchronisation in the same launch order.
//!
//! This module never calls into cudarc before `is_culib_present()` said the library loads
//! (cudarc panics when it cannot load a symbol), and never lets a driver error become a panic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
};

use super::buffer::{PinnedBuffer, PinnedMem};
use super::check::{check_args, scalar_bits};
use super::cuda_graph::{CudaGraph, GraphPending};
use super::device::{DeviceArg, DeviceError, DeviceKind, KernelImpl};
use super::error::describe_record;
use super::graph::{changed_nodes, LaunchGraph, Node, Replay};
use super::grid::{check_limits, grid_size};
use super::stream::{Event, EventImpl, Stream, StreamImpl};
use crate::cache::CompileCache;
use crate::compile::{compile_gpu, GpuArtifact};
use crate::ir::Kernel;
use crate::lower::ErrorRecord;
use crate::options::CompileOptions;
use crate::target::Target;

/// CUDA's grid limits per axis (x, y, z) for compute capability 3.0 and later.
const GRID_LIMITS: [u64; 3] = [(1 << 31) - 1, 65535, 65535];
/// Error-record slots per stream: launches between two synchronisations before an
/// automatic one.
const RECORD_SLOTS: usize = 1024;
pub(crate) const RECORD_WORDS: usize = 4;

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

impl CudaKernel {
    pub(crate) fn kernel(&self) -> &Kernel {
        &self.artifact.kernel
    }

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

impl CudaPinned {
    pub(crate) fn len(&self) -> usize {
        self.slice.len()
    }

    pub(crate) fn as_slice(&self) -> Result<&[u8], DeviceError> {
        self.slice.as_slice().map_err(|e| driver_error("cuEventSynchronize (pinned memory)", e))
    }

    pub(crate) fn as_mut_slice(&mut self) -> Result<&mut [u8], DeviceError> {
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

/// A launch's arguments as `CudaDevice::check_launch` found them.
struct Checked {
    /// Each parameter's element count (0 for scalars).
    lens: Vec<u64>,
    /// The scalars' bits by parameter (0 for buffers).
    scalars: Vec<u64>,
    grid: [u32; 3],
}

/// A CUDA stream and its error-record ring.
pub(crate) struct CudaQueue {
    stream: Arc<CudaStream>,
    records: Mutex<Records>,
}

struct Records {
    slots: CudaSlice<u64>, // (slot, 4): one ErrorRecord per launch since the last check
    /// Ring slots taken since the last check: the `Launch` entries of `pending`, in order.
    used: usize,
    pending: Vec<Pending>,
}

/// Work whose error records have not been read yet, in launch order.
enum Pending {
    /// A launch; its ring slot is its index among the `Launch` entries.
    Launch { kernel: Arc<CudaKernel>, lens: Vec<u64> },
    /// A replayed graph, whose nodes write their own records (at most one entry per graph).
    Graph(GraphPending),
}

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

    pub(crate) fn name(&self) -> String {
        format!("{} (sm_{})", self.name, self.sm)
    }

    pub(crate) fn driver_version(&self) -> String {
        format!("CUDA driver API {}.{}", self.driver / 1000, (self.driver % 1000) / 10)
    }

    pub(crate) fn target(&self) -> Target {
        Target::Nvptx { sm: self.sm }
    }

    fn queue(&self, stream: Arc<CudaStream>) -> Result<CudaQueue, DeviceError> {
        let slots = stream
            .alloc_zeros::<u64>(RECORD_SLOTS * RECORD_WORDS)
            .map_err(|e| driver_error("cuMemAlloc (error records)", e))?;
        Ok(CudaQueue { stream, records: Mutex::new(Records { slots, used: 0, pending: Vec::new() }) })
    }

    /// The legacy default stream: with only it in use, cudarc tracks no events per buffer.
    pub(crate) fn default_stream_queue(&self) -> Result<Stream, DeviceError> {
        Ok(Stream::new(StreamImpl::Cuda(self.queue(self.ctx.default_stream())?)))
    }

    pub(crate) fn new_stream(&self) -> Result<Stream, DeviceError> {
        let s = self.ctx.new_stream().map_err(|e| driver_error("cuStreamCreate", e))?;
        Ok(Stream::new(StreamImpl::Cuda(self.queue(s)?)))
    }

    pub(crate) fn new_event(&self) -> Result<Event, DeviceError> {
        let e = self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| driver_error("cuEventCreate", e))?;
        Ok(Event { inner: EventImpl::Cuda(e) })
    }

    pub(crate) fn compile(&self, k: &Kernel) -> Result<Arc<CudaKernel>, DeviceError> {
        if let Some(hit) = self.kernels.lock().unwrap_or_else(|e| e.into_inner()).get(k) {
            return Ok(hit.clone());
        }
        let target = self.target();
        let compile_err =
            |message: String| DeviceError::Compile { kernel: k.name.clone(), target: target.to_string(), message };
        let artifact = compile_gpu(k, &target, &self.options, &self.cache).map_err(|e| compile_err(e.to_string()))?;
        let loaded = Arc::new(self.load(artifact)?);
        let mut kernels = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        Ok(kernels.entry(k.clone()).or_insert(loaded).clone())
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

    pub(crate) fn alloc(&self, bytes: usize) -> Result<CudaMem, DeviceError> {
        let stream = self.ctx.default_stream();
        // Whole 4-byte words, so that a `DeviceArg::Words` view never reads past the allocation.
        let slice =
            stream.alloc_zeros::<u8>(bytes.max(1).next_multiple_of(4)).map_err(|e| driver_error("cuMemAlloc", e))?;
        Ok(CudaMem { slice })
    }

    pub(crate) fn write(&self, m: &mut CudaMem, bytes: &[u8]) -> Result<(), DeviceError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let stream = self.ctx.default_stream();
        let mut view = m.slice.slice_mut(0..bytes.len());
        stream.memcpy_htod(bytes, &mut view).map_err(|e| driver_error("cuMemcpyHtoD", e))?;
        stream.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))
    }

    pub(crate) fn read(&self, m: &CudaMem, len: usize) -> Result<Vec<u8>, DeviceError> {
        let mut out = vec![0u8; len];
        if len == 0 {
            return Ok(out);
        }
        let stream = self.ctx.default_stream();
        stream.memcpy_dtoh(&m.slice.slice(0..len), &mut out).map_err(|e| driver_error("cuMemcpyDtoH", e))?;
        stream.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))?;
        Ok(out)
    }

    pub(crate) fn copy(&self, q: &CudaQueue, src: &CudaMem, dst: &mut CudaMem, len: usize) -> Result<(), DeviceError> {
        if len == 0 {
            return Ok(());
        }
        let mut view = dst.slice.slice_mut(0..len);
        q.stream.memcpy_dtod(&src.slice.slice(0..len), &mut view).map_err(|e| driver_error("cuMemcpyDtoD", e))
    }

    pub(crate) fn alloc_pinned(&self, bytes: usize) -> Result<PinnedBuffer, DeviceError> {
        // SAFETY: `u8` is valid for any bytes; cudarc zero-fills nothing, but a `u8` slice of
        // uninitialised page-locked memory is only handed out after `cuMemHostAlloc`
        // returned it, and we write zeros before anyone reads it.
        let mut p =
            unsafe { self.ctx.alloc_pinned::<u8>(bytes.max(1)) }.map_err(|e| driver_error("cuMemHostAlloc", e))?;
        p.as_mut_slice().map_err(|e| driver_error("cuEventSynchronize (pinned memory)", e))?.fill(0);
        Ok(PinnedBuffer { mem: PinnedMem::Cuda(CudaPinned { slice: p, ctx: self.ctx.clone() }) })
    }

    /// Queues `len` bytes from `src[src_off..]` into `dst[dst_off..]` on `q` (ranges checked
    /// by the caller).
    pub(crate) fn copy_from_pinned(
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

    pub(crate) fn memory_info(&self) -> Result<super::device::MemoryInfo, DeviceError> {
        let (free, total) = self.ctx.mem_get_info().map_err(|e| driver_error("cuMemGetInfo", e))?;
        Ok(super::device::MemoryInfo { free: free as u64, total: total as u64 })
    }

    /// Checks a launch like the host does.
    fn check_launch(&self, k: &CudaKernel, args: &[DeviceArg<'_>]) -> Result<Checked, DeviceError> {
        let kernel = &k.artifact.kernel;
        check_args(kernel, args.iter().map(DeviceArg::shape))?;
        let mut lens = vec![0u64; args.len()];
        for (i, a) in args.iter().enumerate() {
            let Some((buf, len)) = a.buffer()? else { continue };
            if !matches!(buf.mem, super::buffer::Mem::Cuda(_)) {
                return Err(DeviceError::Mismatch {
                    what: "launch argument",
                    expected: format!("a cuda buffer at #{i}"),
                    found: format!("a {} buffer", buf.device_kind()),
                });
            }
            lens[i] = len as u64;
        }
        let scalars = scalar_bits(
            args.len(),
            args.iter().enumerate().filter_map(|(i, a)| match a {
                DeviceArg::Scalar(c) => Some((i, c)),
                _ => None,
            }),
        );
        let grid = check_limits(kernel, grid_size(kernel, &scalars)?, GRID_LIMITS)?;
        Ok(Checked { lens, scalars, grid })
    }

    /// A launch checked as `launch` checks it, as a graph node: per buffer its device address
    /// and element count, per scalar its bits (the words `launch` passes, less the record).
    /// Taking the addresses makes `q` wait for earlier writes on other streams (cudarc's event
    /// tracking); later users on other streams must order themselves with `Event`s.
    pub(crate) fn record(
        &self,
        q: &CudaQueue,
        k: &Arc<CudaKernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<Node, DeviceError> {
        let Checked { lens, scalars, grid } = self.check_launch(k, args)?;
        let mut words = Vec::with_capacity(2 * args.len());
        for (i, a) in args.iter().enumerate() {
            match a.buffer()? {
                Some((buf, _)) => {
                    if let super::buffer::Mem::Cuda(m) = &buf.mem {
                        let (addr, _record) = m.slice.device_ptr(&q.stream);
                        words.extend([addr, lens[i]]);
                    }
                }
                None => words.push(scalars[i]),
            }
        }
        Ok(Node { kernel: KernelImpl::Cuda(k.clone()), grid, words })
    }

    /// Replays `nodes` (just recorded, their buffers alive) on `q` through `graph`'s CUDA
    /// graph: built when there is none or the shape changed, else updated where the words
    /// changed; then one `cuGraphLaunch`.
    pub(crate) fn replay(
        &self,
        q: &CudaQueue,
        graph: &mut LaunchGraph,
        nodes: Vec<Node>,
    ) -> Result<Replay, DeviceError> {
        let nodes = Arc::new(nodes);
        let n = nodes.len();
        let replay = match (graph.cuda.as_mut(), changed_nodes(&graph.nodes, &nodes)) {
            (Some(g), Some(changed)) => {
                g.update(&nodes, &changed)?;
                Replay::Updated { nodes: n, changed: changed.len() }
            }
            _ => {
                graph.cuda = None;
                if n > 0 {
                    graph.cuda = Some(CudaGraph::build(&self.ctx, &q.stream, &nodes)?);
                }
                Replay::Built { nodes: n }
            }
        };
        if let Some(g) = graph.cuda.as_ref() {
            let mut records = q.records.lock().unwrap_or_else(|e| e.into_inner());
            g.launch(&q.stream)?;
            if !records.pending.iter().any(|p| matches!(p, Pending::Graph(x) if x.is_of(g))) {
                records.pending.push(Pending::Graph(g.pending(nodes.clone())));
            }
        }
        graph.settle(nodes, replay);
        Ok(replay)
    }

    pub(crate) fn launch(
        &self,
        q: &CudaQueue,
        k: &Arc<CudaKernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<(), DeviceError> {
        let Checked { lens, scalars, grid } = self.check_launch(k, args)?;
        let mut records = q.records.lock().unwrap_or_else(|e| e.into_inner());
        if records.used == RECORD_SLOTS {
            q.check(&mut records)?;
        }
        let slot = records.used;
        // Kernel parameter values: each `push` borrows its value until the launch.
        let counts: Vec<i64> = lens.iter().map(|&n| n as i64).collect();
        let scalar_words: Vec<i64> = scalars.iter().map(|&b| b as i64).collect();
        let record_view = records.slots.slice(slot * RECORD_WORDS..(slot + 1) * RECORD_WORDS);
        let mut b = q.stream.launch_builder(&k.func);
        for (i, a) in args.iter_mut().enumerate() {
            match a {
                DeviceArg::Buf(buf) | DeviceArg::Words(buf) => {
                    if let super::buffer::Mem::Cuda(m) = &buf.mem {
                        b.arg(&m.slice);
                    }
                    b.arg(&counts[i]);
                }
                DeviceArg::BufMut(buf) => {
                    if let super::buffer::Mem::Cuda(m) = &mut buf.mem {
                        b.arg(&mut m.slice);
                    }
                    b.arg(&counts[i]);
                }
                DeviceArg::Scalar(_) => {
                    b.arg(&scalar_words[i]);
                }
            }
        }
        b.arg(&record_view);
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (k.artifact.block_dim, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments follow the kernel ABI of `compile_gpu` exactly: per buffer a
        // device pointer and its element count (the kernel bounds-checks every access against
        // it), per scalar its canonical bits, then a 32-byte zeroed error record; every
        // buffer is a live allocation of this context of at least that many elements.
        unsafe { b.launch(cfg) }.map_err(|e| driver_error("cuLaunchKernel", e))?;
        records.used += 1;
        records.pending.push(Pending::Launch { kernel: k.clone(), lens });
        Ok(())
    }
}

impl CudaQueue {
    pub(crate) fn synchronize(&self) -> Result<(), DeviceError> {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        self.check(&mut records)
    }

    pub(crate) fn record(&self, e: &CudaEvent) -> Result<(), DeviceError> {
        e.record(&self.stream).map_err(|e| driver_error("cuEventRecord", e))
    }

    pub(crate) fn wait(&self, e: &CudaEvent) -> Result<(), DeviceError> {
        self.stream.wait(e).map_err(|e| driver_error("cuStreamWaitEvent", e))
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
        if records.pending.is_empty() {
            return Ok(());
        }
        let ring = self.take_records(&mut records.slots, records.used)?;
        let pending = std::mem::take(&mut records.pending);
        records.used = 0;
        let mut first = None;
        let mut launches = ring.chunks_exact(RECORD_WORDS);
        for p in &pending {
            match p {
                Pending::Launch { kernel, lens } => {
                    let w = launches.next().unwrap_or(&[0; RECORD_WORDS]);
                    if first.is_none() && w[0] != 0 {
                        let rec = ErrorRecord { kind: w[0], id: w[1], index: w[2], signed: w[3] };
                        first = Some(DeviceError::Launch(describe_record(kernel.kernel(), rec, lens)));
                    }
                }
                // Every graph's records are read (and so cleared), also after a failure.
                Pending::Graph(g) => {
                    let failed = g.take_first_error(self)?;
                    first = first.or(failed);
                }
            }
        }
        self.stream.synchronize().map_err(|e| driver_error("cuStreamSynchronize", e))?;
        first.map_or(Ok(()), Err)
    }
}
