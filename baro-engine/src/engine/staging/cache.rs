//! The decode expert cache's bookkeeping for one layer: which expert sits in which device
//! slot, least-recently-used eviction, and hit/miss counters. Pure and deterministic (a
//! logical clock, ties to the lowest slot): the same id sequence gives the same slots and the
//! same counters on every run and target. Holds no device memory and queues no copy.

/// Counters of one cache (or a sum of several). `lookups = hits + misses` always.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Expert ids looked up (top-k per token per layer).
    pub lookups: u64,
    pub hits: u64,
    /// Ids whose expert had to be copied in.
    pub misses: u64,
    /// Misses that replaced another expert (the rest filled an empty slot).
    pub evictions: u64,
}

impl CacheStats {
    pub fn hit_rate(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.hits as f64 / self.lookups as f64
        }
    }
}

impl std::ops::AddAssign for CacheStats {
    fn add_assign(&mut self, o: CacheStats) {
        self.lookups += o.lookups;
        self.hits += o.hits;
        self.misses += o.misses;
        self.evictions += o.evictions;
    }
}

/// An expert to copy into a slot before the kernels read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Miss {
    pub expert: u32,
    pub slot: u32,
}

/// Ids the router cannot have produced: a bug in baro (the router kernel or the wiring).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("expert cache: expected expert ids below {n_experts}, found {found} (a bug in baro)")]
    IdOutOfRange { found: u32, n_experts: usize },
    #[error("expert cache: expected distinct expert ids in one lookup, found {id} twice (a bug in baro)")]
    Duplicate { id: u32 },
    #[error("expert cache: expected at most {n_slots} ids in one lookup (the slot count), found {found}")]
    TooMany { found: usize, n_slots: usize },
}

/// One layer's slot map.
#[derive(Clone, Debug)]
pub struct SlotCache {
    slot_of: Vec<Option<u32>>,   // (expert): its slot, if cached
    expert_in: Vec<Option<u32>>, // (slot): its expert, if filled
    last_used: Vec<u64>,         // (slot): the lookup that last used it; 0 = never
    clock: u64,
    stats: CacheStats,
}

impl SlotCache {
    pub fn new(n_experts: usize, n_slots: usize) -> SlotCache {
        SlotCache {
            slot_of: vec![None; n_experts],
            expert_in: vec![None; n_slots],
            last_used: vec![0; n_slots],
            clock: 0,
            stats: CacheStats::default(),
        }
    }

    pub fn n_slots(&self) -> usize {
        self.expert_in.len()
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// The slot holding `expert`, if any.
    pub fn slot_of(&self, expert: u32) -> Option<u32> {
        self.slot_of.get(expert as usize).copied().flatten()
    }

    /// Maps one token's distinct expert `ids` to slots: `slots[s]` is the slot of `ids[s]`.
    /// Hits keep their slots; each miss takes the least recently used slot that this lookup
    /// does not use (an empty one first, lowest index on ties), and is pushed to `misses` for
    /// the caller to copy in. On error nothing changes.
    pub fn lookup(&mut self, ids: &[u32], slots: &mut Vec<u32>, misses: &mut Vec<Miss>) -> Result<(), CacheError> {
        if ids.len() > self.n_slots() {
            return Err(CacheError::TooMany { found: ids.len(), n_slots: self.n_slots() });
        }
        for (i, &id) in ids.iter().enumerate() {
            if id as usize >= self.slot_of.len() {
                return Err(CacheError::IdOutOfRange { found: id, n_experts: self.slot_of.len() });
            }
            if ids[..i].contains(&id) {
                return Err(CacheError::Duplicate { id });
            }
        }
        self.clock += 1;
        let now = self.clock;
        // Hits first, so no miss can evict an expert this token uses.
        for &id in ids {
            if let Some(slot) = self.slot_of[id as usize] {
                self.last_used[slot as usize] = now;
            }
        }
        slots.clear();
        misses.clear();
        for &id in ids {
            self.stats.lookups += 1;
            if let Some(slot) = self.slot_of[id as usize] {
                self.stats.hits += 1;
                slots.push(slot);
                continue;
            }
            // At most n_slots ids, all of whose slots are marked `now`: an unmarked one exists.
            let victim = (0..self.n_slots())
                .filter(|&s| self.last_used[s] != now)
                .min_by_key(|&s| (self.last_used[s], s))
                .unwrap_or(0);
            if let Some(old) = self.expert_in[victim].take() {
                self.slot_of[old as usize] = None;
                self.stats.evictions += 1;
            }
            self.stats.misses += 1;
            self.expert_in[victim] = Some(id);
            self.slot_of[id as usize] = Some(victim as u32);
            self.last_used[victim] = now;
            slots.push(victim as u32);
            misses.push(Miss { expert: id, slot: victim as u32 });
        }
        Ok(())
    }
}
