//! `serve_load`: requests/s and tokens/s of `baro-engine serve` at several concurrency levels
//! (1, 4, 16, 64 streams by default) on the embedded tiny model (the CLI's builder, included by
//! path) on the host, the server in-process on 127.0.0.1 and driven over loopback by `c`
//! client tasks that send non-streaming `/v1/completions` back to back. Bounded: a fixed count
//! of requests per level and a wall-clock cap per level after which no new request starts.
//! Never sends traffic anywhere but loopback. Host CPU numbers only, not a GPU's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baro_dsl::runtime::Device;
use baro_engine::engine::{Engine, EngineOptions, ModelSource};
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
#[command(about = "requests/s and tokens/s of the HTTP server at several concurrency levels (loopback, tiny model, host)")]
struct Cli {
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
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("handshake: {e}"))?;
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

async fn level(addr: SocketAddr, concurrency: usize, requests: usize, max_tokens: usize, cap: Duration) -> Result<Level, String> {
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
    let mut done = Level { concurrency, requests: 0, generated: 0, prompt: 0, wall: Duration::ZERO, latencies: Vec::new() };
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

fn model() -> Result<ServerModel, String> {
    let cfg = default_model::config();
    let bytes = default_model::gguf_bytes(&cfg, default_model::MIX, default_model::WEIGHT_SEED).map_err(|e| e.to_string())?;
    let source = ModelSource::Gguf(GgufFile::from_vec(bytes).map_err(|e| e.to_string())?);
    let device = Device::host().map_err(|e| e.to_string())?;
    let engine = Engine::new(device, &source, EngineOptions { max_ctx: 512, ..EngineOptions::default() }).map_err(|e| e.to_string())?;
    let tokenizer = Tokenizer::qwen35().map_err(|e| e.to_string())?;
    Ok(ServerModel { engine, tokenizer, template: ChatTemplate::qwen35(), name: "baro-builtin".into(), size_bytes: 0 })
}

fn main() -> Result<(), String> {
    let cli = Cli::parse();
    let most = cli.levels.iter().copied().max().unwrap_or(1);
    let config = ServerConfig {
        max_queue: most.max(1),
        limits: Limits { max_tokens: cli.max_tokens.max(1), ctx: 512 },
        scheduler: SchedulerConfig { max_batch: most.max(1), prefill_chunk: 64, prefix_cache: 0 },
    };
    let server = Server::start(model()?, config).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let levels = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        tokio::spawn(server.serve(listener));
        // One untimed request: the first step warms caches and the allocator.
        completion(addr, serde_json::json!({ "prompt": "warm up", "max_tokens": 2, "temperature": 0 }).to_string()).await?;
        let mut levels = Vec::new();
        for &c in &cli.levels {
            let n = cli.requests.unwrap_or(c.max(16));
            let l = level(addr, c.max(1), n, cli.max_tokens, Duration::from_secs(cli.max_seconds)).await?;
            eprintln!("concurrency {c}: {} requests in {:.1} s", l.requests, l.wall.as_secs_f64());
            levels.push(l);
        }
        Ok::<_, String>(levels)
    })?;
    let mut table = format!(
        "serve_load: /v1/completions, max_tokens {}, greedy, built-in tiny model on the host CPU (not a GPU), loopback\n\
         {:>11} {:>8} {:>7} {:>10} {:>12} {:>13} {:>10} {:>10}\n",
        cli.max_tokens, "concurrency", "requests", "wall s", "requests/s", "gen tok/s", "prompt tok/s", "p50 s", "p95 s"
    );
    for l in &levels {
        let secs = l.wall.as_secs_f64().max(1e-9);
        let pct = |p: f64| l.latencies.get(((l.latencies.len() as f64 - 1.0) * p).round() as usize).map_or(0.0, |d| d.as_secs_f64());
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
    print!("{table}");
    if let Some(path) = &cli.out {
        std::fs::write(path, &table).map_err(|e| format!("--out {}: {e}", path.display()))?;
    }
    Ok(())
}
