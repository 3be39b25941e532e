//! Two caches of sequence states for prompts that share a beginning. `PrefixCache`: finished
//! sequences' states, keyed by the tokens each has been fed. A new
//! request whose prompt starts with a cached sequence's tokens takes that state and feeds only
//! the rest (a multi-turn chat resends its whole history). Reuse cannot change a result: the
//! state after feeding tokens t0..tk is the same whichever request fed them and however they
//! were batched, since every way of feeding a token computes what one m = 1 step computes
//! (batched prefill and the batched decode step run rows kernels proven equal to the m = 1
//! ones, the carried recurrent state included; the KV cache past the position is never read). The cache is bounded; the least recently stored
//! entry goes first. Never holds a failed or cancelled sequence's state. `BlockCache`: states
//! saved during prefill at every boundary of `block` tokens, for prompts that share any
//! whole-block prefix with an earlier one (a system prompt, a repeated prompt).

use crate::engine::State;
use crate::tokenizer::TokenId;

struct Entry {
    /// What the state has been fed, in order (`state.pos == fed.len()`).
    fed: Vec<TokenId>,
    state: State,
}

pub struct PrefixCache {
    /// Oldest first.
    entries: Vec<Entry>,
    capacity: usize,
}

impl PrefixCache {
    /// A cache of at most `capacity` states; 0 turns it off.
    pub fn new(capacity: usize) -> PrefixCache {
        PrefixCache { entries: Vec::new(), capacity }
    }

    pub fn is_enabled(&self) -> bool {
        self.capacity > 0
    }

    /// The length of the prefix `take` would reuse, without taking it.
    pub fn peek(&self, prompt: &[TokenId]) -> usize {
        self.entries
            .iter()
            .filter(|e| !e.fed.is_empty() && e.fed.len() < prompt.len() && prompt.starts_with(&e.fed))
            .map(|e| e.fed.len())
            .max()
            .unwrap_or(0)
    }

    /// Takes out the state fed the longest prefix of `prompt` that leaves at least one prompt
    /// token to feed (its logits are needed), with that prefix's length.
    pub fn take(&mut self, prompt: &[TokenId]) -> Option<(State, usize)> {
        let best = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.fed.is_empty() && e.fed.len() < prompt.len() && prompt.starts_with(&e.fed))
            .max_by_key(|(i, e)| (e.fed.len(), *i))?
            .0;
        let entry = self.entries.remove(best);
        Some((entry.state, entry.fed.len()))
    }

    /// Keeps `state`, fed `fed`; drops the oldest entry when full, and any entry with the same
    /// tokens.
    pub fn put(&mut self, fed: Vec<TokenId>, state: State) {
        if self.capacity == 0 || fed.is_empty() || state.pos != fed.len() {
            return;
        }
        self.entries.retain(|e| e.fed != fed);
        if self.entries.len() == self.capacity {
            self.entries.remove(0);
        }
        self.entries.push(Entry { fed, state });
    }
}

/// States saved at block boundaries of prompts, keyed by a hash chained over the blocks of
/// tokens before the boundary: a later prompt sharing any whole-block prefix (a system prompt,
/// a repeated prompt, few-shot examples) starts from a copy of the state at its longest shared
/// boundary. The entries stay (a hit copies the state), least recently used first out. A hit
/// is checked token for token, never trusted to the hash. Reuse cannot change a result, for
/// the reason above: the state after t0..tk is the same however they were fed.
pub struct BlockCache {
    /// Tokens per block; boundaries are at multiples of it.
    block: usize,
    capacity: usize,
    /// Least recently used first.
    entries: Vec<BlockEntry>,
}

struct BlockEntry {
    key: u64,
    /// The prefix the state has been fed (a multiple of `block` tokens).
    fed: Vec<TokenId>,
    state: State,
}

impl BlockCache {
    /// At most `capacity` states at boundaries every `block` tokens; either 0 turns it off.
    pub fn new(block: usize, capacity: usize) -> BlockCache {
        BlockCache { block, capacity, entries: Vec::new() }
    }

    pub fn is_enabled(&self) -> bool {
        self.block > 0 && self.capacity > 0
    }

    /// Tokens to the next boundary after `pos` (feeding stops there so it can be saved).
    pub fn to_boundary(&self, pos: usize) -> usize {
        if self.is_enabled() {
            self.block - pos % self.block
        } else {
            usize::MAX
        }
    }

    /// The key of each whole block of `tokens`: key i covers `tokens[..(i + 1) * block]`.
    fn keys(&self, tokens: &[TokenId]) -> Vec<u64> {
        use std::hash::{Hash, Hasher};
        let mut keys = Vec::with_capacity(tokens.len() / self.block.max(1));
        let mut prev = 0u64;
        for block in tokens.chunks_exact(self.block.max(1)) {
            // SipHash with fixed keys: the same chain in every run.
            let mut h = std::hash::DefaultHasher::new();
            prev.hash(&mut h);
            block.hash(&mut h);
            prev = h.finish();
            keys.push(prev);
        }
        keys
    }

    /// The state at the longest boundary shared with `prompt` that leaves at least one prompt
    /// token to feed, with its length; the entry becomes the most recently used.
    pub fn lookup(&mut self, prompt: &[TokenId]) -> Option<(&State, usize)> {
        if !self.is_enabled() || prompt.len() <= self.block {
            return None;
        }
        let keys = self.keys(&prompt[..prompt.len() - 1]);
        let found = keys.iter().enumerate().rev().find_map(|(i, key)| {
            let len = (i + 1) * self.block;
            self.entries.iter().position(|e| e.key == *key && e.fed[..] == prompt[..len])
        })?;
        let entry = self.entries.remove(found);
        self.entries.push(entry);
        self.entries.last().map(|e| (&e.state, e.fed.len()))
    }

    /// Whether the state after `fed` should be saved: at a boundary, not held yet.
    pub fn wants(&self, fed: &[TokenId]) -> bool {
        if !self.is_enabled() || fed.is_empty() || fed.len() % self.block != 0 {
            return false;
        }
        let key = self.keys(fed).last().copied();
        !self.entries.iter().any(|e| Some(e.key) == key && e.fed == fed)
    }

    /// Keeps `state`, fed `fed` (a boundary `wants` accepted); drops the least recently used
    /// entry when full.
    pub fn put(&mut self, fed: Vec<TokenId>, state: State) {
        if !self.wants(&fed) || state.pos != fed.len() {
            return;
        }
        let Some(key) = self.keys(&fed).last().copied() else { return };
        if self.entries.len() == self.capacity {
            self.entries.remove(0);
        }
        self.entries.push(BlockEntry { key, fed, state });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
