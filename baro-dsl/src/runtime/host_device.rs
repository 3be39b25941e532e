//! The host JIT as a backend: "device buffers" are host memory (`HostMem`, whole `u64`
//! words so every element type is aligned), streams are empty (every launch runs to
//! completion on the calling thread), events are wall-clock instants, launches go through
//! `HostKernel::launch` (which never modifies a buffer on error). A recorded launch
//! (`record`) keeps the buffers' addresses, and its replay (`launch_node`) rebuilds the same
//! arguments from them: the caller of `Device::replay` keeps those buffers alive.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::backend::{Backend, BackendKernel, KernelRef, PinnedMemory};
use super::buffer::{words_as_bytes, words_as_bytes_mut};
use super::check::check_args;
use super::device::{DeviceArg, DeviceError, DeviceKind, MemoryInfo};
use super::graph::{replay_one_by_one, LaunchGraph, Node, Replay};
use super::{Arg, HostKernel, HostRuntime};
use crate::ir::{Access, Const, Kernel, ParamKind, ScalarType};
use crate::options::{CompileOptions, GraphOrder, HostOrder};
use crate::target::Target;

pub(crate) struct HostDevice {
    rt: HostRuntime,
    /// `Some(seed)`: launch graphs replay in a seeded random order of their data dependencies
    /// (`graph::replay_one_by_one`), not in recording order.
    replay_seed: Option<u64>,
}

/// Host memory: exactly `bytes.div_ceil(8)` zeroed words.
pub(crate) struct HostMem(Vec<u64>);

/// Plain host memory standing in for page-locked memory (also HIP's, for now).
pub(crate) struct HostPinned(pub(crate) Vec<u8>);

/// A host stream: nothing is ever queued.
pub(crate) struct HostStream;

/// When the event was last recorded.
pub(crate) struct HostEvent(Mutex<Option<Instant>>);

impl HostDevice {
    /// The runtime of `BARO_HOST_ORDER` and the disk cache; with `BARO_GRAPH_ORDER=data` and a
    /// shuffled host order, graphs replay in that seed's order of their data dependencies.
    pub(crate) fn new() -> Result<HostDevice, DeviceError> {
        let options = CompileOptions::from_env()
            .map_err(|e| DeviceError::Driver { call: "reading BARO_* variables", message: e.to_string() })?;
        let rt = HostRuntime::with_cache(options.host_order, options.cache_dir)
            .map_err(|e| DeviceError::Driver { call: "llvm native target initialisation", message: e.to_string() })?;
        let replay_seed = match (options.graph_order, options.host_order) {
            (GraphOrder::Data, HostOrder::Shuffled { seed }) => Some(seed),
            _ => None,
        };
        Ok(HostDevice { rt, replay_seed })
    }

    /// The default runtime, its graphs replayed in `seed`'s order of their data dependencies.
    pub(crate) fn replaying_by_data(seed: u64) -> Result<HostDevice, DeviceError> {
        Ok(HostDevice { replay_seed: Some(seed), ..HostDevice::new()? })
    }
}

impl BackendKernel for HostKernel {
    fn kernel(&self) -> &Kernel {
        HostKernel::kernel(self)
    }
}

impl PinnedMemory for HostPinned {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn as_slice(&self) -> Result<&[u8], DeviceError> {
        Ok(&self.0)
    }
    fn as_mut_slice(&mut self) -> Result<&mut [u8], DeviceError> {
        Ok(&mut self.0)
    }
}

impl HostMem {
    fn bytes(&self) -> &[u8] {
        words_as_bytes(&self.0)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        words_as_bytes_mut(&mut self.0)
    }
}

/// The host memory of launch argument #`i`, or the error for another device's.
fn host_mem(b: &super::Buffer, i: usize) -> Result<&HostMem, DeviceError> {
    b.mem.get::<HostMem>().ok_or_else(|| foreign_arg(i))
}

fn foreign_arg(i: usize) -> DeviceError {
    DeviceError::Mismatch {
        what: "launch argument",
        expected: format!("a host buffer at #{i}"),
        found: "a buffer of another device".into(),
    }
}

impl Backend for HostDevice {
    const KIND: DeviceKind = DeviceKind::Host;
    type Kernel = HostKernel;
    type Mem = HostMem;
    type Pinned = HostPinned;
    type Stream = HostStream;
    type Event = HostEvent;

    fn name(&self) -> String {
        format!("host ({})", std::env::consts::ARCH)
    }

    fn driver_version(&self) -> String {
        let (a, b, c) = inkwell::support::get_llvm_version();
        format!("LLVM {a}.{b}.{c} JIT")
    }

    fn target(&self) -> Target {
        Target::Host
    }

    fn compile(&self, k: &Kernel) -> Result<Arc<HostKernel>, DeviceError> {
        self.rt.compile(k).map_err(|e| DeviceError::Compile {
            kernel: k.name.clone(),
            target: "host".into(),
            message: e.to_string(),
        })
    }

    fn alloc(&self, bytes: usize) -> Result<HostMem, DeviceError> {
        Ok(HostMem(vec![0u64; bytes.div_ceil(8)]))
    }

    fn memory_info(&self) -> Result<Option<MemoryInfo>, DeviceError> {
        Ok(None)
    }

    fn write(&self, m: &mut HostMem, bytes: &[u8]) -> Result<(), DeviceError> {
        m.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn read(&self, m: &HostMem, len: usize) -> Result<Vec<u8>, DeviceError> {
        Ok(m.bytes()[..len].to_vec())
    }

    fn copy(&self, _: &HostStream, src: &HostMem, dst: &mut HostMem, len: usize) -> Result<(), DeviceError> {
        dst.bytes_mut()[..len].copy_from_slice(&src.bytes()[..len]);
        Ok(())
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<HostPinned, DeviceError> {
        Ok(HostPinned(vec![0u8; bytes]))
    }

    fn copy_from_pinned(
        &self,
        _: &HostStream,
        src: &HostPinned,
        src_off: usize,
        dst: &mut HostMem,
        dst_off: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        dst.bytes_mut()[dst_off..dst_off + len].copy_from_slice(&src.0[src_off..src_off + len]);
        Ok(())
    }

    fn default_stream(&self) -> Result<HostStream, DeviceError> {
        Ok(HostStream)
    }

    fn new_stream(&self) -> Result<HostStream, DeviceError> {
        Ok(HostStream)
    }

    fn new_event(&self) -> Result<HostEvent, DeviceError> {
        Ok(HostEvent(Mutex::new(None)))
    }

    fn synchronize(&self, _: &HostStream) -> Result<(), DeviceError> {
        Ok(())
    }

    fn wait_event(&self, _: &HostStream, _: &HostEvent) -> Result<(), DeviceError> {
        Ok(())
    }

    fn record_event(&self, e: &HostEvent, _: &HostStream) -> Result<(), DeviceError> {
        *e.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        Ok(())
    }

    fn elapsed_ms(&self, start: &HostEvent, end: &HostEvent) -> Result<f32, DeviceError> {
        let a = *start.0.lock().unwrap_or_else(|e| e.into_inner());
        let b = *end.0.lock().unwrap_or_else(|e| e.into_inner());
        match (a, b) {
            (Some(a), Some(b)) => Ok(b.saturating_duration_since(a).as_secs_f32() * 1e3),
            _ => Err(DeviceError::Mismatch {
                what: "elapsed time",
                expected: "two recorded events".into(),
                found: "an event never recorded".into(),
            }),
        }
    }

    fn launch(
        &self,
        _: &HostStream,
        k: KernelRef<'_, HostKernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<(), DeviceError> {
        check_args(k.kernel(), args.iter().map(DeviceArg::shape))?;
        let mut host_args = Vec::with_capacity(args.len());
        for (i, a) in args.iter_mut().enumerate() {
            host_args.push(match a {
                DeviceArg::Scalar(c) => Arg::Scalar(*c),
                DeviceArg::Buf(b) => Arg::Buf { elem: b.elem(), bytes: &host_mem(b, i)?.bytes()[..b.byte_len()] },
                DeviceArg::Words(b) => {
                    b.expect_elem(ScalarType::U8)?;
                    // Whole 4-byte words; the padding reads 0 (host memory is whole zeroed u64 words).
                    let n = b.byte_len().div_ceil(4) * 4;
                    Arg::Buf { elem: ScalarType::U32, bytes: &host_mem(b, i)?.bytes()[..n] }
                }
                DeviceArg::BufMut(b) => {
                    let (elem, n) = (b.elem(), b.byte_len());
                    let m = b.mem.get_mut::<HostMem>().ok_or_else(|| foreign_arg(i))?;
                    Arg::BufMut { elem, bytes: &mut m.bytes_mut()[..n] }
                }
            });
        }
        k.launch(&mut host_args).map_err(DeviceError::Launch)
    }

    /// `launch`'s checks, then the arguments as parameter words: per buffer its address and
    /// element count as the kernel sees it, per scalar its bits.
    fn record(
        &self,
        _: &HostStream,
        k: KernelRef<'_, HostKernel>,
        args: &mut [DeviceArg<'_>],
    ) -> Result<Node, DeviceError> {
        check_args(k.kernel(), args.iter().map(DeviceArg::shape))?;
        let mut words = Vec::with_capacity(2 * args.len());
        for (i, a) in args.iter_mut().enumerate() {
            match a {
                DeviceArg::Scalar(c) => words.push(c.bits),
                // The addresses are `Vec::as_ptr`: no reference to the words is made.
                DeviceArg::Buf(b) => words.extend([host_mem(b, i)?.0.as_ptr() as u64, b.len() as u64]),
                DeviceArg::Words(b) => {
                    b.expect_elem(ScalarType::U8)?;
                    words.extend([host_mem(b, i)?.0.as_ptr() as u64, b.byte_len().div_ceil(4) as u64]);
                }
                DeviceArg::BufMut(b) => {
                    let len = b.len() as u64;
                    let m = b.mem.get_mut::<HostMem>().ok_or_else(|| foreign_arg(i))?;
                    words.extend([m.0.as_mut_ptr() as u64, len]);
                }
            }
        }
        Ok(Node { kernel: k.handle.clone(), grid: [0; 3], words })
    }

    unsafe fn replay(&self, _: &HostStream, graph: &mut LaunchGraph, nodes: Vec<Node>) -> Result<Replay, DeviceError> {
        // SAFETY: as `replay`'s contract.
        replay_one_by_one(graph, nodes, self.replay_seed, |n| unsafe { launch_node(n) })
    }
}

/// Launches a node `record` made, through `HostKernel::launch`.
///
/// # Safety
///
/// Every buffer the node names is alive and not otherwise borrowed (`Device::replay`).
unsafe fn launch_node(node: &Node) -> Result<(), DeviceError> {
    let Some(k) = node.kernel.handle.get::<HostKernel>() else {
        return Err(DeviceError::Mismatch {
            what: "launch graph node",
            expected: "a host kernel".into(),
            found: "a kernel of another device (a bug in baro)".into(),
        });
    };
    let mut args = Vec::with_capacity(k.kernel().params.len());
    let mut words = node.words.iter().copied();
    let mut next = || {
        words.next().ok_or_else(|| DeviceError::Mismatch {
            what: "launch graph node",
            expected: format!("the parameter words of `{}`", k.kernel().name),
            found: "fewer (a bug in baro)".into(),
        })
    };
    for p in &k.kernel().params {
        args.push(match p.kind {
            ParamKind::Scalar(ty) => Arg::Scalar(Const::new(ty, next()?)),
            ParamKind::Buffer { elem, access } => {
                let (addr, len) = (next()? as usize, next()? as usize);
                let bytes = len * elem.size_bytes();
                // SAFETY: `record` took `addr` from a live host buffer of at least `bytes`
                // bytes (its element count as this parameter's type), which the caller
                // keeps alive and unborrowed; a writable parameter's address came from a
                // `&mut Buffer` (`DeviceArg::BufMut`, which `check_args` required).
                unsafe {
                    if access == Access::ReadWrite {
                        Arg::BufMut { elem, bytes: std::slice::from_raw_parts_mut(addr as *mut u8, bytes) }
                    } else {
                        Arg::Buf { elem, bytes: std::slice::from_raw_parts(addr as *const u8, bytes) }
                    }
                }
            }
        });
    }
    k.launch(&mut args).map_err(DeviceError::Launch)
}
