//! Launch graphs: the kernel launches a closure queues on a stream, recorded instead of run,
//! then replayed as one unit (`Device::replay`). A `LaunchGraph` keeps what it last replayed,
//! so the next recording of the same shape (node count, kernels, grids) only changes the
//! nodes whose parameter words differ (positions, ring indices, buffer addresses); any other
//! difference rebuilds it. On CUDA a replay is one `cuGraphLaunch` of a chain of kernel nodes
//! (`cuda_graph`); on the host and on HIP it launches the recorded list in order through the
//! normal path (HIP graphs could follow the CUDA design, but no AMD GPU is available to test
//! them).
//!
//! A recorded node holds raw addresses (parameter words): the buffers a recording names must
//! stay alive until its replay has been queued (`Device::replay`'s safety contract), and a
//! recording is replayed right after it ends, never kept. An executable graph keeps the
//! previous replay's addresses but is never launched before every node whose words changed
//! has been updated to the new recording's, so stale addresses are never used.
//!
//! Recording never runs anything and replay never reorders: any operation other than a kernel
//! launch on a recording stream is an error (`DeviceError::Recording`). This module never
//! calls a driver (`cuda_graph` does) and never dereferences an address except in the host
//! replay, inside `Device::replay`.

use std::any::Any;
use std::sync::Arc;

use super::device::{DeviceError, DeviceKernel, DeviceKind};

/// One recorded launch: the kernel, its grid, and its parameter words in the GPU kernel ABI
/// (per buffer its address and element count, per scalar its canonical bits); the error
/// record's address is not among them, each backend adds its own.
pub(crate) struct Node {
    pub(crate) kernel: DeviceKernel,
    /// Workgroups per axis (the host derives its grid at launch: zeros).
    pub(crate) grid: [u32; 3],
    pub(crate) words: Vec<u64>,
}

/// What a replay did with the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// The graph was built from this recording of `nodes` launches: the first replay, or
    /// one whose shape (node count, a kernel or a grid) differs from the previous replay's.
    Built { nodes: usize },
    /// The same shape as the previous replay: the `changed` nodes (of `nodes`) whose
    /// parameter words differ were updated in place.
    Updated { nodes: usize, changed: usize },
}

/// Counters over a graph's replays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphStats {
    pub replays: u64,
    /// Replays that built the graph (`Replay::Built`).
    pub builds: u64,
    /// Nodes updated in place, over all `Replay::Updated` replays.
    pub updated_nodes: u64,
}

/// A replayable recording, kept across replays: what was replayed last and, on CUDA, the
/// executable graph built from it. Holds no buffer; bound to the device of its first replay.
#[derive(Default)]
pub struct LaunchGraph {
    pub(crate) kind: Option<DeviceKind>,
    /// The nodes last replayed (shared with the stream's pending error records on CUDA).
    pub(crate) nodes: Arc<Vec<Node>>,
    /// The backend's executable form of `nodes`, if it builds one (CUDA: a `CudaGraph`).
    pub(crate) exec: Option<Box<dyn Any + Send + Sync>>,
    pub(crate) stats: GraphStats,
}

impl LaunchGraph {
    /// An empty graph: its first replay builds it.
    pub fn new() -> LaunchGraph {
        LaunchGraph::default()
    }

    /// Launches in the last replay (0 before the first).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn stats(&self) -> GraphStats {
        self.stats
    }

    /// Forgets the last replay (after a failed one): the next replay builds afresh.
    pub(crate) fn clear(&mut self) {
        self.nodes = Arc::new(Vec::new());
        self.exec = None;
    }

    /// Checks that `kind` is this graph's device (binding a fresh graph to it).
    pub(crate) fn bind(&mut self, kind: DeviceKind) -> Result<(), DeviceError> {
        match self.kind {
            Some(k) if k != kind => Err(DeviceError::Mismatch {
                what: "launch graph",
                expected: format!("one replayed on this {kind} device"),
                found: format!("one replayed on a {k} device"),
            }),
            _ => {
                self.kind = Some(kind);
                Ok(())
            }
        }
    }

    /// Counts a replay of `new` against the last one, and keeps `new` as the last.
    pub(crate) fn settle(&mut self, new: Arc<Vec<Node>>, replay: Replay) {
        self.stats.replays += 1;
        match replay {
            Replay::Built { .. } => self.stats.builds += 1,
            Replay::Updated { changed, .. } => self.stats.updated_nodes += changed as u64,
        }
        self.nodes = new;
    }
}

/// The nodes of `new` whose parameter words differ from `old`'s, or `None` when the shapes
/// differ (node count, a kernel or a grid): the graph must then be rebuilt.
pub(crate) fn changed_nodes(old: &[Node], new: &[Node]) -> Option<Vec<usize>> {
    if old.len() != new.len() || old.is_empty() {
        return None;
    }
    let mut changed = Vec::new();
    for (i, (a, b)) in old.iter().zip(new).enumerate() {
        if !a.kernel.same(&b.kernel) || a.grid != b.grid || a.words.len() != b.words.len() {
            return None;
        }
        if a.words != b.words {
            changed.push(i);
        }
    }
    Some(changed)
}

/// A replay for the backends that replay launch by launch: `launch` of each node of `new`
/// in order, then `graph` settled as if it had been updated or rebuilt.
pub(crate) fn replay_in_order(
    graph: &mut LaunchGraph,
    new: Vec<Node>,
    mut launch: impl FnMut(&Node) -> Result<(), DeviceError>,
) -> Result<Replay, DeviceError> {
    let replay = match changed_nodes(&graph.nodes, &new) {
        Some(changed) => Replay::Updated { nodes: new.len(), changed: changed.len() },
        None => Replay::Built { nodes: new.len() },
    };
    for n in &new {
        launch(n)?;
    }
    graph.settle(Arc::new(new), replay);
    Ok(replay)
}

/// The recording state of a stream: `Some` while a `Device::replay` closure runs on it.
pub(crate) type Recording = std::sync::Mutex<Option<Vec<Node>>>;

/// Ends a stream's recording when dropped (also when the closure panics or fails).
pub(crate) struct RecordingGuard<'s> {
    pub(crate) recording: &'s Recording,
}

impl RecordingGuard<'_> {
    /// Ends the recording and returns its nodes.
    pub(crate) fn finish(self) -> Vec<Node> {
        self.recording.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default()
    }
}

impl Drop for RecordingGuard<'_> {
    fn drop(&mut self) {
        self.recording.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
