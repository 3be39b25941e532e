//! A launch graph on CUDA (feature `cuda`): recorded launches (`graph::Node`) as a `cuGraph`
//! of kernel nodes whose edges are `graph::node_deps` of the device's `GraphOrder`: by default
//! a chain, each node depending on the one before, so they run in recording order exactly as
//! the same launches on one stream would; with `BARO_GRAPH_ORDER=data` the data dependencies
//! only, so kernels that share no buffer may run side by side (each still reads what it
//! would in recording order). Built and instantiated once; a later replay of the same shape
//! and the same edges changes only the nodes whose parameter words differ
//! (`cuGraphExecKernelNodeSetParams`), then one `cuGraphLaunch`; other edges rebuild it.
//!
//! Every node's last parameter is its own error record in an area the graph owns (one record
//! per node), so the words a replay compares never include a ring slot that moves from step
//! to step. After a launch the stream lists the graph as pending (`GraphPending`, once however
//! many times it was launched since), and its next synchronisation reads and clears the area
//! and reports the first failed node with its kernel's name and message, as for a launch.
//!
//! Only the raw driver API of `cudarc::driver::sys` is used here (cudarc's safe graphs are
//! stream captures). The executable graph holds device addresses; `LaunchGraph` never launches
//! it before updating every changed node to the addresses of the recording just made.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, DevicePtr};

use super::abi::{self, RECORD_BYTES, RECORD_WORDS};
use super::cuda::{driver_error, CudaKernel, CudaQueue};
use super::device::DeviceError;
use super::graph::Node;
use super::records::describe;

/// An instantiated graph and what updating and checking it needs.
pub(crate) struct CudaGraph {
    ctx: Arc<CudaContext>,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    /// The graph's kernel nodes, in recording order (handles stay valid while `graph` lives).
    handles: Vec<sys::CUgraphNode>,
    /// Each node's predecessors (`graph::node_deps`), the graph's edges.
    deps: Vec<Vec<u32>>,
    records: Arc<RecordArea>,
    /// The device address of `records`' first record.
    record_base: sys::CUdeviceptr,
}

// SAFETY: the driver handles are only used through `&mut CudaGraph` (build, update) or, for
// `cuGraphLaunch`, under the launching queue's lock via `&LaunchGraph` held mutably by
// `Device::replay`; CUDA graph objects need only that external serialisation.
unsafe impl Send for CudaGraph {}
// SAFETY: as for `Send`: no `&self` method mutates a handle, and launches are serialised.
unsafe impl Sync for CudaGraph {}

/// A graph's error records: (node, 4) words, zeroed, written by a node's failed bounds check.
pub(crate) struct RecordArea {
    slots: Mutex<CudaSlice<u64>>,
}

/// A replayed graph whose records a stream has not read yet: the area and the nodes of the
/// replay (for the kernels' names and the element counts the messages quote).
pub(crate) struct GraphPending {
    area: Arc<RecordArea>,
    nodes: Arc<Vec<Node>>,
}

impl GraphPending {
    /// Whether these are `g`'s records.
    pub(crate) fn is_of(&self, g: &CudaGraph) -> bool {
        Arc::ptr_eq(&self.area, &g.records)
    }

    /// Reads and clears the records on `q` (synchronised by the caller before the next use)
    /// and describes the first failed node, in recording order.
    pub(crate) fn take_first_error(&self, q: &CudaQueue) -> Result<Option<DeviceError>, DeviceError> {
        let mut slots = self.area.slots.lock().unwrap_or_else(|e| e.into_inner());
        let words = q.take_records(&mut slots, self.nodes.len())?;
        for (node, w) in self.nodes.iter().zip(words.chunks_exact(RECORD_WORDS)) {
            let kernel = node.kernel.kernel();
            if let Some(e) = describe(kernel, w, &abi::lens(kernel, &node.words)) {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }
}

/// One node's launch parameters as the driver takes them: the words (the record's address
/// appended) and a pointer to each, alive while the driver call that reads them runs.
struct Params {
    words: Vec<u64>,
    ptrs: Vec<*mut c_void>,
    func: sys::CUfunction,
    grid: [u32; 3],
    block: u32,
}

impl Params {
    fn new(node: &Node, record: sys::CUdeviceptr) -> Result<Params, DeviceError> {
        let k = cuda_kernel(node)?;
        let mut words = Vec::with_capacity(node.words.len() + 1);
        words.extend_from_slice(&node.words);
        words.push(record);
        Ok(Params { words, ptrs: Vec::new(), func: k.cu_function(), grid: node.grid, block: k.block_dim() })
    }

    /// The driver's node parameters, pointing into `self` (which must not move or change
    /// until the call that reads them returns; the driver copies the values).
    fn raw(&mut self) -> sys::CUDA_KERNEL_NODE_PARAMS {
        self.ptrs = abi::param_ptrs(&mut self.words);
        sys::CUDA_KERNEL_NODE_PARAMS {
            func: self.func,
            gridDimX: self.grid[0],
            gridDimY: self.grid[1],
            gridDimZ: self.grid[2],
            blockDimX: self.block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            kernelParams: self.ptrs.as_mut_ptr(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        }
    }
}

fn cuda_kernel(node: &Node) -> Result<&CudaKernel, DeviceError> {
    node.kernel.handle.get::<CudaKernel>().ok_or_else(|| DeviceError::Mismatch {
        what: "launch graph node",
        expected: "a cuda kernel".into(),
        found: "a kernel of another device (a bug in baro)".into(),
    })
}

fn call(name: &'static str, r: sys::CUresult) -> Result<(), DeviceError> {
    r.result().map_err(|e| driver_error(name, e))
}

impl CudaGraph {
    /// A graph of `nodes` (at least one) with edges `deps` (each node's predecessors, all
    /// earlier: `graph::node_deps`), instantiated, with a zeroed record area allocated on
    /// `stream`.
    pub(crate) fn build(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        nodes: &[Node],
        deps: Vec<Vec<u32>>,
    ) -> Result<CudaGraph, DeviceError> {
        if deps.len() != nodes.len() || deps.iter().enumerate().any(|(j, d)| d.iter().any(|&i| i as usize >= j)) {
            return Err(DeviceError::Mismatch {
                what: "launch graph edges",
                expected: format!("predecessors among the earlier of {} nodes", nodes.len()),
                found: format!("{} lists, not all of earlier nodes (a bug in baro)", deps.len()),
            });
        }
        let slots = stream
            .alloc_zeros::<u64>(nodes.len().max(1) * RECORD_WORDS)
            .map_err(|e| driver_error("cuMemAlloc (graph error records)", e))?;
        let record_base = slots.device_ptr(stream).0;
        ctx.bind_to_thread().map_err(|e| driver_error("cuCtxSetCurrent", e))?;
        // Dropped on any error below: destroys what was created so far.
        let mut g = CudaGraph {
            ctx: ctx.clone(),
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
            handles: Vec::with_capacity(nodes.len()),
            deps: Vec::new(),
            records: Arc::new(RecordArea { slots: Mutex::new(slots) }),
            record_base,
        };
        // SAFETY: `g.graph` is a valid out-pointer; flags must be 0.
        call("cuGraphCreate", unsafe { sys::cuGraphCreate(&mut g.graph, 0) })?;
        for (i, node) in nodes.iter().enumerate() {
            let mut p = Params::new(node, g.record_address(i))?;
            let raw = p.raw();
            // Checked above: every predecessor is an earlier node, whose handle exists.
            let preds: Vec<sys::CUgraphNode> = deps[i].iter().map(|&d| g.handles[d as usize]).collect();
            let dep_ptr = if preds.is_empty() { std::ptr::null() } else { preds.as_ptr() };
            let mut handle: sys::CUgraphNode = std::ptr::null_mut();
            // SAFETY: `g.graph` is a live graph, `dep_ptr` points to `preds.len()` of its nodes
            // (alive until the call returns), and `raw` points into `p`, alive until the call
            // returns: the kernel's function and one 8-byte word per parameter of the GPU
            // kernel ABI (the node's recorded words, checked when recorded, and the address of
            // its record in the area we own).
            call("cuGraphAddKernelNode", unsafe {
                sys::cuGraphAddKernelNode_v2(&mut handle, g.graph, dep_ptr, preds.len(), &raw)
            })?;
            g.handles.push(handle);
        }
        g.deps = deps;
        // SAFETY: `g.graph` is a complete graph of kernel nodes; `g.exec` a valid out-pointer.
        call("cuGraphInstantiateWithFlags", unsafe { sys::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0) })?;
        Ok(g)
    }

    /// Sets the parameters of nodes `changed` (of a recording of this graph's shape) to
    /// `nodes`' words.
    pub(crate) fn update(&mut self, nodes: &[Node], changed: &[usize]) -> Result<(), DeviceError> {
        if changed.is_empty() {
            return Ok(());
        }
        self.ctx.bind_to_thread().map_err(|e| driver_error("cuCtxSetCurrent", e))?;
        for &i in changed {
            let (Some(node), Some(&handle)) = (nodes.get(i), self.handles.get(i)) else {
                return Err(DeviceError::Mismatch {
                    what: "launch graph update",
                    expected: format!("node {i} of {}", self.handles.len()),
                    found: format!("{} recorded nodes (a bug in baro)", nodes.len()),
                });
            };
            let mut p = Params::new(node, self.record_address(i))?;
            let raw = p.raw();
            // SAFETY: `handle` is a kernel node of the graph `exec` was instantiated from, with
            // the same function and grid (`changed_nodes` compared them); `raw` as in `build`.
            call("cuGraphExecKernelNodeSetParams", unsafe {
                sys::cuGraphExecKernelNodeSetParams_v2(self.exec, handle, &raw)
            })?;
        }
        Ok(())
    }

    /// The graph's edges: each node's predecessors.
    pub(crate) fn deps(&self) -> &[Vec<u32>] {
        &self.deps
    }

    /// Queues the whole graph on `stream`.
    pub(crate) fn launch(&self, stream: &CudaStream) -> Result<(), DeviceError> {
        self.ctx.bind_to_thread().map_err(|e| driver_error("cuCtxSetCurrent", e))?;
        // SAFETY: `exec` is instantiated and every node's words are the live recording's.
        call("cuGraphLaunch", unsafe { sys::cuGraphLaunch(self.exec, stream.cu_stream()) })
    }

    /// The stream's pending entry for a launch of this graph replaying `nodes`.
    pub(crate) fn pending(&self, nodes: Arc<Vec<Node>>) -> GraphPending {
        GraphPending { area: self.records.clone(), nodes }
    }

    fn record_address(&self, node: usize) -> sys::CUdeviceptr {
        self.record_base + (node * RECORD_BYTES) as u64
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // Failures here leave nothing better to do. An executable graph still running is
        // freed by the driver when it completes; the record area lives on in any pending
        // entry that still needs it.
        let _ = self.ctx.bind_to_thread();
        if !self.exec.is_null() {
            // SAFETY: `exec` was instantiated by us and is destroyed once.
            let _ = unsafe { sys::cuGraphExecDestroy(self.exec) };
        }
        if !self.graph.is_null() {
            // SAFETY: `graph` was created by us and is destroyed once, after its exec.
            let _ = unsafe { sys::cuGraphDestroy(self.graph) };
        }
    }
}
