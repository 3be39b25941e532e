//! Resident decode through launch graphs (`EngineOptions::graphs`, on by default) gives the
//! same bits as launching each kernel: on the tiny fixture (f32, and as a Q8_0 GGUF in the q8
//! mode), every position of every fixture sequence, `step`'s logits and `step_greedy`'s
//! tokens, interleaved, across resets and on a second sequence state with its own graphs.
//! Each kind of step builds its graph once per state, and is updated in place from step to
//! step (the position's words change).
//! Staged decode launches one by one. With `BARO_TEST_DEVICE=cuda` the graphs are CUDA graphs.
//! On the host, the graphs also replay in random orders of their data dependencies.

use crate::common;

use baro_dsl::runtime::Device;
use baro_engine::engine::{Engine, EngineOptions, Model, ModelSource, Precision, State};
use common::{dev, fixture, tiny_f32, tiny_q8_0};

/// Every fixture prompt (prompt tokens, then its greedy tokens).
fn sequences() -> Vec<Vec<u32>> {
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tiny").join("index.json")).unwrap()).unwrap();
    let ids =
        |v: &serde_json::Value| v.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect::<Vec<_>>();
    index["prompts"].as_array().unwrap().iter().map(|p| [ids(&p["tokens"]), ids(&p["greedy"])].concat()).collect()
}

/// What a run observes: each `step`'s logits as bits and each `step_greedy`'s token, in order.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Logits(Vec<u32>),
    Pick(u32),
}

/// Every sequence token by token, `step` and `step_greedy` alternating, then the first
/// sequence again on a second state, then two more tokens on the first. Returns what was
/// seen and the second state.
fn run(engine: &mut Engine) -> (Vec<Seen>, State) {
    let mut seen = Vec::new();
    let mut feed = |model: &Model, state: &mut State, seq: &[u32]| {
        for (i, &t) in seq.iter().enumerate() {
            seen.push(if i % 3 == 2 {
                Seen::Pick(model.step_greedy(state, t).unwrap())
            } else {
                Seen::Logits(model.step(state, t).unwrap().iter().map(|v| v.to_bits()).collect())
            });
        }
    };
    let seqs = sequences();
    for seq in &seqs {
        engine.reset().unwrap();
        feed(&engine.model, &mut engine.state, seq);
    }
    let mut other = engine.model.new_state().unwrap();
    feed(&engine.model, &mut other, &seqs[0]);
    feed(&engine.model, &mut engine.state, &seqs[1][..2]);
    (seen, other)
}

fn check(source: &ModelSource, what: &str, precision: Precision) {
    check_on(dev(), source, what, precision);
}

/// `check` with the graphs on `graph_dev`.
fn check_on(graph_dev: Device, source: &ModelSource, what: &str, precision: Precision) {
    let options = |graphs| EngineOptions { max_ctx: 256, precision, graphs, ..EngineOptions::default() };
    let mut on = Engine::new(graph_dev, source, options(true)).unwrap();
    let mut off = Engine::new(dev(), source, options(false)).unwrap();
    assert!(on.model.decode_graphs() && !off.model.decode_graphs(), "{what}: graphs on and off");
    let ((a, other), (b, _)) = (run(&mut on), run(&mut off));
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(x == y, "{what}: step {i} differs between launch graphs on and off");
    }
    let (stats, second) = (on.decode_graph_stats().unwrap(), other.graph_stats());
    assert_eq!(stats.replays + second.replays, a.len() as u64, "{what}: every step replayed a graph");
    for (state, s) in [("first", stats), ("second", second)] {
        assert_eq!(s.builds, 2, "{what}: each kind of step built its graph once on the {state} state ({s:?})");
        assert!(s.updated_nodes > 0, "{what}: positions change parameter words ({s:?})");
    }
    assert_eq!(off.decode_graph_stats(), None);
}

#[test]
fn decode_through_launch_graphs_equals_plain_launches() {
    check(&tiny_f32(), "tiny f32", Precision::F32);
}

#[test]
fn q8_decode_through_launch_graphs_equals_plain_launches() {
    check(&tiny_q8_0(), "tiny Q8_0 GGUF, q8 mode", Precision::Q8);
}

/// The decode graphs replayed on the host in seeded random orders of their data dependencies
/// (the edges a CUDA graph gets with `BARO_GRAPH_ORDER=data`, under which kernels that share
/// no buffer may run side by side) give the bits of plain launches in recording order, for
/// every step: the data edges miss no dependency between the engine's decode kernels.
#[test]
fn decode_graphs_in_random_orders_of_their_data_edges_equal_plain_launches() {
    let by_data = |seed| Device::host_replaying_by_data(seed).expect("host device");
    check_on(by_data(1), &tiny_f32(), "tiny f32, graphs in a data order", Precision::F32);
    check_on(by_data(2), &tiny_q8_0(), "tiny Q8_0 GGUF, q8 mode, graphs in a data order", Precision::Q8);
}

#[test]
fn staged_decode_launches_one_by_one() {
    let resident = Engine::new(dev(), &tiny_f32(), EngineOptions { max_ctx: 64, ..EngineOptions::default() }).unwrap();
    let minimum = resident.model.memory_plan().needs.staged(resident.model.config().n_experts_used);
    let mut staged = Engine::new(
        dev(),
        &tiny_f32(),
        EngineOptions { max_ctx: 64, vram_budget: Some(minimum), ..EngineOptions::default() },
    )
    .unwrap();
    assert!(staged.model.decode_slots().is_some() && !staged.model.decode_graphs());
    staged.step(1).unwrap();
    staged.step_greedy(2).unwrap();
    assert_eq!(staged.decode_graph_stats().map(|s| s.replays), Some(0));
}
