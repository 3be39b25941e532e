//! Whole-layer staging for prefill: a prefill chunk routes its tokens to nearly every expert
//! of a layer, so instead of the decode cache it streams all of a layer's experts into one of
//! two device sets on a copy stream while the previous layer computes. Ordering is by events
//! only, never by a host wait: the copy into a set waits for the compute that last read it
//! (`release`), and the compute that reads it waits for the copy (`wait`).
//!
//! The loop `engine::prefill` runs (one compute stream, sets alternating by layer):
//!
//! ```text
//! staging.stage(device, store, 0, 0)?;
//! for layer in 0..n_layers {
//!     let set = layer % 2;
//!     if layer + 1 < n_layers { staging.stage(device, store, layer + 1, 1 - set)?; }
//!     let experts = staging.wait(compute, set)?;   // stacks by expert id, as if resident
//!     ... queue layer `layer`'s MoE on `compute` with `experts` ...
//!     staging.release(compute, set)?;
//! }
//! ```
//!
//! Each set is sized for the largest layer per part (layers may store different quant types);
//! `wait` hands out the set with the staged layer's shapes. Never launches a kernel.

use baro_dsl::runtime::{Device, DeviceError, Event, Stream};

use crate::engine::staging::store::ExpertStore;
use crate::engine::weights::{alloc_matrix, storage_elem, ExpertMatrices};

struct StagingSet {
    experts: ExpertMatrices, // each part: the largest layer's (expert, row, col) bytes
    layer: Option<usize>,
    staged: Event,   // on the copy stream, after the layer's copies
    released: Event, // on the compute stream, after the last work that reads the set
}

/// Two device sets of a whole layer's routed experts and the copy stream that fills them.
pub struct LayerStaging {
    copy: Stream,
    sets: [StagingSet; 2],
    copied: u64,
    stages: u64,
}

impl LayerStaging {
    /// Two sets, each big enough for any layer of `store`. Layers must agree on each part's
    /// device element type (all quantized, or one float type), as one buffer serves them all.
    pub fn new(device: &Device, store: &ExpertStore) -> Result<LayerStaging, DeviceError> {
        let part = |p: usize| -> Result<crate::engine::weights::Matrix, DeviceError> {
            // The largest layer's shape of this part; its bytes bound every layer's.
            let largest = (0..store.n_layers()).map(|l| store.parts(l)[p].shape).max_by_key(|s| s.bytes());
            let Some(largest) = largest else {
                return Err(DeviceError::Mismatch {
                    what: "layer staging",
                    expected: "a store with at least one layer".into(),
                    found: "none".into(),
                });
            };
            for l in 0..store.n_layers() {
                let ty = store.parts(l)[p].shape.ty;
                if storage_elem(ty) != storage_elem(largest.ty) {
                    return Err(DeviceError::Mismatch {
                        what: "layer staging",
                        expected: format!(
                            "one device element type per expert matrix across layers ({})",
                            storage_elem(largest.ty)
                        ),
                        found: format!("{ty} in layer {l}"),
                    });
                }
            }
            alloc_matrix(device, largest)
        };
        let set = || -> Result<StagingSet, DeviceError> {
            let experts = ExpertMatrices { gate_up: part(0)?, down: part(1)? };
            Ok(StagingSet { experts, layer: None, staged: device.new_event()?, released: device.new_event()? })
        };
        Ok(LayerStaging { copy: device.new_stream()?, sets: [set()?, set()?], copied: 0, stages: 0 })
    }

    /// The copy stream the sets are filled on.
    pub fn copy_stream(&self) -> &Stream {
        &self.copy
    }

    /// Queues the copies of all of `layer`'s experts into set `set` (0 or 1) on the copy
    /// stream, after the compute work that last read the set (its `release`), and records the
    /// set's staged event. Returns at once.
    pub fn stage(&mut self, device: &Device, store: &ExpertStore, layer: usize, set: usize) -> Result<(), DeviceError> {
        if layer >= store.n_layers() {
            return Err(DeviceError::Mismatch {
                what: "layer staging",
                expected: format!("a layer below {}", store.n_layers()),
                found: layer.to_string(),
            });
        }
        let s = self.sets.get_mut(set).ok_or_else(|| bad_set(set))?;
        self.copy.wait_event(&s.released)?;
        let bytes = store.copy_layer(device, &self.copy, layer, &mut s.experts)?;
        s.staged.record(&self.copy)?;
        s.layer = Some(layer);
        self.copied += bytes as u64;
        self.stages += 1;
        Ok(())
    }

    /// Makes `compute` wait for set `set`'s copies and returns its experts, stacked by expert
    /// id with the staged layer's shapes.
    pub fn wait(&self, compute: &Stream, set: usize) -> Result<&ExpertMatrices, DeviceError> {
        let s = self.set(set)?;
        if s.layer.is_none() {
            return Err(DeviceError::Mismatch {
                what: "layer staging",
                expected: format!("set {set} staged before use"),
                found: "a set never staged".into(),
            });
        }
        compute.wait_event(&s.staged)?;
        Ok(&s.experts)
    }

    /// Records on `compute` that everything reading set `set` has been queued; the next
    /// `stage` into it waits for that point.
    pub fn release(&mut self, compute: &Stream, set: usize) -> Result<(), DeviceError> {
        self.set(set)?.released.record(compute)
    }

    /// The layer set `set` holds (or is being filled with).
    pub fn layer_in(&self, set: usize) -> Option<usize> {
        self.sets.get(set).and_then(|s| s.layer)
    }

    /// Device bytes of both sets.
    pub fn device_bytes(&self) -> u64 {
        self.sets.iter().flat_map(|s| s.experts.parts()).map(|m| m.buf.byte_len() as u64).sum()
    }

    /// Layers staged so far.
    pub fn stages(&self) -> u64 {
        self.stages
    }

    /// Bytes queued for copying so far.
    pub fn copied_bytes(&self) -> u64 {
        self.copied
    }

    fn set(&self, set: usize) -> Result<&StagingSet, DeviceError> {
        self.sets.get(set).ok_or_else(|| bad_set(set))
    }
}

fn bad_set(set: usize) -> DeviceError {
    DeviceError::Mismatch { what: "layer staging", expected: "set 0 or 1".into(), found: set.to_string() }
}
