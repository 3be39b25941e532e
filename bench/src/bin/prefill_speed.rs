//! `prefill_speed`: batched prefill against replay, tokens/s of prompt processing in one run
//! on one engine, at several prompt lengths (default 1k, 8k, 32k).
//!
//! Batched: the whole prompt in chunks, timed end to end (logits of the last position read
//! back). Replay at length L would take L decode steps; measuring them all at 32k costs
//! ~25 minutes at today's decode rate, so replay is sampled: `--replay-tokens` steps timed at
//! context 0, L/2 and L − n (the state before each sample is reached by an untimed batched
//! prefill, which is bit-identical to replay), and the per-token time over the whole prompt
//! is their trapezoid average (t₀ + 2·t½ + t_end) / 4. A second, profiled batched pass
//! (device synchronised after every stage) attributes the time to stages. Expert FLOP per
//! token are counted from the config (gate, up and down of top-k experts: 2 · 3 · hidden ·
//! expert_ffn · k per layer).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use baro_bench::identity::sequence;
use baro_bench::report::Meta;
use baro_dsl::runtime::{Device, DeviceKind};
use baro_engine::engine::staging::parse_bytes;
use baro_engine::engine::{Engine, EngineOptions, Logits, ModelSource, Precision, PrefillMode};
use clap::Parser;

#[derive(Parser)]
#[command(about = "batched prefill vs replay tokens/s at several prompt lengths")]
struct Cli {
    #[arg(long)]
    model: PathBuf,
    #[arg(long, default_value = "cuda")]
    target: String,
    #[arg(long, value_delimiter = ',', default_value = "1024,8192,32768")]
    lengths: Vec<usize>,
    #[arg(long, default_value_t = PrefillMode::DEFAULT_CHUNK)]
    chunk: usize,
    /// Replay steps timed at each of the three sampled contexts.
    #[arg(long, default_value_t = 16)]
    replay_tokens: usize,
    /// Skip the profiled pass.
    #[arg(long)]
    no_profile: bool,
    #[arg(long)]
    vram_budget: Option<String>,
    /// The device's measured f32 mul+add rate in TFLOP/s (baro emits no fma: a product and a
    /// sum are two instructions), the floor the expert matvecs are compared against.
    #[arg(long)]
    flop_rate: Option<f64>,
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    commit: Option<String>,
    /// Activations of the quantized matvecs: f32 or q8 (8-bit blocks, exact integer dots).
    #[arg(long, default_value = "f32")]
    precision: Precision,
}

pub fn main() -> ExitCode {
    match main_inner(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("prefill_speed: {e}");
            ExitCode::from(2)
        }
    }
}

/// Seconds per replay step over `n` steps from context `at`.
fn replay_sample(engine: &mut Engine, seq: &[u32], at: usize, n: usize, chunk: usize) -> Result<f64, String> {
    let e = |e: baro_engine::engine::EngineError| e.to_string();
    engine.reset().map_err(e)?;
    if at > 0 {
        engine.prefill(&seq[..at], PrefillMode::Batched { chunk }, Logits::Last).map_err(e)?;
    }
    let start = Instant::now();
    for &t in &seq[at..at + n] {
        engine.step(t).map_err(e)?;
    }
    Ok(start.elapsed().as_secs_f64() / n as f64)
}

fn main_inner(cli: Cli) -> Result<(), String> {
    let target: DeviceKind = cli.target.parse().map_err(|e: baro_dsl::runtime::DeviceError| e.to_string())?;
    let longest = *cli.lengths.iter().max().ok_or("--lengths: expected at least one length")?;
    if cli.lengths.iter().any(|&l| l <= cli.replay_tokens) {
        return Err(format!("--lengths: expected every length above --replay-tokens {}", cli.replay_tokens));
    }
    let device = Device::open(target, 0).map_err(|e| e.to_string())?;
    let meta = Meta::new(device.name(), device.driver_version(), cli.commit.clone());
    let source = ModelSource::open(&cli.model).map_err(|e| format!("{}: {e}", cli.model.display()))?;
    let vram_budget =
        cli.vram_budget.as_deref().map(parse_bytes).transpose().map_err(|e| format!("--vram-budget: {e}"))?;
    let mut engine = Engine::new(
        device,
        &source,
        EngineOptions { max_ctx: longest + 1, vram_budget, precision: cli.precision, ..EngineOptions::default() },
    )
    .map_err(|e| e.to_string())?;
    let cfg = engine.model.config().clone();
    let seq = sequence(7, longest, cfg.vocab_size);
    let mut lines = vec![
        meta.markdown_header(),
        format!("model {} ({} layers, hidden {}, {} experts top-{}), chunk {}, precision {}, memory: {}", cli.model.display(), cfg.n_layers, cfg.hidden_dim, cfg.n_experts, cfg.n_experts_used, cli.chunk, engine.model.precision().name(), engine.model.memory_plan()),
        "| prompt tokens | batched s | batched tok/s | replay ms/token (ctx 0, L/2, end) | replay tok/s (est.) | batched / replay |".to_string(),
        "|---:|---:|---:|---:|---:|---:|".to_string(),
    ];
    println!("{}", lines.join("\n"));
    let e = |e: baro_engine::engine::EngineError| e.to_string();
    // Warm-up: compile caches, first allocations.
    engine.reset().map_err(e)?;
    engine
        .prefill(&seq[..cli.chunk.min(longest)], PrefillMode::Batched { chunk: cli.chunk }, Logits::Last)
        .map_err(e)?;
    let mut profiles = Vec::new();
    for &len in &cli.lengths {
        engine.reset().map_err(e)?;
        let start = Instant::now();
        engine.prefill(&seq[..len], PrefillMode::Batched { chunk: cli.chunk }, Logits::Last).map_err(e)?;
        let batched = start.elapsed().as_secs_f64();
        let n = cli.replay_tokens;
        let t0 = replay_sample(&mut engine, &seq, 0, n, cli.chunk)?;
        let tm = replay_sample(&mut engine, &seq, len / 2, n, cli.chunk)?;
        let te = replay_sample(&mut engine, &seq, len - n, n, cli.chunk)?;
        let per_token = (t0 + 2.0 * tm + te) / 4.0;
        let replay_rate = 1.0 / per_token;
        let batched_rate = len as f64 / batched;
        let line = format!(
            "| {len} | {batched:.3} | {batched_rate:.1} | {:.2}, {:.2}, {:.2} | {replay_rate:.2} | {:.1}× |",
            t0 * 1e3,
            tm * 1e3,
            te * 1e3,
            batched_rate / replay_rate
        );
        println!("{line}");
        lines.push(line);
        if !cli.no_profile {
            engine.reset().map_err(e)?;
            engine.model.set_prefill_profile(true);
            let start = Instant::now();
            engine.prefill(&seq[..len], PrefillMode::Batched { chunk: cli.chunk }, Logits::Last).map_err(e)?;
            let wall = start.elapsed().as_secs_f64();
            let stages = engine.model.prefill_profile().unwrap_or_default();
            engine.model.set_prefill_profile(false);
            profiles.push((len, wall, stages));
        }
    }
    let expert_flop = 2.0 * 3.0 * (cfg.hidden_dim * cfg.expert_ffn_dim * cfg.n_experts_used * cfg.n_layers) as f64;
    for (len, wall, stages) in &profiles {
        let mut parts: Vec<String> =
            stages.iter().map(|(k, v)| format!("{k} {v:.3} s ({:.0} %)", 100.0 * v / wall)).collect();
        parts.sort();
        let experts = stages.get("moe: routed experts").copied().unwrap_or(0.0);
        let achieved = expert_flop * *len as f64 / experts.max(1e-9);
        let floor = cli.flop_rate.map_or("no --flop-rate given".to_string(), |r| {
            format!("{:.3} of the {r:.1} TFLOP/s mul+add rate", achieved / 1e12 / r)
        });
        let line = format!(
            "profile at {len} tokens (synchronised per stage, wall {wall:.3} s): {}; routed-expert FLOP {:.2} G/token; the routed-expert matvecs (gate, up, SwiGLU, down) run at {:.2} TFLOP/s: {floor}",
            parts.join(", "),
            expert_flop / 1e9,
            achieved / 1e12
        );
        println!("{line}");
        lines.push(line);
    }
    if let Some(path) = &cli.out {
        std::fs::write(path, lines.join("\n") + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
