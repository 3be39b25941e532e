//! The `decode_bw` routine: opens a GGUF pack (memory-mapped), measures the device's copy
//! bandwidths, builds the engine on the device (kernels compiled first, so the engine's own
//! build times the weight upload), decodes greedily (each output fed back, so the token ids
//! are a deterministic function of the pack and the first token) and sets the achieved tokens
//! per second against the pack's bandwidth floor (`floor.rs`).
//!
//! Timing is synchronised wall clock per token: `Engine::step_greedy` queues the step and the
//! greedy pick on the device and waits for the picked id (or, with `host_pick`, `Engine::step`
//! waits for the logits and the pick runs on the host after it), so one token's latency is
//! everything between two fed tokens. Returns numbers; printing the result table and writing
//! files is the binary's job. Never changes the pack.

use std::path::PathBuf;
use std::time::Instant;

use baro_dsl::runtime::{Device, DeviceKind};
use baro_engine::engine::{Engine, EngineOptions, ModelSource, Precision};
use baro_engine::model::{LayerKind, ModelConfig, TensorType};
use baro_engine::sampling;
use baro_engine::tokenizer::TokenId;

use crate::bandwidth::{copy_bandwidth, median, pinned_upload_bandwidth, Filler};
use crate::floor::{floor, state_bytes, Floor};

/// What to run.
#[derive(Clone, Debug)]
pub struct DecodeOptions {
    pub model: PathBuf,
    /// A device-memory budget in bytes (staged experts when the pack does not fit).
    pub vram_budget: Option<u64>,
    /// The activations of the quantized matvecs.
    pub precision: Precision,
    pub target: DeviceKind,
    pub ordinal: usize,
    /// Timed tokens.
    pub tokens: usize,
    /// Untimed tokens decoded right before the timed ones.
    pub warmup: usize,
    /// Untimed tokens decoded first, so the timed ones run at this context depth.
    pub context_tokens: usize,
    /// The first token fed (every later one is the previous step's greedy pick).
    pub first_token: TokenId,
    /// Bytes per device-to-device copy, and timed copies (median).
    pub copy_bytes: usize,
    pub copy_iters: usize,
    /// Bytes of the filler copy queued ahead of each timed copy.
    pub filler_bytes: usize,
    /// Bytes per pinned upload, and timed uploads (median).
    pub pinned_bytes: usize,
    pub pinned_iters: usize,
    /// Read the logits back and pick on the host (`sampling::greedy`) instead of on the device.
    pub host_pick: bool,
    /// `EngineOptions::graphs`: replay each resident decode step as a launch graph.
    pub graphs: bool,
}

/// Everything `run` measured.
#[derive(Clone, Debug)]
pub struct DecodeReport {
    pub device: String,
    pub driver: String,
    pub config: ModelConfig,
    /// Bytes of the pack file.
    pub pack_bytes: u64,
    pub floor: Floor,
    /// Device-to-device copy, read + written bytes per second (median).
    pub copy_bytes_per_s: f64,
    /// Pinned host-to-device upload bytes per second (median).
    pub pinned_bytes_per_s: f64,
    pub compile_s: f64,
    /// `Engine::new` with every kernel already compiled: the weight upload and state allocation.
    pub upload_s: f64,
    /// Bytes the engine uploads: the stored bytes of every tensor decode reads.
    pub upload_bytes: u64,
    pub context_s: f64,
    pub warmup_s: f64,
    /// Per timed token: step (queue + wait + read back: the picked id, or the logits with
    /// `host_pick`) and the greedy pick on the host (0 when picked on the device), seconds.
    pub step_s: Vec<f64>,
    pub pick_s: Vec<f64>,
    /// The timed tokens' inputs followed by the last pick: `tokens + 1` ids.
    pub timed_ids: Vec<TokenId>,
    /// The KV length (position) of the first timed token.
    pub first_timed_pos: usize,
    /// Whether the steps replayed launch graphs (`Model::decode_graphs`: asked for, and
    /// the experts resident), and the graphs' counters over the whole run.
    pub graphs: bool,
    pub graph_stats: Option<baro_dsl::runtime::GraphStats>,
}

impl DecodeReport {
    /// The launch mode as the report's header says it.
    pub fn launch_mode(&self, asked: bool) -> String {
        match (asked, self.graphs, self.graph_stats) {
            (_, true, Some(s)) => format!(
                "launch graphs on ({} replays, {} builds, {} nodes updated in place)",
                s.replays, s.builds, s.updated_nodes
            ),
            (true, false, _) => "launch graphs asked for but off (staged experts launch one by one)".to_string(),
            _ => "launch graphs off (--no-graphs): one launch per kernel".to_string(),
        }
    }
}

/// Latency percentiles of the timed tokens, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl DecodeReport {
    /// Full per-token latency (step + pick), seconds.
    pub fn token_s(&self) -> Vec<f64> {
        self.step_s.iter().zip(&self.pick_s).map(|(a, b)| a + b).collect()
    }

    pub fn latency(&self) -> Latency {
        let mut v = self.token_s();
        v.sort_by(|a, b| a.total_cmp(b));
        let pct = |p: f64| {
            if v.is_empty() {
                f64::NAN
            } else {
                v[((p * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
            }
        };
        Latency {
            min: pct(0.0),
            p50: median(v.clone()),
            p90: pct(0.9),
            p99: pct(0.99),
            max: pct(1.0),
            mean: v.iter().sum::<f64>() / v.len() as f64,
        }
    }

    /// Tokens per second from the median latency.
    pub fn tok_s_median(&self) -> f64 {
        1.0 / self.latency().p50
    }

    /// Tokens per second over the whole timed run (total tokens / total time).
    pub fn tok_s_mean(&self) -> f64 {
        1.0 / self.latency().mean
    }

    /// The floor's tokens per second at the measured copy bandwidth.
    pub fn floor_tok_s(&self) -> f64 {
        self.floor.tokens_per_s(self.copy_bytes_per_s)
    }

    /// Achieved (median) over floor.
    pub fn ratio(&self) -> f64 {
        self.tok_s_median() / self.floor_tok_s()
    }

    /// An FNV-1a hash of the timed ids: equal across runs of the same pack and options.
    pub fn ids_hash(&self) -> u64 {
        self.timed_ids.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &t| {
            t.to_le_bytes().iter().fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
        })
    }
}

/// One line describing the model's shape and the pack's element types by stored bytes.
pub fn config_summary(cfg: &ModelConfig, f: &Floor) -> String {
    let n_attn = cfg.layer_kinds.iter().filter(|k| **k == LayerKind::Attention).count();
    let mut by_type: Vec<(TensorType, usize, u64)> = Vec::new();
    for t in &f.tensors {
        match by_type.iter_mut().find(|(ty, _, _)| *ty == t.ty) {
            Some(e) => {
                e.1 += 1;
                e.2 += t.stored;
            }
            None => by_type.push((t.ty, 1, t.stored)),
        }
    }
    by_type.sort_by_key(|e| std::cmp::Reverse(e.2));
    let types: Vec<String> =
        by_type.iter().map(|(ty, n, b)| format!("{ty} {n} tensors {:.3} GB", *b as f64 / 1e9)).collect();
    format!(
        "{} layers ({} gdn, {n_attn} attention), hidden {}, vocab {}, {} experts top-{} (ffn {}), shared ffn {}, attention {}/{} heads x {}, gdn {}/{} heads x {}/{}, {} head; types: {}",
        cfg.n_layers,
        cfg.n_layers - n_attn,
        cfg.hidden_dim,
        cfg.vocab_size,
        cfg.n_experts,
        cfg.n_experts_used,
        cfg.expert_ffn_dim,
        cfg.shared_ffn_dim,
        cfg.n_heads,
        cfg.n_kv_heads,
        cfg.head_dim,
        cfg.gdn_n_key_heads,
        cfg.gdn_n_value_heads,
        cfg.gdn_key_dim,
        cfg.gdn_value_dim,
        if cfg.tied_embeddings { "tied" } else { "untied" },
        types.join(", ")
    )
}

/// Runs the whole benchmark, printing progress lines to stdout as it goes.
pub fn run(o: &DecodeOptions) -> Result<DecodeReport, String> {
    if o.tokens == 0 {
        return Err("--tokens: expected at least 1 timed token, found 0".into());
    }
    let pack_bytes = std::fs::metadata(&o.model).map_err(|e| format!("cannot read {}: {e}", o.model.display()))?.len();
    let source = ModelSource::open(&o.model).map_err(|e| format!("{}: {e}", o.model.display()))?;
    let ModelSource::Gguf(file) = &source else {
        return Err(format!("{}: expected a GGUF file, found a directory", o.model.display()));
    };
    let cfg = ModelConfig::from_gguf(file).map_err(|e| format!("{}: {e}", o.model.display()))?;
    let fl = floor(file, &cfg)?;
    if o.first_token as usize >= cfg.vocab_size {
        return Err(format!(
            "--first-token: expected an id below the vocabulary size {}, found {}",
            cfg.vocab_size, o.first_token
        ));
    }
    let max_ctx = o.context_tokens + o.warmup + o.tokens + 1;
    if cfg.context_length != 0 && max_ctx > cfg.context_length {
        return Err(format!(
            "--context-tokens + --warmup + --tokens: expected fewer than the context length {}, found {}",
            cfg.context_length,
            max_ctx - 1
        ));
    }
    println!("pack {} ({:.3} GB): {}", o.model.display(), pack_bytes as f64 / 1e9, config_summary(&cfg, &fl));
    println!("floor: {}", fl.explain());
    let not_read = fl.not_read();
    if !not_read.is_empty() {
        println!("not read by decode: {}", not_read.join(", "));
    }

    let dev = Device::open(o.target, o.ordinal).map_err(|e| e.to_string())?;
    let (device, driver) = (dev.name(), dev.driver_version());
    println!("device {device} ({driver})");
    let (copy_bytes_per_s, pinned_bytes_per_s) = {
        let mut filler = Filler::new(&dev, o.filler_bytes)?;
        let (moved, bw) = copy_bandwidth(&dev, o.copy_bytes, 2, o.copy_iters, &mut filler)?;
        println!("copy: {} MiB read + written per copy, median of {}: {:.1} GB/s", moved >> 20, o.copy_iters, bw / 1e9);
        let pinned = pinned_upload_bandwidth(&dev, o.pinned_bytes, o.pinned_iters)?;
        println!(
            "pinned upload: {} MiB per write, median of {}: {:.1} GB/s",
            o.pinned_bytes >> 20,
            o.pinned_iters,
            pinned / 1e9
        );
        (bw, pinned)
    };

    let t = Instant::now();
    for k in baro_engine::kernels::all() {
        dev.compile(&k).map_err(|e| e.to_string())?;
    }
    let compile_s = t.elapsed().as_secs_f64();
    println!("kernels compiled in {compile_s:.2} s");
    let upload_bytes: u64 = fl.tensors.iter().filter(|t| t.rule != crate::floor::Rule::NotRead).map(|t| t.stored).sum();
    let t = Instant::now();
    let mut engine = Engine::new(
        dev,
        &source,
        EngineOptions {
            max_ctx,
            vram_budget: o.vram_budget,
            precision: o.precision,
            graphs: o.graphs,
            ..EngineOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let upload_s = t.elapsed().as_secs_f64();
    println!(
        "engine built in {upload_s:.2} s: {:.3} GB of weights uploaded from the map, {:.2} GB/s ({:.2} of the pinned upload rate)",
        upload_bytes as f64 / 1e9,
        upload_bytes as f64 / upload_s / 1e9,
        upload_bytes as f64 / upload_s / pinned_bytes_per_s
    );

    let mut token = o.first_token;
    let host_pick = o.host_pick;
    let step = |engine: &mut Engine, token: TokenId| -> Result<(TokenId, f64, f64), String> {
        let t0 = Instant::now();
        if !host_pick {
            let next = engine.step_greedy(token).map_err(|e| e.to_string())?;
            return Ok((next, t0.elapsed().as_secs_f64(), 0.0));
        }
        let logits = engine.step(token).map_err(|e| e.to_string())?;
        let t1 = Instant::now();
        let next = sampling::greedy(&logits).map_err(|e| e.to_string())?;
        Ok((next, (t1 - t0).as_secs_f64(), t1.elapsed().as_secs_f64()))
    };
    let t = Instant::now();
    for _ in 0..o.context_tokens {
        token = step(&mut engine, token)?.0;
    }
    let context_s = t.elapsed().as_secs_f64();
    if o.context_tokens > 0 {
        println!("context: {} tokens in {context_s:.2} s", o.context_tokens);
    }
    let t = Instant::now();
    for _ in 0..o.warmup {
        token = step(&mut engine, token)?.0;
    }
    let warmup_s = t.elapsed().as_secs_f64();
    let first_timed_pos = engine.position();
    let mut timed_ids = vec![token];
    let (mut step_s, mut pick_s) = (Vec::with_capacity(o.tokens), Vec::with_capacity(o.tokens));
    for _ in 0..o.tokens {
        let (next, s, p) = step(&mut engine, token)?;
        step_s.push(s);
        pick_s.push(p);
        timed_ids.push(next);
        token = next;
    }
    println!(
        "memory: {}; precision: {}; launch graphs: {}",
        engine.model.memory_plan(),
        engine.model.precision().name(),
        if engine.model.decode_graphs() { "on" } else { "off" }
    );
    if let Some(c) = engine.model.expert_cache_stats() {
        println!(
            "expert cache (whole run): {} lookups, {} hits ({:.3}), {} misses, {} evictions",
            c.lookups,
            c.hits,
            c.hits as f64 / c.lookups.max(1) as f64,
            c.misses,
            c.evictions
        );
    }
    Ok(DecodeReport {
        device,
        driver,
        config: cfg,
        pack_bytes,
        floor: fl,
        copy_bytes_per_s,
        pinned_bytes_per_s,
        compile_s,
        upload_s,
        upload_bytes,
        context_s,
        warmup_s,
        step_s,
        pick_s,
        timed_ids,
        first_timed_pos,
        graphs: engine.model.decode_graphs(),
        graph_stats: engine.decode_graph_stats(),
    })
}

/// The state traffic of the timed tokens (first and last), for the report: bytes moved that
/// are not weights and not in the floor.
pub fn state_range(r: &DecodeReport) -> (u64, u64) {
    (
        state_bytes(&r.config, r.first_timed_pos),
        state_bytes(&r.config, r.first_timed_pos + r.step_s.len().saturating_sub(1)),
    )
}
