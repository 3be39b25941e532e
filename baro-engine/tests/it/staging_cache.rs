//! The expert cache's bookkeeping (`engine::staging::SlotCache`): slots fill in order, the
//! least recently used expert is evicted, a miss never evicts an expert its own lookup hits, and
//! bad ids are errors that change nothing. (Unit tests of `staging/cache.rs` before; here so the
//! engine's library is not compiled a second time as a test harness.)

use baro_engine::engine::staging::{CacheError, CacheStats, Miss, SlotCache};

fn look(c: &mut SlotCache, ids: &[u32]) -> (Vec<u32>, Vec<Miss>) {
    let (mut s, mut m) = (Vec::new(), Vec::new());
    c.lookup(ids, &mut s, &mut m).unwrap();
    (s, m)
}

#[test]
fn fills_empty_slots_in_order_then_evicts_the_least_recently_used() {
    let mut c = SlotCache::new(8, 3);
    assert_eq!(look(&mut c, &[5, 2]), (vec![0, 1], vec![Miss { expert: 5, slot: 0 }, Miss { expert: 2, slot: 1 }]));
    assert_eq!(look(&mut c, &[2, 7]), (vec![1, 2], vec![Miss { expert: 7, slot: 2 }]));
    // Slot 0 (expert 5) is the least recently used.
    assert_eq!(look(&mut c, &[1, 7]), (vec![0, 2], vec![Miss { expert: 1, slot: 0 }]));
    assert_eq!(c.slot_of(5), None);
    assert_eq!(c.stats(), CacheStats { lookups: 6, hits: 2, misses: 4, evictions: 1 });
}

#[test]
fn a_miss_never_evicts_an_expert_the_same_lookup_hits() {
    let mut c = SlotCache::new(8, 2);
    look(&mut c, &[0, 1]);
    look(&mut c, &[1]);
    // 0 is older than 1, but 0 is a hit here: the miss must take 1's slot.
    let (slots, misses) = look(&mut c, &[3, 0]);
    assert_eq!(slots, vec![1, 0]);
    assert_eq!(misses, vec![Miss { expert: 3, slot: 1 }]);
}

#[test]
fn bad_ids_are_errors_and_change_nothing() {
    let mut c = SlotCache::new(4, 2);
    look(&mut c, &[1]);
    let (mut s, mut m) = (Vec::new(), Vec::new());
    assert_eq!(
        c.lookup(&[4], &mut s, &mut m).unwrap_err().to_string(),
        "expert cache: expected expert ids below 4, found 4 (a bug in baro)"
    );
    assert_eq!(c.lookup(&[2, 2], &mut s, &mut m).unwrap_err(), CacheError::Duplicate { id: 2 });
    assert_eq!(c.lookup(&[0, 1, 2], &mut s, &mut m).unwrap_err(), CacheError::TooMany { found: 3, n_slots: 2 });
    assert_eq!(c.stats(), CacheStats { lookups: 1, hits: 0, misses: 1, evictions: 0 });
}
