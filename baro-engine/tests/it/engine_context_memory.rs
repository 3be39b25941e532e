//! What a context length costs on the device (`ContextMemory`): the figures for a 128k
//! context on the real model's shapes (40 layers: 10 attention with 2 KV heads of 256, 30 GDN
//! with 32 value heads of 128 × 128 keys), written in ARCHITECTURE.md, and the arithmetic held
//! to what `State::new` and `Scratch::new` allocate, on the tiny shapes at several lengths.

use crate::common::dev;

use baro_engine::engine::{ContextMemory, Scratch, State};
use baro_engine::model::LayerKind;
use baro_engine::pack::presets;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

#[test]
fn a_128k_context_of_the_real_model() {
    let cfg = presets::real();
    let kinds = |k: LayerKind| cfg.layer_kinds.iter().filter(|&&x| x == k).count();
    assert_eq!((cfg.n_layers, kinds(LayerKind::Attention), kinds(LayerKind::Gdn)), (40, 10, 30));
    assert_eq!((cfg.n_kv_heads, cfg.head_dim, cfg.n_heads), (2, 256, 16));
    let m = ContextMemory::new(&cfg, 128 << 10, 512);
    // 10 layers · (K, V) · 131072 positions · 2 heads · 256 dims · 4 bytes.
    assert_eq!(m.kv_cache, 10 * 2 * 131_072 * 2 * 256 * 4);
    assert_eq!(m.kv_cache, 5 * GIB);
    // 30 layers · (conv ring 8192 channels · 3 + delta rule 32 · 128 · 128) · 4 bytes.
    assert_eq!(m.gdn_state, 30 * (8192 * 3 + 32 * 128 * 128) * 4);
    assert_eq!(m.gdn_state, 65_863_680);
    assert_eq!(m.rope_table, 32 * MIB);
    assert_eq!(m.decode_scratch, 10_431_472);
    assert_eq!(m.state(), 5_478_558_704);
    // Attention's probabilities are 512 rows · 16 heads · 131072 positions · 4 bytes = 4 GiB of it.
    assert_eq!(m.chunk_scratch, 4_623_106_884);
    assert!(m.chunk_scratch - 4 * GIB < 320 * MIB);
    assert_eq!(m.total(1), 5_478_558_704 + 4_623_106_884);
    // The GDN state does not grow with the context; the rest does, linearly.
    let half = ContextMemory::new(&cfg, 64 << 10, 512);
    assert_eq!(half.gdn_state, m.gdn_state);
    assert_eq!(2 * half.kv_cache, m.kv_cache);
    println!("{m}");
}

#[test]
fn the_arithmetic_is_what_state_and_scratch_allocate() {
    let device = dev();
    let cfg = presets::tiny();
    for (ctx, rows) in [(1, 1), (100, 7), (333, 32), (1000, 64)] {
        let m = ContextMemory::new(&cfg, ctx, rows);
        let before = device.allocated_bytes();
        let state = State::new(&device, &cfg, ctx).expect("a state");
        assert_eq!(device.allocated_bytes() - before, m.state(), "state at context {ctx}");
        drop(state);
        let before = device.allocated_bytes();
        let scratch = Scratch::new(&device, &cfg, rows, ctx).expect("a scratch");
        assert_eq!(device.allocated_bytes() - before, m.chunk_scratch, "scratch of {rows} rows at context {ctx}");
        drop(scratch);
    }
}
