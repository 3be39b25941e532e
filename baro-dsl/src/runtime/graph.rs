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
use std::collections::HashMap;
use std::sync::Arc;

use super::device::{DeviceError, DeviceKernel, DeviceKind};
use crate::ir::{Access, Kernel, ParamKind};
use crate::options::GraphOrder;

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

/// Each node's predecessors in a graph of `order` (indices of earlier nodes, ascending), from
/// each node's kernel and parameter words. `Chain`: the node before. `Data`: for each buffer
/// a node passes, the last earlier node that wrote it; for a buffer it may write (a
/// read-write parameter), also every earlier node that read it since that write (or, with
/// none, that writer). A buffer is a whole allocation and its address word names it, so two
/// parameters share memory exactly when they pass the same address; a node only touches its
/// parameters' buffers (kernels have no other global memory; each node's error record is its
/// own). So every node reads what it would read in recording order, and every buffer ends as
/// it would, whichever order the graph's free nodes run in.
pub(crate) fn node_deps<'a>(
    nodes: impl IntoIterator<Item = (&'a Kernel, &'a [u64])>,
    order: GraphOrder,
) -> Vec<Vec<u32>> {
    #[derive(Default)]
    struct Uses {
        writer: Option<u32>,
        readers: Vec<u32>,
    }
    let mut uses: HashMap<u64, Uses> = HashMap::new();
    let mut all = Vec::new();
    for (j, (kernel, words)) in nodes.into_iter().enumerate() {
        let j = j as u32;
        if order == GraphOrder::Chain {
            all.push(if j == 0 { Vec::new() } else { vec![j - 1] });
            continue;
        }
        // (address, may write) of each buffer parameter, in the ABI's word layout.
        let mut touched = Vec::new();
        let mut at = 0;
        for p in &kernel.params {
            match p.kind {
                ParamKind::Buffer { access, .. } => {
                    if let Some(&addr) = words.get(at) {
                        touched.push((addr, access == Access::ReadWrite));
                    }
                    at += 2;
                }
                ParamKind::Scalar(_) => at += 1,
            }
        }
        let mut deps = Vec::new();
        for &(addr, writes) in &touched {
            if let Some(u) = uses.get(&addr) {
                // Each reader since the write already follows the writer.
                if writes && !u.readers.is_empty() {
                    deps.extend_from_slice(&u.readers);
                } else {
                    deps.extend(u.writer);
                }
            }
        }
        deps.sort_unstable();
        deps.dedup();
        for (addr, writes) in touched {
            let u = uses.entry(addr).or_default();
            if writes {
                u.writer = Some(j);
                u.readers.clear();
            } else if u.writer != Some(j) && u.readers.last() != Some(&j) {
                u.readers.push(j);
            }
        }
        all.push(deps);
    }
    all
}

/// A seeded random order of the nodes in which each comes after its predecessors `deps`
/// (every predecessor an earlier node, as `node_deps` gives them): Kahn's algorithm, drawing
/// each next node from those ready with a splitmix64 stream of `seed`.
pub(crate) fn shuffled_topological(deps: &[Vec<u32>], seed: u64) -> Vec<usize> {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (j, d) in deps.iter().enumerate() {
        for &i in d {
            next[i as usize].push(j);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&j| waiting[j] == 0).collect();
    let mut state = seed;
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let j = ready.swap_remove((z % ready.len() as u64) as usize);
        order.push(j);
        for &k in &next[j] {
            waiting[k] -= 1;
            if waiting[k] == 0 {
                ready.push(k);
            }
        }
    }
    order
}

/// A replay for the backends that replay launch by launch: `launch` of each node of `new`
/// in recording order, or, with `seed`, in a seeded random order of their data dependencies
/// (`node_deps` by `GraphOrder::Data`, `shuffled_topological`: what a CUDA graph of that
/// order may do, for tests; a failed node then stops the replay where that order meets it);
/// then `graph` settled as if it had been updated or rebuilt.
pub(crate) fn replay_one_by_one(
    graph: &mut LaunchGraph,
    new: Vec<Node>,
    seed: Option<u64>,
    mut launch: impl FnMut(&Node) -> Result<(), DeviceError>,
) -> Result<Replay, DeviceError> {
    let replay = match changed_nodes(&graph.nodes, &new) {
        Some(changed) => Replay::Updated { nodes: new.len(), changed: changed.len() },
        None => Replay::Built { nodes: new.len() },
    };
    match seed {
        None => {
            for n in &new {
                launch(n)?;
            }
        }
        Some(seed) => {
            let deps = node_deps(new.iter().map(|x| (x.kernel.kernel(), &x.words[..])), GraphOrder::Data);
            for j in shuffled_topological(&deps, seed) {
                launch(&new[j])?;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Param, ScalarType};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A kernel whose parameters are `shape`: 'r' a read-only f32 buffer, 'w' a read-write
    /// one, 's' a u32 scalar.
    fn kernel(shape: &str) -> Kernel {
        let mut k = Kernel::new(format!("k_{shape}"));
        for (i, c) in shape.chars().enumerate() {
            let kind = match c {
                'r' => ParamKind::Buffer { elem: ScalarType::F32, access: Access::Read },
                'w' => ParamKind::Buffer { elem: ScalarType::F32, access: Access::ReadWrite },
                _ => ParamKind::Scalar(ScalarType::U32),
            };
            k.params.push(Param { name: format!("p{i}"), kind });
        }
        k
    }

    /// The words of a launch of `k` passing `addrs` to its buffers in order (each with
    /// element count 4) and 7 to its scalars.
    fn words(k: &Kernel, addrs: &[u64]) -> Vec<u64> {
        let mut next = addrs.iter();
        let mut w = Vec::new();
        for p in &k.params {
            match p.kind {
                ParamKind::Buffer { .. } => w.extend([*next.next().unwrap(), 4]),
                ParamKind::Scalar(_) => w.push(7),
            }
        }
        w
    }

    #[test]
    fn a_chain_follows_the_recording() {
        let k = kernel("rw");
        let w = words(&k, &[1, 2]);
        let nodes = [(&k, &w[..]), (&k, &w[..]), (&k, &w[..])];
        assert_eq!(node_deps(nodes, GraphOrder::Chain), vec![vec![], vec![0], vec![1]]);
    }

    #[test]
    fn data_order_follows_writes_and_the_reads_before_a_write() {
        let (rw, srw, rrw, rw2, w1) = (kernel("rw"), kernel("srw"), kernel("rrw"), kernel("rww"), kernel("w"));
        // Buffers: 10 = x, 11 = a, 12 = b, 13 = c.
        let launches: Vec<(&Kernel, Vec<u64>)> = vec![
            (&rw, words(&rw, &[10, 11])),       // 0: reads x, writes a
            (&srw, words(&srw, &[11, 12])),     // 1: reads a, writes b
            (&rw, words(&rw, &[10, 13])),       // 2: reads x, writes c: free of 0 and 1
            (&w1, words(&w1, &[10])),           // 3: writes x: after its readers 0 and 2
            (&rrw, words(&rrw, &[12, 13, 11])), // 4: reads b and c, writes a: after 1 (a's reader) and 2
            (&rw2, words(&rw2, &[13, 13, 12])), // 5: c passed twice (read, then written), writes b
            (&rw, words(&rw, &[13, 12])),       // 6: reads c (written by 5), writes b
        ];
        let deps = node_deps(launches.iter().map(|(k, w)| (*k, &w[..])), GraphOrder::Data);
        assert_eq!(deps, vec![vec![], vec![0], vec![], vec![0, 2], vec![1, 2], vec![2, 4], vec![5]]);
    }

    #[test]
    fn a_shuffled_topological_order_keeps_every_edge_and_depends_on_the_seed() {
        // A diamond and a free node: 0 -> {1, 2} -> 3, and 4.
        let deps = vec![vec![], vec![0], vec![0], vec![1, 2], vec![]];
        let mut orders = std::collections::HashSet::new();
        for seed in 0..64 {
            let order = shuffled_topological(&deps, seed);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4], "every node once: {order:?}");
            let at = |j: usize| order.iter().position(|&x| x == j).unwrap();
            for (j, d) in deps.iter().enumerate() {
                assert!(d.iter().all(|&i| at(i as usize) < at(j)), "seed {seed}: {order:?}");
            }
            assert_eq!(shuffled_topological(&deps, seed), order, "a seed gives one order");
            orders.insert(order);
        }
        assert!(orders.len() >= 6, "the seeds give only {} orders", orders.len());
        let chain: Vec<Vec<u32>> = (0..5).map(|j: u32| if j == 0 { vec![] } else { vec![j - 1] }).collect();
        assert_eq!(shuffled_topological(&chain, 9), vec![0, 1, 2, 3, 4]);
    }

    /// Runs `nodes` in `order` over a memory of buffers, each node reading all its buffers and
    /// writing, to each read-write one, a value that depends on everything it read: returns
    /// what each node read and the memory at the end.
    fn run(nodes: &[(&Kernel, Vec<u64>)], order: &[usize]) -> (Vec<Vec<u64>>, Vec<(u64, u64)>) {
        let mut mem: HashMap<u64, u64> = HashMap::new();
        let mut seen = vec![Vec::new(); nodes.len()];
        for &j in order {
            let (k, w) = &nodes[j];
            let mut at = 0;
            let mut bufs = Vec::new();
            for p in &k.params {
                if let ParamKind::Buffer { access, .. } = p.kind {
                    bufs.push((w[at], access == Access::ReadWrite));
                    at += 2;
                } else {
                    at += 1;
                }
            }
            let read: Vec<u64> = bufs.iter().map(|(a, _)| *mem.get(a).unwrap_or(a)).collect();
            let mut h = j as u64 + 1;
            for v in &read {
                h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(*v);
            }
            for (i, (a, writes)) in bufs.iter().enumerate() {
                if *writes {
                    mem.insert(*a, h.wrapping_add(i as u64));
                }
            }
            seen[j] = read;
        }
        let mut end: Vec<(u64, u64)> = mem.into_iter().collect();
        end.sort_unstable();
        (seen, end)
    }

    /// Random launch lists: any order the data graph allows gives every node the inputs it
    /// has in recording order, and the same memory at the end. Dropping the graph's edges
    /// breaks that (so the check can fail).
    #[test]
    fn every_order_the_data_graph_allows_reads_and_leaves_what_the_recording_does() {
        let shapes: Vec<Kernel> =
            ["rw", "srw", "rrw", "w", "rws", "wrr", "ww", "r"].iter().map(|s| kernel(s)).collect();
        let mut rng = StdRng::seed_from_u64(5);
        let mut broken = 0;
        for _case in 0..200 {
            let n = rng.gen_range(1..24);
            let nodes: Vec<(&Kernel, Vec<u64>)> = (0..n)
                .map(|_| {
                    let k = &shapes[rng.gen_range(0..shapes.len())];
                    let bufs = k.params.iter().filter(|p| matches!(p.kind, ParamKind::Buffer { .. })).count();
                    let addrs: Vec<u64> = (0..bufs).map(|_| 100 + rng.gen_range(0..6)).collect();
                    (k, words(k, &addrs))
                })
                .collect();
            let recorded: Vec<usize> = (0..n).collect();
            let want = run(&nodes, &recorded);
            let deps = node_deps(nodes.iter().map(|(k, w)| (*k, &w[..])), GraphOrder::Data);
            for (j, d) in deps.iter().enumerate() {
                assert!(d.iter().all(|&i| (i as usize) < j), "node {j} depends on a later node: {d:?}");
            }
            for seed in 0..20 {
                let order = shuffled_topological(&deps, rng.gen::<u64>() ^ seed);
                assert_eq!(run(&nodes, &order), want, "order {order:?} under {deps:?}");
            }
            let free = vec![Vec::new(); n];
            if (0..20).any(|_| run(&nodes, &shuffled_topological(&free, rng.gen())) != want) {
                broken += 1;
            }
        }
        assert!(broken > 100, "without the edges only {broken} of 200 lists ran differently");
    }
}
