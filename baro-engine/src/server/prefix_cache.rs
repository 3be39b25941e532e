//! A small cache of finished sequences' states, keyed by the tokens each has been fed. A new
//! request whose prompt starts with a cached sequence's tokens takes that state and feeds only
//! the rest (a multi-turn chat resends its whole history). Reuse cannot change a result: the
//! state after feeding tokens t0..tk is the same whichever request fed them and however they
//! were batched, since every way of feeding a token computes what one m = 1 step computes
//! (batched prefill and the batched decode step run rows kernels proven equal to the m = 1
//! ones, the carried recurrent state included; the KV cache past the position is never read). The cache is bounded; the least recently stored
//! entry goes first. Never holds a failed or cancelled sequence's state.

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
