//! The batched decode step across sequences (`Model::step_batch`) against each sequence
//! stepped alone with `Model::step`, on the tiny fixture from safetensors and from a Q8_0 GGUF: N = 1,
//! 2, 5 and 11 sequences (11 crosses the rows matvecs' 8-row tile) with different prompts,
//! some at position 0 and some deep, stepped together for several steps. Every row's logits
//! at every step are compared bit for bit with the sequence alone, and so are the logits of one
//! more step of each sequence alone after the batch (the state the batch left: KV cache, conv
//! ring, delta-rule state, position). A staged model (experts in pinned host memory, two slots)
//! gives the same bytes, batched (whole layers streamed) and one row at a time (through the
//! slot cache). Bad rows are refused before any state changes. `put_row` is an exact
//! copy. Runs on the host, or with `BARO_TEST_DEVICE=cuda` (or `hip`) on a GPU.

use crate::common;

use baro_dsl::runtime::DeviceArg as A;
use baro_engine::engine::staging::MemoryMode;
use baro_engine::engine::{EngineError, EngineOptions, Logits, Model, ModelSource, Precision, PrefillMode, State};
use baro_engine::kernels::embed;
use common::{dev, tiny_f32, tiny_q8_0, Rng};

const MAX_CTX: usize = 160;
const STEPS: usize = 4;

fn tokens(seed: u64, len: usize, vocab: usize) -> Vec<u32> {
    let mut rng = Rng(seed);
    (0..len).map(|_| (rng.next_u64() % vocab as u64) as u32).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Sequence r of a batch: its prompt length (0: its first step is at position 0).
fn prompt_len(r: usize) -> usize {
    [0, 37, 3, 90, 0, 12, 1, 64, 0, 20, 7][r % 11]
}

/// A state of `model` fed `prompt` one `step` at a time.
fn fed_state(model: &Model, prompt: &[u32]) -> State {
    let mut state = model.new_state().unwrap();
    for &t in prompt {
        model.step(&mut state, t).unwrap();
    }
    state
}

/// Per row, the logits (bits) of each of its `STEPS` steps and then of one more step alone.
type Trace = Vec<Vec<Vec<u32>>>;

/// Each sequence on its own: its prompt, then `STEPS + 1` steps with `step`.
fn alone(model: &Model, n: usize, seed: u64) -> Trace {
    let vocab = model.config().vocab_size;
    (0..n)
        .map(|r| {
            let prompt = tokens(seed + r as u64, prompt_len(r), vocab);
            let mut state = fed_state(model, &prompt);
            tokens(1000 + seed + r as u64, STEPS + 1, vocab)
                .iter()
                .map(|&t| bits(&model.step(&mut state, t).unwrap()))
                .collect()
        })
        .collect()
}

/// The same sequences stepped together: `STEPS` calls of `step_batch` over all of them, then one
/// more step of each alone on the state the batch left. Returns the trace and the rows each
/// batched call reported.
fn together(model: &Model, n: usize, seed: u64) -> (Trace, Vec<usize>) {
    let vocab = model.config().vocab_size;
    let mut states: Vec<State> =
        (0..n).map(|r| fed_state(model, &tokens(seed + r as u64, prompt_len(r), vocab))).collect();
    let feeds: Vec<Vec<u32>> = (0..n).map(|r| tokens(1000 + seed + r as u64, STEPS + 1, vocab)).collect();
    let mut trace: Trace = vec![Vec::new(); n];
    let mut batched = Vec::new();
    for step in 0..STEPS {
        let positions: Vec<usize> = states.iter().map(|s| s.pos).collect();
        let mut rows: Vec<(&mut State, u32)> = states.iter_mut().zip(&feeds).map(|(s, f)| (s, f[step])).collect();
        let stepped = model.step_batch(&mut rows).unwrap();
        drop(rows);
        assert_eq!(stepped.logits.len(), n);
        batched.push(stepped.rows_batched);
        for (r, l) in stepped.logits.iter().enumerate() {
            assert_eq!(l.len(), vocab);
            assert_eq!(states[r].pos, positions[r] + 1, "row {r}: one position per batched step");
            trace[r].push(bits(l));
        }
    }
    for (r, state) in states.iter_mut().enumerate() {
        trace[r].push(bits(&model.step(state, feeds[r][STEPS]).unwrap()));
    }
    (trace, batched)
}

fn compare(want: &Trace, got: &Trace, what: &str) {
    for (r, (a, b)) in want.iter().zip(got).enumerate() {
        assert_eq!(a.len(), b.len());
        for (step, (x, y)) in a.iter().zip(b).enumerate() {
            let differ = x.iter().zip(y).filter(|(p, q)| p != q).count();
            let when =
                if step < STEPS { format!("batched step {step}") } else { "the step alone after the batch".into() };
            assert_eq!(
                differ,
                0,
                "{what}: row {r} (prompt {}), {when}: {differ} of {} logits differ in bits",
                prompt_len(r),
                x.len()
            );
        }
    }
}

fn model(source: &ModelSource, vram_budget: Option<u64>) -> Model {
    Model::new(
        dev(),
        source,
        EngineOptions {
            max_ctx: MAX_CTX,
            vram_budget,
            expert_slots: 64,
            precision: Precision::F32,
            ..EngineOptions::default()
        },
    )
    .unwrap()
}

fn batch_equals_alone(source: &ModelSource, what: &str) {
    batch_equals_alone_in(source, what, Precision::F32)
}

pub(crate) fn batch_equals_alone_in(source: &ModelSource, what: &str, precision: Precision) {
    let e = Model::new(
        dev(),
        source,
        EngineOptions { max_ctx: MAX_CTX, vram_budget: None, expert_slots: 64, precision, ..EngineOptions::default() },
    )
    .unwrap();
    assert_eq!(e.memory_plan().mode, MemoryMode::Resident);
    for (n, seed) in [(1usize, 10u64), (2, 20), (5, 30), (11, 40)] {
        let want = alone(&e, n, seed);
        let (got, batched) = together(&e, n, seed);
        assert_eq!(batched, vec![n; STEPS], "{what}: every step of {n} rows ran through the rows kernels together");
        compare(&want, &got, &format!("{what}, {n} rows"));
        // The check can fail: rows of different sequences do differ.
        if n > 1 {
            assert_ne!(want[0][0], got[1][0], "{what}: rows 0 and 1 should be different sequences");
        }
        println!(
            "{what}: {n} rows × {STEPS} batched steps + 1 alone: every row's logits byte-equal to the sequence alone"
        );
    }
}

#[test]
fn batched_step_is_each_sequence_alone_from_safetensors() {
    batch_equals_alone(&tiny_f32(), "tiny f32");
}

#[test]
fn batched_step_is_each_sequence_alone_from_q8_0_gguf() {
    batch_equals_alone(&tiny_q8_0(), "tiny Q8_0 GGUF");
}

#[test]
fn staged_batched_step_gives_the_resident_bytes() {
    let source = tiny_f32();
    let resident = model(&source, None);
    let budget = resident.memory_plan().needs.staged(2);
    let mut staged = model(&source, Some(budget));
    assert!(matches!(staged.memory_plan().mode, MemoryMode::Staged { slots: 2, .. }));
    // 8 experts top-2: from 2 rows on, a staged batch streams whole layers.
    assert_eq!(staged.staged_batch_rows(), 2);
    assert_eq!(resident.staged_batch_rows(), 1);
    for (n, rows_batched) in [(5, 5), (1, 0)] {
        let want = alone(&resident, n, 50);
        let misses = staged.expert_cache_stats().unwrap().misses;
        let (got, batched) = together(&staged, n, 50);
        assert_eq!(
            batched,
            vec![rows_batched; STEPS],
            "staged, {n} rows: batched through the rows kernels from 2 rows on, else one by one"
        );
        compare(&want, &got, &format!("tiny f32 staged (2 slots), {n} rows, vs resident alone"));
        assert!(
            staged.expert_cache_stats().unwrap().misses > misses,
            "the rows' prompts (and single rows) went through the slot cache"
        );
    }
    assert!(staged.layer_staging().is_some(), "the batched staged steps streamed layers");
}

#[test]
fn bad_rows_are_refused_before_any_state_changes() {
    let e = model(&tiny_f32(), None);
    let vocab = e.config().vocab_size as u32;
    let mut a = fed_state(&e, &[1, 2, 3]);
    let mut b = e.new_state().unwrap();
    let err = e.step_batch(&mut [(&mut a, 5), (&mut b, vocab + 7)]).unwrap_err();
    assert!(matches!(err, EngineError::BadToken { token, .. } if token == vocab + 7), "{err}");
    assert_eq!((a.pos, b.pos), (3, 0), "a refused batch feeds nothing");
    let mut full = fed_state(&e, &tokens(3, MAX_CTX, vocab as usize));
    let err = e.step_batch(&mut [(&mut a, 5), (&mut full, 1)]).unwrap_err();
    assert!(matches!(err, EngineError::ContextFull { pos, max_ctx } if pos == MAX_CTX && max_ctx == MAX_CTX), "{err}");
    assert_eq!((a.pos, full.pos), (3, MAX_CTX));
    assert!(e.step_batch(&mut []).unwrap().logits.is_empty());
}

#[test]
fn put_row_is_an_exact_copy_into_one_row() {
    let device = dev();
    let kernel = device.compile(&embed::put_row()).unwrap();
    let (rows, dim, row) = (4usize, 33usize, 2usize);
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
    let before: Vec<f32> = (0..rows * dim).map(|_| rng.unit()).collect();
    let xb = device.upload(&x).unwrap();
    let mut y = device.upload(&before).unwrap();
    device
        .launch(device.default_stream(), &kernel, &mut [A::buf(&xb), A::buf_mut(&mut y), A::from(row), A::from(dim)])
        .unwrap();
    device.default_stream().synchronize().unwrap();
    let got = device.read::<f32>(&y).unwrap();
    let mut want = before;
    want[row * dim..(row + 1) * dim].copy_from_slice(&x);
    assert_eq!(bits(&got), bits(&want));
}

#[test]
fn reserved_rows_make_batched_steps_and_chunks_allocate_nothing() {
    let source = tiny_f32();
    let budget = model(&source, None).memory_plan().needs.staged(2);
    for vram_budget in [None, Some(budget)] {
        reserved_rows_allocate_nothing(model(&source, vram_budget));
    }
}

fn reserved_rows_allocate_nothing(model: Model) {
    let vocab = model.config().vocab_size;
    model.reserve_rows(5).unwrap();
    let mut states: Vec<State> =
        (0..5).map(|r| fed_state(&model, &tokens(40 + r as u64, prompt_len(r), vocab))).collect();
    let mut chunk_state = model.new_state().unwrap();
    let before = model.device().allocated_bytes();
    for step in 0..3 {
        // 5, 4, 3 rows: all within the reservation.
        let mut rows: Vec<(&mut State, u32)> = states.iter_mut().skip(step).map(|s| (s, 7 + step as u32)).collect();
        assert!(model.step_batch(&mut rows).unwrap().rows_batched > 0);
    }
    model.prefill(&mut chunk_state, &tokens(99, 20, vocab), PrefillMode::Batched { chunk: 5 }, Logits::Last).unwrap();
    assert_eq!(
        model.device().allocated_bytes(),
        before,
        "device bytes allocated by steps and chunks within the reservation"
    );
    // Beyond it the scratch grows (the check above can fail).
    let mut more: Vec<State> = (0..6).map(|_| model.new_state().unwrap()).collect();
    let grown = model.device().allocated_bytes();
    let mut rows: Vec<(&mut State, u32)> = more.iter_mut().map(|s| (s, 3)).collect();
    model.step_batch(&mut rows).unwrap();
    assert!(model.device().allocated_bytes() > grown, "6 rows exceed the 5 reserved");
}
