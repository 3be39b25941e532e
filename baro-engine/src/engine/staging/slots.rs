//! Staged decode: per layer a stack of expert slots in device memory (fused gate and up, down, each
//! `n_slots` matrices) and its LRU `SlotCache`. For each token and layer the router's ids come
//! back to the host (one synchronisation per layer: the price of staged decode), the cache
//! maps them to slots, copies for the misses are queued on the compute stream before the
//! expert kernels, and the slot ids go to a device buffer, so the same matvec kernels read
//! the same bytes by slot instead of by expert id. No kernel is launched here.

use baro_dsl::runtime::{Buffer, Device, DeviceError, Stream};
use baro_dsl::ScalarType;

use crate::engine::staging::cache::{CacheError, CacheStats, Miss, SlotCache};
use crate::engine::staging::store::ExpertStore;
use crate::engine::weights::{alloc_matrix, ExpertMatrices, MatrixShape};

/// What can go wrong mapping a layer's experts to slots.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// One layer's slots.
struct LayerSlots {
    cache: SlotCache,
    experts: ExpertMatrices, // gate and up: (slot, 2 · expert_ffn, hidden); down: (slot, hidden, expert_ffn)
}

/// The decode expert cache of every layer, with the store it copies from.
pub struct DecodeSlots {
    store: ExpertStore,
    layers: Vec<LayerSlots>,
    slot_ids: Buffer, // (top_k) u32: the slot of each top-k expert, for the matvecs' `ids`
    expert_ids: Vec<u32>,
    slots: Vec<u32>,
    misses: Vec<Miss>,
    copied: u64,
}

impl DecodeSlots {
    /// `n_slots` slots per layer (at least `top_k`) for every layer of `store`.
    pub fn new(device: &Device, store: ExpertStore, n_slots: usize, top_k: usize) -> Result<DecodeSlots, DeviceError> {
        let mut layers = Vec::with_capacity(store.n_layers());
        for l in 0..store.n_layers() {
            let [gu, d] = store.parts(l).map(|p| MatrixShape { n_mats: n_slots, ..p.shape });
            let n_experts = store.parts(l)[0].shape.n_mats;
            let experts = ExpertMatrices { gate_up: alloc_matrix(device, gu)?, down: alloc_matrix(device, d)? };
            layers.push(LayerSlots { cache: SlotCache::new(n_experts, n_slots), experts });
        }
        let slot_ids = device.alloc(ScalarType::U32, top_k)?;
        Ok(DecodeSlots {
            store,
            layers,
            slot_ids,
            expert_ids: Vec::new(),
            slots: Vec::new(),
            misses: Vec::new(),
            copied: 0,
        })
    }

    pub fn store(&self) -> &ExpertStore {
        &self.store
    }

    pub fn n_slots(&self) -> usize {
        self.layers.first().map_or(0, |l| l.cache.n_slots())
    }

    /// Reads the router's `expert_ids` (top-k u32 on the device; waits for `stream`), maps
    /// them to `layer`'s slots, queues the misses' copies on `stream`, and writes the slot
    /// ids. Returns the slot stacks and the slot-id buffer, to launch the expert matvecs with
    /// in place of the resident stacks and the expert ids.
    pub fn map(
        &mut self,
        device: &Device,
        stream: &Stream,
        layer: usize,
        expert_ids: &Buffer,
    ) -> Result<(&ExpertMatrices, &Buffer), SlotError> {
        let n_layers = self.layers.len();
        let l = self.layers.get_mut(layer).ok_or_else(|| DeviceError::Mismatch {
            what: "decode slots",
            expected: format!("a layer below {n_layers}"),
            found: layer.to_string(),
        })?;
        stream.synchronize()?;
        self.expert_ids = device.read::<u32>(expert_ids)?;
        l.cache.lookup(&self.expert_ids, &mut self.slots, &mut self.misses)?;
        // Synchronous, but the stream is idle here: the copies below are queued after it.
        device.write(&mut self.slot_ids, &self.slots)?;
        for m in &self.misses {
            self.copied +=
                self.store.copy_expert(device, stream, layer, m.expert as usize, &mut l.experts, m.slot as usize)?
                    as u64;
        }
        Ok((&l.experts, &self.slot_ids))
    }

    /// Each layer's counters.
    pub fn layer_stats(&self) -> Vec<CacheStats> {
        self.layers.iter().map(|l| l.cache.stats()).collect()
    }

    /// All layers' counters summed.
    pub fn stats(&self) -> CacheStats {
        let mut s = CacheStats::default();
        for l in &self.layers {
            s += l.cache.stats();
        }
        s
    }

    /// Bytes copied from the store into slots so far.
    pub fn copied_bytes(&self) -> u64 {
        self.copied
    }
}
