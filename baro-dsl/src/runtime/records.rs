//! The error-record ring of a GPU stream, written once for CUDA and HIP: one zeroed
//! `ErrorRecord` slot per launch since the stream's last check, so launches stay
//! asynchronous and a failed bounds check is still attributed to the right kernel with the
//! host's message. Replayed graphs (CUDA) bring their own records and are listed among the
//! pending work in launch order. The backend owns the slots' device memory and the copies;
//! this module keeps the order and turns records into errors. It never reads a record
//! itself: the backend reads them only after the stream has finished the launches.

use super::abi::RECORD_WORDS;
use super::device::{DeviceError, DeviceKernel};
use super::error::describe_record;
use crate::ir::Kernel;
use crate::lower::ErrorRecord;

/// Slots per stream: launches between two checks before the stream checks by itself.
pub(crate) const RECORD_SLOTS: usize = 1024;

/// A stream's record slots (`M`: device memory of `RECORD_SLOTS` records) and the work that
/// wrote them, in launch order; `G`: a replayed graph's pending records.
pub(crate) struct Ring<M, G> {
    pub(crate) slots: M,
    /// Slots taken since the last check: the `Launch` entries of `pending`, in order.
    used: usize,
    pending: Vec<Pending<G>>,
}

enum Pending<G> {
    /// A launch; its slot is its index among the `Launch` entries.
    Launch { kernel: DeviceKernel, lens: Vec<u64> },
    /// A replayed graph, whose nodes write their own records.
    Graph(G),
}

impl<M, G> Ring<M, G> {
    pub(crate) fn new(slots: M) -> Self {
        Ring { slots, used: 0, pending: Vec::new() }
    }

    /// Every slot is taken: check before the next launch.
    pub(crate) fn is_full(&self) -> bool {
        self.used == RECORD_SLOTS
    }

    /// The slot the next launch writes.
    pub(crate) fn next_slot(&self) -> usize {
        self.used
    }

    /// A launch of `kernel` (element counts `lens`) took `next_slot`.
    pub(crate) fn launched(&mut self, kernel: DeviceKernel, lens: Vec<u64>) {
        self.used += 1;
        self.pending.push(Pending::Launch { kernel, lens });
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    /// A graph was launched; listed once however often it is launched before the check.
    pub(crate) fn graph_launched(&mut self, g: G, same: impl Fn(&G) -> bool) {
        if !self.pending.iter().any(|p| matches!(p, Pending::Graph(x) if same(x))) {
            self.pending.push(Pending::Graph(g));
        }
    }

    /// Reads and clears the records of all pending work and describes the first failure in
    /// launch order. `read(slots, n)` returns the first `n` slots' words and zeroes them;
    /// `graph` does the same for a graph's own records (every graph's, also after a failure).
    /// The caller has waited for the stream.
    pub(crate) fn check(
        &mut self,
        read: impl FnOnce(&mut M, usize) -> Result<Vec<u64>, DeviceError>,
        mut graph: impl FnMut(&G) -> Result<Option<DeviceError>, DeviceError>,
    ) -> Result<Option<DeviceError>, DeviceError> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let ring = read(&mut self.slots, self.used)?;
        let pending = std::mem::take(&mut self.pending);
        self.used = 0;
        let mut first = None;
        let mut launches = ring.chunks_exact(RECORD_WORDS);
        for p in &pending {
            match p {
                Pending::Launch { kernel, lens } => {
                    let w = launches.next().unwrap_or(&[0; RECORD_WORDS]);
                    if first.is_none() {
                        first = describe(kernel.kernel(), w, lens);
                    }
                }
                Pending::Graph(g) => {
                    let failed = graph(g)?;
                    first = first.or(failed);
                }
            }
        }
        Ok(first)
    }
}

/// The error one record's words stand for, if the launch that owns it failed.
pub(crate) fn describe(kernel: &Kernel, w: &[u64], lens: &[u64]) -> Option<DeviceError> {
    match w {
        [kind, id, index, signed] if *kind != 0 => {
            let rec = ErrorRecord { kind: *kind, id: *id, index: *index, signed: *signed };
            Some(DeviceError::Launch(describe_record(kernel, rec, lens)))
        }
        _ => None,
    }
}
