//! Identity across memory modes: a budget that forces the routed experts into pinned host
//! memory, with few decode slots so misses and evictions happen on every prompt, gives logits
//! byte-identical to the resident engine at every position of every fixture prompt, and the
//! same greedy tokens; the cache's counters add up. F32 safetensors and a Q8_0 GGUF (raw
//! quantized blocks through the slots). Runs on the host, or with `BARO_TEST_DEVICE=cuda`.

use crate::common;

use baro_engine::engine::staging::{CacheStats, MemoryMode};
use baro_engine::engine::{Engine, EngineOptions, ModelSource};
use baro_engine::model::{GgufFile, HfCheckpoint, TensorType};
use common::{canonical_f32, dev, fixture, gguf_from, pick_type};

const MAX_CTX: usize = 128;

/// Every prompt of the fixture followed by its greedy tokens.
fn sequences(name: &str) -> Vec<(Vec<u32>, Vec<u32>)> {
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(name).join("index.json")).unwrap()).unwrap();
    let ids =
        |v: &serde_json::Value| v.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect::<Vec<_>>();
    index["prompts"].as_array().unwrap().iter().map(|p| (ids(&p["tokens"]), ids(&p["greedy"]))).collect()
}

fn engine(source: &ModelSource, vram_budget: Option<u64>, expert_slots: usize) -> Engine {
    Engine::new(
        dev(),
        source,
        EngineOptions { max_ctx: MAX_CTX, vram_budget, expert_slots, ..EngineOptions::default() },
    )
    .unwrap()
}

/// Logits (as bits) of every position of every sequence, then greedy generation from each
/// prompt.
fn run(e: &mut Engine, seqs: &[(Vec<u32>, Vec<u32>)]) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let mut logits = Vec::new();
    for (prompt, greedy) in seqs {
        e.reset().unwrap();
        logits.push(prompt.iter().chain(greedy).flat_map(|&t| e.step(t).unwrap()).map(f32::to_bits).collect());
    }
    let tokens = seqs.iter().map(|(prompt, greedy)| e.generate(prompt, greedy.len()).unwrap()).collect();
    (logits, tokens)
}

fn staged_equals_resident(source: &ModelSource, what: &str, slot_counts: &[usize]) {
    let seqs = sequences("tiny");
    let mut resident = engine(source, None, 64);
    assert_eq!(resident.model.memory_plan().mode, MemoryMode::Resident);
    assert!(resident.model.expert_cache_stats().is_none());
    let (want_logits, want_tokens) = run(&mut resident, &seqs);
    let needs = resident.model.memory_plan().needs.clone();
    let cfg = resident.model.config().clone();
    for &slots in slot_counts {
        // Exactly the staged layout with `slots` slots (two staging sets of a whole layer
        // included: with 4 layers of 8 experts, at most 3 slots stay below resident).
        let budget = needs.staged(slots);
        assert!(budget < needs.resident(), "{what}: the staged layout must be smaller than resident");
        let mut staged = engine(source, Some(budget), 64);
        assert_eq!(
            staged.model.memory_plan().mode,
            MemoryMode::Staged { slots, asked: 64.min(cfg.n_experts) },
            "{what}"
        );
        let (logits, tokens) = run(&mut staged, &seqs);
        for (i, (a, b)) in want_logits.iter().zip(&logits).enumerate() {
            let differ = a.iter().zip(b).filter(|(x, y)| x != y).count();
            assert_eq!(
                (a.len(), differ),
                (b.len(), 0),
                "{what}, {slots} slots, prompt {i}: {differ} of {} logits differ in bits",
                a.len()
            );
        }
        assert_eq!(tokens, want_tokens, "{what}, {slots} slots: greedy tokens differ");
        let s = staged.model.expert_cache_stats().unwrap();
        let positions: usize = seqs.iter().map(|(p, g)| 2 * p.len() + g.len() + g.len().saturating_sub(1)).sum();
        let lookups = (positions * cfg.n_layers * cfg.n_experts_used) as u64;
        let slots_info = staged.model.decode_slots().unwrap();
        let mut per_layer = CacheStats::default();
        for l in slots_info.layer_stats() {
            assert_eq!(l.hits + l.misses, l.lookups);
            per_layer += l;
        }
        println!(
            "{what}, {slots} slots: {s:?}, {:.1} % hits, {} bytes copied",
            100.0 * s.hit_rate(),
            slots_info.copied_bytes()
        );
        assert_eq!(per_layer, s);
        assert_eq!(
            (s.lookups, s.hits + s.misses),
            (lookups, lookups),
            "{what}: one lookup per top-k expert per layer per step"
        );
        assert!(
            s.hits > 0 && s.misses > 0 && s.evictions > 0,
            "{what}, {slots} slots: expected hits, misses and evictions, found {s:?}"
        );
        assert!(s.misses >= (cfg.n_layers * slots) as u64, "the first fills of every slot are misses");
        assert_eq!(
            s.misses - s.evictions,
            (cfg.n_layers * slots) as u64,
            "every slot is filled once, every other miss evicts"
        );
        let per_expert: u64 = needs.per_expert.iter().sum::<u64>() / cfg.n_layers as u64;
        if needs.per_expert.iter().all(|&b| b == per_expert) {
            assert_eq!(
                slots_info.copied_bytes(),
                s.misses * per_expert,
                "each miss copies one expert's three matrices"
            );
        }
    }
}

#[test]
fn tiny_f32_staged_logits_and_tokens_equal_resident_bytes() {
    let source = ModelSource::Hf(HfCheckpoint::open(&fixture("tiny")).unwrap());
    staged_equals_resident(&source, "tiny f32", &[2, 3]);
}

#[test]
fn tiny_q8_0_gguf_staged_logits_and_tokens_equal_resident_bytes() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let bytes = gguf_from(&ck.config, &canonical_f32(&ck), &|shape| pick_type(TensorType::Q8_0, shape));
    let source = ModelSource::Gguf(GgufFile::from_vec(bytes).unwrap());
    staged_equals_resident(&source, "tiny q8_0", &[3]);
}

/// Batched prefill in staged mode streams every layer through the two staging sets: its logits
/// at every prompt position equal the resident batched prefill's and the staged replay's, and
/// the decode steps after it (through the slot cache) equal the resident ones.
fn staged_prefill_equals_resident(source: &ModelSource, what: &str) {
    use baro_engine::engine::{Logits, PrefillMode};
    let mut resident = engine(source, None, 64);
    let needs = resident.model.memory_plan().needs.clone();
    let mut staged = engine(source, Some(needs.staged(2)), 64);
    assert!(matches!(staged.model.memory_plan().mode, MemoryMode::Staged { slots: 2, .. }));
    for (n, (prompt, greedy)) in sequences("tiny").iter().enumerate() {
        // Longer prompts (prompt ++ greedy) so that chunks of 5 cross chunk boundaries.
        let tokens: Vec<u32> = prompt.iter().chain(greedy).copied().collect();
        let run = |e: &mut Engine, mode: PrefillMode| {
            e.reset().unwrap();
            let mut bits: Vec<u32> =
                e.prefill(&tokens, mode, Logits::All).unwrap().logits.iter().map(|v| v.to_bits()).collect();
            for &t in &greedy[..4.min(greedy.len())] {
                bits.extend(e.step(t).unwrap().iter().map(|v| v.to_bits()));
            }
            bits
        };
        let want = run(&mut resident, PrefillMode::Batched { chunk: 5 });
        let got = run(&mut staged, PrefillMode::Batched { chunk: 5 });
        let replay = run(&mut staged, PrefillMode::Replay);
        let differ = want.iter().zip(&got).filter(|(a, b)| a != b).count();
        assert_eq!(
            (want.len(), differ),
            (got.len(), 0),
            "{what} prompt {n}: staged batched prefill vs resident: {differ} logits differ in bits"
        );
        assert_eq!(replay, want, "{what} prompt {n}: staged replay vs resident batched");
    }
}

#[test]
fn tiny_f32_staged_batched_prefill_equals_resident_bytes() {
    staged_prefill_equals_resident(&ModelSource::Hf(HfCheckpoint::open(&fixture("tiny")).unwrap()), "tiny f32");
}

#[test]
fn tiny_q8_0_staged_batched_prefill_equals_resident_bytes() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let bytes = gguf_from(&ck.config, &canonical_f32(&ck), &|shape| pick_type(TensorType::Q8_0, shape));
    staged_prefill_equals_resident(&ModelSource::Gguf(GgufFile::from_vec(bytes).unwrap()), "tiny q8_0");
}
