//! The scheduler thread: owns the `Model`, takes jobs from the routes, and steps every active
//! sequence together, one tick at a time.
//!
//! A tick is: drop sequences whose client went away (their state is freed at once); admit
//! waiting jobs while fewer than `max_batch` sequences are active (each gets its own state,
//! fresh or from the prefix cache); one decode step over every decoding sequence (`batch::decode`,
//! one rows step over all of them); then at most `prefill_chunk` prompt tokens of the
//! prefilling sequences, oldest first (each sequence's share one batched prefill), so a long
//! prompt never stalls the others' decoding for more than a chunk. A sequence's output depends only
//! on its own tokens and sampler, never on what else is in flight. Blocks only when there is
//! nothing to do; exits when every route handle is gone.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use crate::engine::Model;
use crate::sampling::Sampler;
use crate::server::batch;
use crate::server::job::{Event, Job};
use crate::server::metrics::{self, Metrics};
use crate::server::prefix_cache::{BlockCache, PrefixCache};
use crate::server::sequence::{Phase, Sequence};
use crate::tokenizer::Tokenizer;

/// How the scheduler shares the engine.
#[derive(Clone, Copy, Debug)]
pub struct SchedulerConfig {
    /// The most sequences stepped together; more wait.
    pub max_batch: usize,
    /// The most prompt tokens fed per tick, over all prefilling sequences.
    pub prefill_chunk: usize,
    /// Finished sequences' states kept for prefix reuse; 0 is off.
    pub prefix_cache: usize,
    /// Tokens per block of the block prefix cache (states saved at every boundary); 0 is off.
    pub prefix_block: usize,
    /// States the block prefix cache keeps; 0 is off.
    pub prefix_blocks: usize,
}

/// Runs until `jobs` is closed and no work remains.
/// `log`: each request writes one line to stderr when it ends (`Sequence::log_line`).
pub fn run(
    model: Model,
    tokenizer: &Tokenizer,
    jobs: Receiver<Job>,
    config: SchedulerConfig,
    metrics: Arc<Metrics>,
    log: bool,
) {
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut active: Vec<Sequence<'_>> = Vec::new();
    let mut cache = PrefixCache::new(config.prefix_cache);
    let mut blocks = BlockCache::new(config.prefix_block, config.prefix_blocks);
    let mut open = true;
    loop {
        if active.is_empty() && waiting.is_empty() {
            if !open {
                return;
            }
            match jobs.recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => return,
            }
        }
        while open {
            match jobs.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        let start = Instant::now();
        waiting.retain(|job| {
            let gone = job.events.is_closed();
            if gone {
                metrics::add(&metrics.cancelled, 1);
            }
            !gone
        });
        for s in active.iter_mut().filter(|s| s.is_abandoned()) {
            s.cancel();
            metrics::add(&metrics.cancelled, 1);
        }
        retire(&mut active, &mut cache, &metrics);
        while active.len() < config.max_batch.max(1) {
            let Some(job) = waiting.pop_front() else { break };
            if let Some(s) = admit(&model, tokenizer, job, &mut cache, &mut blocks, &metrics, log) {
                active.push(s);
            }
        }
        metrics.active.store(active.len(), std::sync::atomic::Ordering::Relaxed);
        tick(&model, &mut active, config.prefill_chunk.max(1), &mut blocks, &metrics);
        retire(&mut active, &mut cache, &metrics);
        metrics.add_busy(start.elapsed());
    }
}

/// A sequence for `job`, with a cached state when one holds a prefix of its prompt.
fn admit<'t>(
    model: &Model,
    tokenizer: &'t Tokenizer,
    job: Job,
    cache: &mut PrefixCache,
    blocks: &mut BlockCache,
    metrics: &Arc<Metrics>,
    log: bool,
) -> Option<Sequence<'t>> {
    let fail = |job: Job, message: String| {
        let _ = job.events.send(Event::Failed(message));
        metrics::add(&metrics.failed, 1);
        None
    };
    // The route validated the config; a failure here is a bug in baro.
    let sampler = match Sampler::new(job.sampler.clone()) {
        Ok(s) => s,
        Err(e) => return fail(job, format!("sampler: {e} (a bug in baro: the route checks it)")),
    };
    // The longer of the two caches' prefixes; a block hit is a copy (the entry stays).
    let whole = if cache.is_enabled() { cache.peek(&job.prompt) } else { 0 };
    let block = blocks.lookup(&job.prompt).map(|(state, n)| (model.snapshot(state), n));
    if cache.is_enabled() || blocks.is_enabled() {
        metrics::add(&metrics.cache_lookups, 1);
    }
    let cached = match block {
        Some((Ok(state), n)) if n > whole => {
            metrics::add(&metrics.block_hits, 1);
            Some((state, n))
        }
        Some((Err(e), _)) => return fail(job, format!("cannot copy a cached prefix state: {e}")),
        _ if whole > 0 => cache.take(&job.prompt),
        _ => None,
    };
    let (state, cached_tokens) = match cached {
        Some((state, n)) => {
            metrics::add(&metrics.cache_hits, 1);
            metrics::add(&metrics.cached_tokens, n as u64);
            (state, n)
        }
        None => match model.new_state() {
            Ok(s) => (s, 0),
            Err(e) => return fail(job, format!("cannot allocate a sequence state: {e}")),
        },
    };
    let mut s = Sequence::new(job, sampler, state, tokenizer, Arc::clone(metrics));
    s.log = log.then_some(cached_tokens);
    Some(s)
}

/// One decode step for every decoding sequence, then one prefill chunk.
fn tick(model: &Model, active: &mut [Sequence<'_>], prefill_chunk: usize, blocks: &mut BlockCache, metrics: &Metrics) {
    let decoding: Vec<usize> = (0..active.len()).filter(|&i| matches!(active[i].phase(), Phase::Decode(_))).collect();
    let mut rows: Vec<_> = active.iter_mut().filter_map(Sequence::decode_row).collect();
    metrics.batch_peak.fetch_max(rows.len(), std::sync::atomic::Ordering::Relaxed);
    let logits = batch::decode(model, &mut rows, metrics);
    drop(rows);
    for (i, result) in decoding.into_iter().zip(logits) {
        active[i].on_logits(result.map(Some));
    }
    let mut budget = prefill_chunk;
    for s in active.iter_mut().filter(|s| s.phase() == Phase::Prefill) {
        // A sequence's share, cut at the block cache's boundaries so the state there can be
        // saved (how a prompt is cut never changes its bytes).
        while budget > 0 && s.phase() == Phase::Prefill {
            let unfed = s.unfed_prompt();
            let n = unfed.len().min(budget).min(blocks.to_boundary(s.state.pos));
            let chunk = unfed[..n].to_vec();
            let last = n == unfed.len();
            budget -= n;
            let result = batch::prefill(model, &mut s.state, &chunk, metrics);
            metrics::add(&metrics.prompt_tokens, n as u64);
            let ok = result.is_ok();
            s.on_logits(result.map(|l| last.then_some(l)));
            if ok && blocks.wants(s.fed()) {
                if let Ok(copy) = model.snapshot(&s.state) {
                    blocks.put(s.fed().to_vec(), copy);
                    metrics::add(&metrics.block_saves, 1);
                }
            }
        }
        if budget == 0 {
            break;
        }
    }
}

/// Drops the sequences that are over (keeping the others in arrival order); completed ones
/// leave their state to the cache.
fn retire(active: &mut Vec<Sequence<'_>>, cache: &mut PrefixCache, metrics: &Metrics) {
    if active.iter().all(|s| s.phase() != Phase::Over) {
        return;
    }
    let mut kept = Vec::with_capacity(active.len());
    for s in active.drain(..) {
        if s.phase() != Phase::Over {
            kept.push(s);
        } else if s.completed {
            let fed = s.fed().to_vec();
            cache.put(fed, s.into_state());
        }
    }
    *active = kept;
    metrics.active.store(active.len(), std::sync::atomic::Ordering::Relaxed);
}
