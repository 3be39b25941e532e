//! `serve_load`: requests/s and tokens/s of `baro-engine serve` at several concurrency levels
//! (1, 4, 16, 64 streams by default), the server in-process on 127.0.0.1 and driven over
//! loopback by `c` client tasks that send non-streaming `/v1/completions` back to back.
//! The model is the embedded tiny one (the CLI's builder, included by path) on the host, or
//! `--model` (a GGUF pack) on `--target` (host or cuda). Bounded: a fixed count of requests
//! per level and a wall-clock cap per level after which no new request starts. With
//! `--memory-requests N`, N more requests at the largest level are sent afterwards and the
//! device's free memory (the driver's figure, read through a second context on the same
//! device; the process's resident set on the host) is reported before and after them.
//! Never sends traffic anywhere but loopback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::process::ExitCode;

use baro_bench::report::Meta;
use baro_dsl::runtime::{Device, DeviceKind};
use baro_engine::engine::staging::parse_bytes;
use baro_engine::engine::{EngineOptions, Model, ModelSource, Precision};
use baro_engine::model::GgufFile;
use baro_engine::server::{Limits, SchedulerConfig, Server, ServerConfig, ServerModel};
use baro_engine::tokenizer::{ChatTemplate, Tokenizer};
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

#[path = "../../../baro-engine/src/cli/default_model.rs"]
#[allow(dead_code)]
mod default_model;

#[derive(Parser)]
#[command(about = "requests/s and tokens/s of the HTTP server at several concurrency levels (loopback)")]
struct Cli {
    /// A GGUF model [default: the embedded tiny model].
    #[arg(long)]
    model: Option<PathBuf>,
    /// host or cuda.
    #[arg(long, default_value = "host")]
    target: String,
    #[arg(long)]
    vram_budget: Option<String>,
    /// The context limit of every sequence.
    #[arg(long, default_value_t = 512)]
    ctx: usize,
    /// After the levels, this many more requests at the largest level, with the device's free
    /// memory before and after them.
    #[arg(long, default_value_t = 0)]
    memory_requests: usize,
    /// Tokens each of those requests generates [default: --max-tokens].
    #[arg(long)]
    memory_max_tokens: Option<usize>,
    /// Concurrent client streams, one level after another.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    levels: Vec<usize>,
    /// Requests per level [default: the larger of 16 and the level].
    #[arg(long)]
    requests: Option<usize>,
    /// Tokens each request generates (greedy; fewer when EOS comes first).
    #[arg(long, default_value_t = 8)]
    max_tokens: usize,
    /// No new request starts after this many seconds of a level.
    #[arg(long, default_value_t = 300)]
    max_seconds: u64,
    /// Also write the table to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The commit measured [default: $BARO_COMMIT].
    #[arg(long)]
    commit: Option<String>,
    /// Activations of the quantized matvecs: f32 or q8 (8-bit blocks, exact integer dots).
    #[arg(long, default_value = "f32")]
    precision: Precision,
}

struct Level {
    concurrency: usize,
    requests: usize,
    generated: u64,
    prompt: u64,
    wall: Duration,
    latencies: Vec<Duration>,
}

async fn completion(addr: SocketAddr, body: String) -> Result<(u64, u64), String> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    let req = hyper::Request::post("/v1/completions")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("request: {e}"))?;
    let resp = sender.send_request(req).await.map_err(|e| format!("send: {e}"))?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| format!("json: {e}"))?;
    if !status.is_success() {
        return Err(format!("status {status}: {v}"));
    }
    let usage = &v["usage"];
    Ok((usage["completion_tokens"].as_u64().unwrap_or(0), usage["prompt_tokens"].as_u64().unwrap_or(0)))
}

async fn level(
    addr: SocketAddr,
    concurrency: usize,
    requests: usize,
    max_tokens: usize,
    cap: Duration,
) -> Result<Level, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let next = Arc::clone(&next);
        workers.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests || start.elapsed() > cap {
                    return Ok::<_, String>(out);
                }
                let body = serde_json::json!({ "prompt": format!("Request {i}: the weather on day {}", i % 7), "max_tokens": max_tokens, "temperature": 0 }).to_string();
                let t = Instant::now();
                let (gen, prompt) = completion(addr, body).await?;
                out.push((t.elapsed(), gen, prompt));
            }
        }));
    }
    let mut done =
        Level { concurrency, requests: 0, generated: 0, prompt: 0, wall: Duration::ZERO, latencies: Vec::new() };
    for w in workers {
        for (lat, gen, prompt) in w.await.map_err(|e| format!("worker: {e}"))?? {
            done.requests += 1;
            done.generated += gen;
            done.prompt += prompt;
            done.latencies.push(lat);
        }
    }
    done.wall = start.elapsed();
    done.latencies.sort();
    Ok(done)
}

/// The server's model, and a line saying what it is and where it runs.
fn model(cli: &Cli, target: DeviceKind) -> Result<(ServerModel, String, Meta), String> {
    let (source, shown) = match &cli.model {
        None => {
            let cfg = default_model::config();
            let bytes = default_model::gguf_bytes(&cfg, default_model::MIX, default_model::WEIGHT_SEED)
                .map_err(|e| e.to_string())?;
            (
                ModelSource::Gguf(GgufFile::from_vec(bytes).map_err(|e| e.to_string())?),
                "built-in tiny model".to_string(),
            )
        }
        Some(path) => (
            ModelSource::open(path).map_err(|e| format!("--model {}: {e}", path.display()))?,
            path.display().to_string(),
        ),
    };
    let tokenizer = match &source {
        ModelSource::Gguf(file) if file.meta("tokenizer.ggml.model").is_some() => {
            Tokenizer::from_gguf(file).map_err(|e| format!("{shown}: its tokenizer: {e}"))?
        }
        _ => Tokenizer::qwen35().map_err(|e| e.to_string())?,
    };
    let device = Device::open(target, 0).map_err(|e| e.to_string())?;
    let meta = Meta::new(device.name(), device.driver_version(), cli.commit.clone());
    let described = format!("{shown} on {} ({})", device.name(), device.driver_version());
    let vram_budget =
        cli.vram_budget.as_deref().map(parse_bytes).transpose().map_err(|e| format!("--vram-budget: {e}"))?;
    let model = Model::new(
        device,
        &source,
        EngineOptions { max_ctx: cli.ctx, vram_budget, precision: cli.precision, ..EngineOptions::default() },
    )
    .map_err(|e| e.to_string())?;
    let described = format!("{described}, memory: {}", model.memory_plan());
    let size_bytes = cli.model.as_ref().and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len());
    Ok((
        ServerModel { model, tokenizer, template: ChatTemplate::qwen35(), name: "baro-load".into(), size_bytes },
        described,
        meta,
    ))
}

/// Free device memory in bytes (the driver's figure), or on the host the process's resident set
/// with the word that says which.
fn memory_now(probe: &Option<Device>) -> Result<(u64, &'static str), String> {
    match probe {
        Some(d) => match d.memory_info().map_err(|e| e.to_string())? {
            Some(m) => Ok((m.free, "device free")),
            None => Err("the probe device reports no memory figure".into()),
        },
        None => {
            let statm = std::fs::read_to_string("/proc/self/statm").map_err(|e| format!("/proc/self/statm: {e}"))?;
            let pages: u64 = statm
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse().ok())
                .ok_or("/proc/self/statm: expected a resident page count")?;
            Ok((pages * 4096, "host resident set"))
        }
    }
}

pub fn main() -> ExitCode {
    match main_inner(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("serve_load: {e}");
            ExitCode::from(2)
        }
    }
}

fn main_inner(cli: Cli) -> Result<(), String> {
    let target: DeviceKind = cli.target.parse().map_err(|e: baro_dsl::runtime::DeviceError| e.to_string())?;
    let most = cli.levels.iter().copied().max().unwrap_or(1);
    let memory_tokens = cli.memory_max_tokens.unwrap_or(cli.max_tokens);
    let config = ServerConfig {
        max_queue: most.max(1),
        limits: Limits { max_tokens: cli.max_tokens.max(memory_tokens).max(1), ctx: cli.ctx },
        scheduler: SchedulerConfig {
            max_batch: most.max(1),
            prefill_chunk: 64,
            prefix_cache: 0,
            prefix_block: 0,
            prefix_blocks: 0,
        },
        ..ServerConfig::default()
    };
    // A second context on the same device reads the driver's free-memory figure, which covers
    // every context, the server's included.
    let probe = match target {
        DeviceKind::Host => None,
        _ => Some(Device::open(target, 0).map_err(|e| e.to_string())?),
    };
    let (model, described, meta) = model(&cli, target)?;
    eprintln!("serve_load: {described}");
    let server = Server::start(model, config).map_err(|e| e.to_string())?;
    let metrics = Arc::clone(&server.app().metrics);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let levels = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        tokio::spawn(server.serve(listener));
        // One untimed request: the first step warms caches and the allocator.
        completion(addr, serde_json::json!({ "prompt": "warm up", "max_tokens": 2, "temperature": 0 }).to_string())
            .await?;
        let mut levels = Vec::new();
        for &c in &cli.levels {
            let n = cli.requests.unwrap_or(c.max(16));
            let l = level(addr, c.max(1), n, cli.max_tokens, Duration::from_secs(cli.max_seconds)).await?;
            eprintln!("concurrency {c}: {} requests in {:.1} s", l.requests, l.wall.as_secs_f64());
            levels.push(l);
        }
        // Two halves, the figure read before, between and after: growth in the second half
        // would be a leak, not a one-time allocation.
        let mut memory = None;
        if cli.memory_requests > 0 {
            let (before, what) = memory_now(&probe)?;
            let mut figures = vec![before];
            let mut halves = Vec::new();
            for n in [cli.memory_requests / 2, cli.memory_requests - cli.memory_requests / 2] {
                halves.push(level(addr, most.max(1), n, memory_tokens, Duration::from_secs(cli.max_seconds)).await?);
                // The last response can reach the client before the scheduler has freed its sequence.
                tokio::time::sleep(Duration::from_millis(500)).await;
                figures.push(memory_now(&probe)?.0);
            }
            memory = Some((halves, figures, what));
        }
        Ok::<_, String>((levels, memory))
    })?;
    let (levels, memory) = levels;
    let mut table = meta.markdown_header() + "\n";
    table += &format!(
        "serve_load: /v1/completions, max_tokens {}, greedy, {described}, loopback\n\
         {:>11} {:>8} {:>7} {:>10} {:>12} {:>13} {:>10} {:>10}\n",
        cli.max_tokens,
        "concurrency",
        "requests",
        "wall s",
        "requests/s",
        "gen tok/s",
        "prompt tok/s",
        "p50 s",
        "p95 s"
    );
    for l in &levels {
        let secs = l.wall.as_secs_f64().max(1e-9);
        let pct = |p: f64| {
            l.latencies.get(((l.latencies.len() as f64 - 1.0) * p).round() as usize).map_or(0.0, |d| d.as_secs_f64())
        };
        table.push_str(&format!(
            "{:>11} {:>8} {:>7.1} {:>10.3} {:>12.2} {:>13.2} {:>10.2} {:>10.2}\n",
            l.concurrency,
            l.requests,
            secs,
            l.requests as f64 / secs,
            l.generated as f64 / secs,
            l.prompt as f64 / secs,
            pct(0.5),
            pct(0.95)
        ));
    }
    if let Some((halves, figures, what)) = &memory {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let requests: usize = halves.iter().map(|l| l.requests).sum();
        let wall: f64 = halves.iter().map(|l| l.wall.as_secs_f64()).sum();
        let change = |a: u64, b: u64| (b as f64 - a as f64) / (1u64 << 20) as f64;
        table.push_str(&format!(
            "memory: {requests} requests ({} + {}, max_tokens {memory_tokens}) at concurrency {} in {wall:.1} s; {what}: before {:.1} MiB, after the first half {:.1} MiB ({:+.1}), after all {:.1} MiB ({:+.1} over the second half, {:+.1} overall)\n",
            halves[0].requests,
            halves[1].requests,
            most.max(1),
            mib(figures[0]),
            mib(figures[1]),
            change(figures[0], figures[1]),
            mib(figures[2]),
            change(figures[1], figures[2]),
            change(figures[0], figures[2])
        ));
    }
    let m = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    table.push_str(&format!(
        "server: {} completed, {} failed, {} rejected; {} batched decode steps carrying {} rows (peak batch {}), {} prompt tokens through batched prefill\n",
        m(&metrics.completed),
        m(&metrics.failed),
        m(&metrics.rejected),
        m(&metrics.batched_steps),
        m(&metrics.batched_rows),
        metrics.batch_peak.load(Ordering::Relaxed),
        m(&metrics.prompt_tokens_batched)
    ));
    print!("{table}");
    if let Some(path) = &cli.out {
        std::fs::write(path, &table).map_err(|e| format!("--out {}: {e}", path.display()))?;
    }
    Ok(())
}
