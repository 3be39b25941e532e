//! The HIP runtime (feature `hip`): AMD GPUs through `libamdhip64`, opened at run time
//! (`library.rs`: ROCm 6 or newer), as a `Backend`. Device discovery, modules loaded from a
//! `GpuArtifact`'s code object (`hipModuleLoadData`), device memory, streams, events, and
//! launches laid out by `abi` and checked exactly like the host's (same argument checks,
//! same out-of-bounds messages through the `ErrorRecord`).
//!
//! Every HIP status other than success becomes `DeviceError::Driver` naming the call and the
//! code ("hipModuleLoadData failed: error 101 (hipErrorInvalidDevice)"); nothing here panics
//! on a HIP failure or on user input, and HIP only receives pointers this module allocated
//! and sized, or a code object `code_object::check` proved in bounds. No AMD GPU exists on
//! baro's build machines: the launch path follows the kernel ABI of `compile_gpu` but has
//! never run on AMD hardware there.

mod code_object;
mod ffi;
mod library;
mod queue;

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::ptr::null_mut;
use std::sync::{Arc, Mutex, OnceLock};

use super::abi::{self, Packed};
use super::backend::{Backend, BackendKernel, KernelRef};
use super::device::{DeviceArg, DeviceError, DeviceKind, MemoryInfo};
use super::graph::{replay_one_by_one, LaunchGraph, Node, Replay};
use super::host_device::HostPinned;
use crate::cache::CompileCache;
use crate::compile::{compile_gpu, GpuArtifact};
use crate::ir::Kernel;
use crate::options::CompileOptions;
use crate::target::Target;

pub use library::{check_version, version_text, MIN_VERSION};
pub(crate) use queue::{HipEvent, HipQueue};

/// The opened library, for HIP calls. Only `device_count` and `HipDevice::new` are entered
/// without a HIP object in hand, and both check the version first (`library::runtime`);
/// every other call is made on behalf of an object they produced.
fn api() -> Result<&'static library::Hip, DeviceError> {
    library::library()
}

/// Largest workgroup (threads per block) AMD GPUs accept.
const MAX_BLOCK_DIM: u32 = 1024;

/// How a HIP status reads in an error: `error 101 (hipErrorInvalidDevice)`.
fn describe_code(code: ffi::Code) -> String {
    match ffi::code_name(code) {
        Some(name) => format!("error {code} ({name})"),
        None => format!("error {code} (a code HIP 5.2 does not name)"),
    }
}

/// `Ok` for success, else the error naming `call` and the code.
fn check(call: &'static str, code: ffi::Code) -> Result<(), DeviceError> {
    if code == ffi::SUCCESS {
        Ok(())
    } else {
        Err(DeviceError::Driver { call, message: describe_code(code) })
    }
}

/// `hipInit(0)`, once per process; its status is remembered.
fn init() -> Result<(), DeviceError> {
    static INIT: OnceLock<ffi::Code> = OnceLock::new();
    let hip = api()?;
    // SAFETY: hipInit takes flags by value (0 is the only defined value).
    let code = *INIT.get_or_init(|| unsafe { (hip.hipInit)(0) });
    check("hipInit", code)
}

fn set_device(ordinal: i32) -> Result<(), DeviceError> {
    // SAFETY: a plain integer; HIP validates it.
    check("hipSetDevice", unsafe { (api()?.hipSetDevice)(ordinal) })
}

/// How many AMD GPUs HIP sees: 0 (not an error) when there are none. Without a HIP runtime
/// of ROCm 6 or newer: `DeviceError::NoDriver` saying what was found.
pub fn device_count() -> Result<usize, DeviceError> {
    count_devices(library::runtime()?)
}

/// `hipGetDeviceCount` through `hip`, whatever its version.
fn count_devices(hip: &library::Hip) -> Result<usize, DeviceError> {
    let mut count: i32 = 0;
    // SAFETY: `count` is a valid out-pointer for the duration of the call.
    let code = unsafe { (hip.hipGetDeviceCount)(&mut count) };
    match code {
        ffi::SUCCESS => Ok(usize::try_from(count).unwrap_or(0)),
        ffi::ERROR_NO_DEVICE => Ok(0),
        code => Err(DeviceError::Driver { call: "hipGetDeviceCount", message: describe_code(code) }),
    }
}

/// The HIP runtime's version number (`hipRuntimeGetVersion`: 50222153 for 5.2.3), whether or
/// not baro can use it (`check_version`); needs no GPU.
pub fn runtime_version() -> Result<i32, DeviceError> {
    Ok(api()?.version)
}

/// One AMD GPU. Every operation first makes it the calling thread's current HIP device.
pub(crate) struct HipDevice {
    ordinal: i32,
    name: String,
    /// `gcnArchName` as HIP reports it (`gfx1100`, `gfx90a:sramecc+:xnack-`).
    arch_name: String,
    target: Target,
    wave_width: u32,
    runtime: i32,
    options: CompileOptions,
    cache: CompileCache,
    kernels: Mutex<HashMap<Kernel, Arc<HipKernel>>>,
}

/// A kernel loaded into a HIP module. The module outlives the function handle (same struct).
pub(crate) struct HipKernel {
    artifact: Arc<GpuArtifact>,
    function: ffi::Function,
    _module: ModuleHandle,
}

// SAFETY: module and function handles may be used from any thread (HIP's API is thread-safe)
// and are only read after `load`.
unsafe impl Send for HipKernel {}
unsafe impl Sync for HipKernel {}

impl BackendKernel for HipKernel {
    fn kernel(&self) -> &Kernel {
        &self.artifact.kernel
    }
}

/// Device memory of one device, at least one byte (the buffer's own length is what kernels
/// see); freed on drop.
pub(crate) struct HipMem {
    ptr: ffi::DevicePtr,
    device: i32,
}

// SAFETY: a device allocation is not tied to a thread; every access is a HIP call (thread-safe)
// and host-side writes go through `&mut`.
unsafe impl Send for HipMem {}
unsafe impl Sync for HipMem {}

impl Drop for HipMem {
    fn drop(&mut self) {
        if let Ok(hip) = api() {
            // SAFETY: allocated by `hipMalloc`, freed exactly once; a failure leaves nothing to do.
            unsafe { (hip.hipFree)(self.ptr) };
        }
    }
}

impl HipMem {
    /// `bytes` (at least 1) zeroed bytes on the current device.
    fn zeroed(device: i32, bytes: usize) -> Result<HipMem, DeviceError> {
        let mut ptr: ffi::DevicePtr = null_mut();
        // SAFETY: `ptr` is a valid out-pointer.
        // Whole 4-byte words, so that a `DeviceArg::Words` view never reads past the allocation.
        let bytes = bytes.max(1).next_multiple_of(4);
        check("hipMalloc", unsafe { (api()?.hipMalloc)(&mut ptr, bytes) })?;
        let mem = HipMem { ptr, device };
        // SAFETY: `ptr` holds `bytes` bytes; the null stream is synchronised before use.
        check("hipMemsetAsync", unsafe { (api()?.hipMemsetAsync)(ptr, 0, bytes, null_mut()) })?;
        check("hipStreamSynchronize", unsafe { (api()?.hipStreamSynchronize)(null_mut()) })?;
        Ok(mem)
    }
}

impl HipDevice {
    pub(crate) fn new(ordinal: usize) -> Result<HipDevice, DeviceError> {
        let hip = library::runtime()?;
        let count = count_devices(hip)?;
        let raw = i32::try_from(ordinal).ok().filter(|_| ordinal < count).ok_or(DeviceError::NoDevice {
            kind: DeviceKind::Hip,
            ordinal,
            count,
        })?;
        init()?;
        set_device(raw)?;
        let props = properties(raw)?;
        let bad = |message: String| DeviceError::Driver { call: "hipGetDeviceProperties", message };
        let arch_name = c_chars(&props.gcnArchName);
        let target = arch_name
            .split(':')
            .next()
            .and_then(|a| a.parse::<Target>().ok())
            .filter(|t| matches!(t, Target::Amdgpu { .. }))
            .ok_or_else(|| bad(format!("expected a gfx architecture name, found `{arch_name}`")))?;
        let wave_width =
            u32::try_from(props.warpSize).ok().filter(|&w| Some(w) == target.wave_width()).ok_or_else(|| {
                bad(format!(
                    "expected the wave width {target} is compiled for ({:?}), found {}",
                    target.wave_width(),
                    props.warpSize
                ))
            })?;
        let options = CompileOptions::from_env().map_err(|e| DeviceError::Compile {
            kernel: "*".into(),
            target: target.to_string(),
            message: e.to_string(),
        })?;
        let cache = CompileCache::new(options.cache_dir.clone());
        Ok(HipDevice {
            ordinal: raw,
            name: c_chars(&props.name),
            arch_name,
            target,
            wave_width,
            runtime: hip.version,
            options,
            cache,
            kernels: Mutex::new(HashMap::new()),
        })
    }

    /// Loads an artifact's code object and finds its entry. The artifact must have been
    /// compiled for this device's architecture and wave width.
    pub(crate) fn load(&self, artifact: Arc<GpuArtifact>) -> Result<HipKernel, DeviceError> {
        let bad = |message: String| DeviceError::Compile {
            kernel: artifact.kernel.name.clone(),
            target: artifact.target.to_string(),
            message,
        };
        match &artifact.target {
            Target::Amdgpu { arch } if *arch == self.target.cpu() => {}
            other => {
                return Err(bad(format!(
                    "expected a code object for {} (hip device {}), found one for {other}",
                    self.target, self.ordinal
                )))
            }
        }
        if artifact.block_dim == 0
            || artifact.block_dim > MAX_BLOCK_DIM
            || !artifact.block_dim.is_multiple_of(self.wave_width)
        {
            return Err(bad(format!(
                "expected a multiple of {} up to {MAX_BLOCK_DIM} threads per workgroup, found {}",
                self.wave_width, artifact.block_dim
            )));
        }
        let entry = CString::new(artifact.entry.as_str())
            .map_err(|_| bad(format!("expected an entry name without NUL bytes, found `{}`", artifact.entry)))?;
        set_device(self.ordinal)?;
        let module = load_module(&artifact.image).map_err(|e| match e {
            LoadError::Image(message) => bad(message),
            LoadError::Hip(e) => e,
        })?;
        let mut function: ffi::Function = null_mut();
        // SAFETY: `module` is a live module handle, `entry` a NUL-terminated string that
        // outlives the call, `function` a valid out-pointer.
        check("hipModuleGetFunction", unsafe {
            (api()?.hipModuleGetFunction)(&mut function, module.0, entry.as_ptr())
        })?;
        Ok(HipKernel { artifact, function, _module: module })
    }

    /// `abi::pack`'s checks of a launch on `q`, then that the stream and every buffer are
    /// this device's.
    fn check_launch(&self, q: &HipQueue, k: &HipKernel, args: &[DeviceArg<'_>]) -> Result<Packed, DeviceError> {
        let packed = prepare(&k.artifact.kernel, args, k.artifact.block_dim)?;
        if q.device() != self.ordinal {
            return Err(DeviceError::Mismatch {
                what: "stream",
                expected: format!("a stream of hip device {}", self.ordinal),
                found: format!("one of hip device {}", q.device()),
            });
        }
        for (i, a) in args.iter().enumerate() {
            if let Some(m) = arg_mem(a) {
                if m.device != self.ordinal {
                    return Err(DeviceError::Mismatch {
                        what: "launch argument",
                        expected: format!("a buffer of hip device {} at #{i}", self.ordinal),
                        found: format!("one of hip device {}", m.device),
                    });
                }
            }
        }
        Ok(packed)
    }

    fn own(&self, m: &HipMem) -> Result<(), DeviceError> {
        if m.device != self.ordinal {
            return Err(DeviceError::Mismatch {
                what: "buffer",
                expected: format!("one of hip device {}", self.ordinal),
                found: format!("one of hip device {}", m.device),
            });
        }
        set_device(self.ordinal)
    }
}

impl Backend for HipDevice {
    const KIND: DeviceKind = DeviceKind::Hip;
    type Kernel = HipKernel;
    type Mem = HipMem;
    /// Plain host memory: HIP page-locked memory is not wired up yet (transfers still work,
    /// only slower).
    type Pinned = HostPinned;
    type Stream = HipQueue;
    type Event = HipEvent;

    fn name(&self) -> String {
        format!("{} ({})", self.name, self.arch_name)
    }

    fn driver_version(&self) -> String {
        format!("HIP runtime {}", version_text(self.runtime))
    }

    fn target(&self) -> Target {
        self.target.clone()
    }

    fn compile(&self, k: &Kernel) -> Result<Arc<HipKernel>, DeviceError> {
        if let Some(hit) = self.kernels.lock().unwrap_or_else(|e| e.into_inner()).get(k) {
            return Ok(hit.clone());
        }
        let compile_err =
            |message: String| DeviceError::Compile { kernel: k.name.clone(), target: self.target.to_string(), message };
        let artifact =
            compile_gpu(k, &self.target, &self.options, &self.cache).map_err(|e| compile_err(e.to_string()))?;
        let loaded = Arc::new(self.load(artifact)?);
        let mut kernels = self.kernels.lock().unwrap_or_else(|e| e.into_inner());
        Ok(kernels.entry(k.clone()).or_insert(loaded).clone())
    }

    fn alloc(&self, bytes: usize) -> Result<HipMem, DeviceError> {
        set_device(self.ordinal)?;
        HipMem::zeroed(self.ordinal, bytes)
    }

    /// Overwrites the first `bytes.len()` bytes of `m` (the caller checked the length).
    fn write(&self, m: &mut HipMem, bytes: &[u8]) -> Result<(), DeviceError> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.own(m)?;
        // SAFETY: `m` holds at least `bytes.len()` bytes (its buffer's byte length); HIP only
        // reads `bytes`.
        check("hipMemcpyHtoD", unsafe { (api()?.hipMemcpyHtoD)(m.ptr, bytes.as_ptr().cast_mut().cast(), bytes.len()) })
    }

    /// The first `len` bytes of `m`. Waits for work on the null stream (blocking streams too).
    fn read(&self, m: &HipMem, len: usize) -> Result<Vec<u8>, DeviceError> {
        let mut out = vec![0u8; len];
        if len == 0 {
            return Ok(out);
        }
        self.own(m)?;
        // SAFETY: `m` holds at least `len` bytes; `out` is `len` writable bytes.
        check("hipMemcpyDtoH", unsafe { (api()?.hipMemcpyDtoH)(out.as_mut_ptr().cast(), m.ptr, len) })?;
        Ok(out)
    }

    /// Queues a copy of `len` bytes from `src` to `dst` on `q`.
    /// Dropping either buffer early is safe: `hipFree` waits for the device's queued work.
    fn copy(&self, q: &HipQueue, src: &HipMem, dst: &mut HipMem, len: usize) -> Result<(), DeviceError> {
        if len == 0 {
            return Ok(());
        }
        self.own(src)?;
        self.own(dst)?;
        q.copy(src.ptr, dst.ptr, len)
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<HostPinned, DeviceError> {
        Ok(HostPinned(vec![0u8; bytes]))
    }

    /// Copies `src[src_off..][..len]` into `dst[dst_off..]` through `q` (ranges checked by the
    /// caller) and waits for `q`: see `HipQueue::copy_from_host`.
    fn copy_from_pinned(
        &self,
        q: &HipQueue,
        src: &HostPinned,
        src_off: usize,
        dst: &mut HipMem,
        dst_off: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        self.own(dst)?;
        // Pointer arithmetic inside the allocation (the range was checked against its length).
        q.copy_from_host(&src.0[src_off..src_off + len], dst.ptr.cast::<u8>().wrapping_add(dst_off).cast())
    }

    fn memory_info(&self) -> Result<Option<MemoryInfo>, DeviceError> {
        set_device(self.ordinal)?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: two valid out-pointers for the duration of the call.
        check("hipMemGetInfo", unsafe { (api()?.hipMemGetInfo)(&mut free, &mut total) })?;
        Ok(Some(MemoryInfo { free: free as u64, total: total as u64 }))
    }

    /// The null stream (synchronises with every blocking stream of the device).
    fn default_stream(&self) -> Result<HipQueue, DeviceError> {
        set_device(self.ordinal)?;
        HipQueue::null(self.ordinal)
    }

    fn new_stream(&self) -> Result<HipQueue, DeviceError> {
        set_device(self.ordinal)?;
        HipQueue::new(self.ordinal)
    }

    fn new_event(&self) -> Result<HipEvent, DeviceError> {
        set_device(self.ordinal)?;
        HipEvent::new(self.ordinal)
    }

    fn synchronize(&self, q: &HipQueue) -> Result<(), DeviceError> {
        q.synchronize()
    }

    fn wait_event(&self, q: &HipQueue, e: &HipEvent) -> Result<(), DeviceError> {
        q.wait(e)
    }

    fn record_event(&self, e: &HipEvent, q: &HipQueue) -> Result<(), DeviceError> {
        q.record(e)
    }

    fn elapsed_ms(&self, start: &HipEvent, end: &HipEvent) -> Result<f32, DeviceError> {
        start.elapsed_ms(end)
    }

    /// Queues `k` on `q`. Arguments are checked like the host's before anything is queued; a
    /// failed bounds check is reported by the queue's next `synchronize`.
    fn launch(&self, q: &HipQueue, k: KernelRef<'_, HipKernel>, args: &mut [DeviceArg<'_>]) -> Result<(), DeviceError> {
        let Packed { words, lens, grid } = self.check_launch(q, &k, args)?;
        set_device(self.ordinal)?;
        q.launch(k.handle, &k, words, lens, grid)
    }

    /// `launch`'s checks, then the launch as a graph node (its words and grid).
    fn record(
        &self,
        q: &HipQueue,
        k: KernelRef<'_, HipKernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<Node, DeviceError> {
        let Packed { words, grid, .. } = self.check_launch(q, &k, args)?;
        Ok(Node { kernel: k.handle.clone(), grid, words })
    }

    /// No HIP graph: a replay on HIP is the recorded launches in order, queued as `launch`
    /// would have (the caller of `Device::replay` keeps the buffers alive).
    unsafe fn replay(&self, q: &HipQueue, graph: &mut LaunchGraph, nodes: Vec<Node>) -> Result<Replay, DeviceError> {
        replay_one_by_one(graph, nodes, None, |node| {
            let Some(k) = node.kernel.handle.get::<HipKernel>() else {
                return Err(DeviceError::Mismatch {
                    what: "launch graph node",
                    expected: "a hip kernel".into(),
                    found: "a kernel of another device (a bug in baro)".into(),
                });
            };
            set_device(self.ordinal)?;
            q.launch(&node.kernel, k, node.words.clone(), abi::lens(&k.artifact.kernel, &node.words), node.grid)
        })
    }
}

fn arg_mem<'b>(a: &'b DeviceArg<'_>) -> Option<&'b HipMem> {
    match a {
        DeviceArg::Buf(b) | DeviceArg::Words(b) => b.mem.get(),
        DeviceArg::BufMut(b) => b.mem.get(),
        DeviceArg::Scalar(_) => None,
    }
}

/// Checks a launch like the host does, without touching HIP, and lays out its arguments
/// (`abi::pack`) within HIP's grid limits for `block_dim` threads per workgroup.
fn prepare(kernel: &Kernel, args: &[DeviceArg<'_>], block_dim: u32) -> Result<Packed, DeviceError> {
    // HIP counts work-items per axis in 32 bits: workgroups x block size must fit.
    let x_limit = u64::from(u32::MAX) / u64::from(block_dim.max(1));
    let limits = [x_limit, u64::from(u32::MAX), u64::from(u32::MAX)];
    abi::pack(kernel, DeviceKind::Hip, args, limits, |m: &HipMem| m.ptr as u64)
}

fn properties(ordinal: i32) -> Result<Box<ffi::DeviceProp>, DeviceError> {
    // SAFETY: plain C data (integers and arrays): all-zero is a valid value.
    let mut p: Box<ffi::DeviceProp> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: `p` is a writable `hipDeviceProp_tR0600` (its tail is larger than the headers'),
    // the struct `hipGetDevicePropertiesR0600` fills.
    check("hipGetDevicePropertiesR0600", unsafe { (api()?.hipGetDeviceProperties)(&mut *p, ordinal) })?;
    Ok(p)
}

/// A fixed C char array up to its first NUL (all of it if none), lossily as UTF-8.
fn c_chars(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// An owned module handle, unloaded on drop.
struct ModuleHandle(ffi::Module);

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        if let Ok(hip) = api() {
            // SAFETY: loaded by `load_module`, unloaded exactly once; a failure leaves nothing to do.
            unsafe { (hip.hipModuleUnload)(self.0) };
        }
    }
}

enum LoadError {
    /// The bytes are not a code object HIP could safely read.
    Image(String),
    Hip(DeviceError),
}

/// Checks `image`, then hands an 8-aligned copy of it to `hipModuleLoadData` on the current device.
fn load_module(image: &[u8]) -> Result<ModuleHandle, LoadError> {
    code_object::check(image).map_err(LoadError::Image)?;
    let mut words = vec![0u64; image.len().div_ceil(8)];
    for (w, chunk) in words.iter_mut().zip(image.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_ne_bytes(b);
    }
    let mut module: ffi::Module = null_mut();
    let hip = api().map_err(LoadError::Hip)?;
    // SAFETY: `words` holds a checked ELF image whose every header, segment and section lies
    // inside it (the runtime reads nothing past them) and outlives the call; `module` is a
    // valid out-pointer.
    let code = unsafe { (hip.hipModuleLoadData)(&mut module, words.as_ptr().cast::<c_void>()) };
    check("hipModuleLoadData", code).map_err(LoadError::Hip)?;
    Ok(ModuleHandle(module))
}

#[cfg(test)]
mod tests;
