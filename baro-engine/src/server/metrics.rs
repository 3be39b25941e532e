//! The server's counters, updated by the routes and the scheduler with atomics, and their
//! Prometheus text form for `GET /metrics`: requests by outcome, queue depth, active
//! sequences, tokens, batched decode steps and their rows, the scheduler's busy time and
//! tokens/s over it, and the prefix cache's hit rate. Reading them never blocks the scheduler.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Every counter the server keeps.
#[derive(Debug)]
pub struct Metrics {
    started: Instant,
    /// Requests holding a place in the queue: waiting or running (see `Ticket`).
    pub in_flight: AtomicUsize,
    /// Sequences the scheduler is prefilling or decoding.
    pub active: AtomicUsize,
    pub admitted: AtomicU64,
    pub completed: AtomicU64,
    pub cancelled: AtomicU64,
    pub failed: AtomicU64,
    /// Turned away with 503 (queue full).
    pub rejected: AtomicU64,
    /// Turned away with a 4xx (bad request, unknown model).
    pub invalid: AtomicU64,
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens not fed because the prefix cache held their state.
    pub cached_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    pub busy_nanos: AtomicU64,
    /// The most sequences one decode step has carried.
    pub batch_peak: AtomicUsize,
    /// Decode steps that ran two or more sequences through the rows kernels together.
    pub batched_steps: AtomicU64,
    /// Sequence rows in those steps.
    pub batched_rows: AtomicU64,
    /// Prompt tokens fed through batched prefill (the rows kernels).
    pub prompt_tokens_batched: AtomicU64,
    pub cache_lookups: AtomicU64,
    pub cache_hits: AtomicU64,
    /// Hits served by the block cache (a state saved at a block boundary).
    pub block_hits: AtomicU64,
    /// States saved at block boundaries.
    pub block_saves: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            admitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            cached_tokens: AtomicU64::new(0),
            generated_tokens: AtomicU64::new(0),
            busy_nanos: AtomicU64::new(0),
            batch_peak: AtomicUsize::new(0),
            batched_steps: AtomicU64::new(0),
            batched_rows: AtomicU64::new(0),
            prompt_tokens_batched: AtomicU64::new(0),
            cache_lookups: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
            block_hits: AtomicU64::new(0),
            block_saves: AtomicU64::new(0),
        }
    }
}

/// Adds `n` to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    pub fn add_busy(&self, d: Duration) {
        add(&self.busy_nanos, u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The Prometheus text exposition of every counter; `queue_limit` is the configured bound.
    pub fn render(&self, queue_limit: usize) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let active = self.active.load(Ordering::Relaxed);
        let busy = get(&self.busy_nanos) as f64 / 1e9;
        let generated = get(&self.generated_tokens);
        let (lookups, hits) = (get(&self.cache_lookups), get(&self.cache_hits));
        let rate = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
        let mut out = String::new();
        let mut line = |name: &str, kind: &str, help: &str, value: String| {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
        };
        line("baro_requests_active", "gauge", "sequences being prefilled or decoded", active.to_string());
        line(
            "baro_requests_waiting",
            "gauge",
            "requests admitted and waiting for a sequence slot",
            in_flight.saturating_sub(active).to_string(),
        );
        line("baro_queue_depth", "gauge", "requests waiting or running", in_flight.to_string());
        line("baro_queue_limit", "gauge", "the most requests waiting or running at once", queue_limit.to_string());
        line(
            "baro_requests_admitted_total",
            "counter",
            "requests admitted to the queue",
            get(&self.admitted).to_string(),
        );
        line(
            "baro_requests_completed_total",
            "counter",
            "generations that ran to their end",
            get(&self.completed).to_string(),
        );
        line(
            "baro_requests_cancelled_total",
            "counter",
            "generations dropped because the client went away",
            get(&self.cancelled).to_string(),
        );
        line(
            "baro_requests_failed_total",
            "counter",
            "generations the engine failed on",
            get(&self.failed).to_string(),
        );
        line(
            "baro_requests_rejected_total",
            "counter",
            "requests turned away with 503 (queue full)",
            get(&self.rejected).to_string(),
        );
        line(
            "baro_requests_invalid_total",
            "counter",
            "requests turned away with a 4xx",
            get(&self.invalid).to_string(),
        );
        line(
            "baro_prompt_tokens_total",
            "counter",
            "prompt tokens fed to the engine",
            get(&self.prompt_tokens).to_string(),
        );
        line(
            "baro_prompt_tokens_cached_total",
            "counter",
            "prompt tokens served from the prefix cache",
            get(&self.cached_tokens).to_string(),
        );
        line("baro_generated_tokens_total", "counter", "tokens sampled", generated.to_string());
        line(
            "baro_decode_batch_peak",
            "gauge",
            "the most sequences one decode step has carried",
            self.batch_peak.load(Ordering::Relaxed).to_string(),
        );
        line(
            "baro_decode_batched_steps_total",
            "counter",
            "decode steps that ran two or more sequences through the rows kernels together",
            get(&self.batched_steps).to_string(),
        );
        line(
            "baro_decode_batched_rows_total",
            "counter",
            "sequence rows in those batched decode steps",
            get(&self.batched_rows).to_string(),
        );
        line(
            "baro_prompt_tokens_batched_total",
            "counter",
            "prompt tokens fed through batched prefill (the rows kernels)",
            get(&self.prompt_tokens_batched).to_string(),
        );
        line("baro_busy_seconds_total", "counter", "time the scheduler spent stepping sequences", format!("{busy:.6}"));
        line(
            "baro_generated_tokens_per_second",
            "gauge",
            "tokens sampled per busy second",
            format!("{:.3}", rate(generated as f64, busy)),
        );
        line(
            "baro_prefix_cache_lookups_total",
            "counter",
            "admissions that looked up the prefix cache",
            lookups.to_string(),
        );
        line("baro_prefix_cache_hits_total", "counter", "admissions that reused a cached state", hits.to_string());
        line(
            "baro_prefix_cache_block_hits_total",
            "counter",
            "hits served by a state saved at a block boundary",
            get(&self.block_hits).to_string(),
        );
        line(
            "baro_prefix_cache_block_saves_total",
            "counter",
            "states saved at block boundaries",
            get(&self.block_saves).to_string(),
        );
        line(
            "baro_prefix_cache_hit_rate",
            "gauge",
            "hits over lookups (0 before any lookup)",
            format!("{:.6}", rate(hits as f64, lookups as f64)),
        );
        line(
            "baro_uptime_seconds",
            "counter",
            "seconds since the server started",
            format!("{:.3}", self.started.elapsed().as_secs_f64()),
        );
        out
    }
}
