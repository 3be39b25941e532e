//! `baro-engine serve`: loads the model (the embedded default or `--model PATH`) as `run` does,
//! starts the server's scheduler on it and serves the OpenAI- and Ollama-compatible HTTP API
//! on `--host`:`--port` (127.0.0.1:8080 by default; port 0 picks a free one). Binds the port
//! first and prints `listening on http://ADDR` (requests get 503 "loading" meanwhile), then
//! loads the model and prints `ready on http://ADDR`, then serves until killed. Checks every
//! flag before any slow step; warns when listening beyond loopback without `--api-key`.

use std::path::PathBuf;

use baro_dsl::runtime::DeviceKind;
use baro_engine::engine::{EngineOptions, Model, Precision};
use baro_engine::server::{Limits, SchedulerConfig, Server, ServerConfig, ServerModel, DEFAULT_MAX_BODY};
use clap::builder::{PossibleValuesParser, TypedValueParser};

use crate::cli::load;
use crate::cli::progress::spin;
use crate::cli::target;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A GGUF file or a Hugging Face checkpoint folder [default: the built-in random-weight model]
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// The name clients give as `model` [default: the file or folder name, or baro-builtin]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub host: String,
    /// The port to listen on; 0 picks a free one
    #[arg(long, value_name = "N", default_value_t = 8080)]
    pub port: u16,
    /// Where to run [default: the best available: cuda, then hip, then host]
    #[arg(long, value_name = "TARGET", value_parser = PossibleValuesParser::new(target::NAMES).try_map(|s| s.parse::<DeviceKind>()))]
    pub target: Option<DeviceKind>,
    /// The most requests waiting or running at once; more get 503
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_queue: usize,
    /// The most sequences decoded together; more wait in the queue
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_batch: usize,
    /// The most tokens one request may generate
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub max_tokens: usize,
    /// Positions each sequence holds, prompt and output (capped by the model's context length)
    #[arg(long, value_name = "N", default_value_t = 4096, alias = "ctx")]
    pub max_context: usize,
    /// The most prompt tokens fed between two decode steps (each sequence's share one batched chunk)
    #[arg(long, value_name = "N", default_value_t = 64, alias = "chunk")]
    pub prefill_chunk: usize,
    /// Device memory to plan against, e.g. 24G (K, M, G, T: powers of 1024); routed experts are staged from pinned host memory when the model does not fit [default: the device's free memory]
    #[arg(long, value_name = "SIZE", value_parser = crate::cli::run::parse_budget)]
    pub vram_budget: Option<u64>,
    /// Decode expert slots per layer on the device when experts are staged (at least the model's top-k)
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub expert_slots: usize,
    /// Activations of the quantized matvecs: f32 (exact f32 activations) or q8 (8-bit blocks of 32, exact integer dots per block); decode and batched prefill agree byte for byte in either mode
    #[arg(long, value_name = "MODE", default_value = "f32", value_parser = PossibleValuesParser::new(Precision::NAMES).try_map(|s| s.parse::<Precision>()))]
    pub precision: Precision,
    /// Finished sequences' states kept for prompts that extend them; 0 is off
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub prefix_cache: usize,
    /// Tokens per block of the block prefix cache: the state at every such boundary of a prompt is saved, so a later prompt sharing a whole-block prefix (a system prompt) starts there; 0 is off
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub prefix_block: usize,
    /// States the block prefix cache keeps (each a whole sequence state: KV cache and recurrent state); 0 is off
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub prefix_blocks: usize,
    /// The largest request body in bytes; larger ones get 413
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY)]
    pub max_body: usize,
    /// A bearer token both APIs require (`Authorization: Bearer KEY`); `/`, `/health` and `/metrics` stay open
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Write no per-request line to stderr
    #[arg(long)]
    pub quiet: bool,
}

/// The `--help` text of the subcommand.
pub const LONG_ABOUT: &str =
    "Serve a qwen35moe model over HTTP: OpenAI-compatible /v1/chat/completions, /v1/completions and \
    /v1/models (streaming as server-sent events), Ollama-compatible /api/chat, /api/generate and /api/tags (streaming \
    NDJSON), /health and /metrics (Prometheus text).\n\n\
    Concurrent requests are decoded together, each sequence in its own state, so a request's tokens and logprobs are \
    the same bytes whatever else is in flight. Prompts are fed in chunks between decode steps. A client that \
    disconnects frees its sequence; beyond --max-queue requests the server answers 503.";

fn check(args: &ServeArgs) -> Result<(), String> {
    for (flag, v) in [
        ("--max-queue", args.max_queue),
        ("--max-batch", args.max_batch),
        ("--max-tokens", args.max_tokens),
        ("--max-context", args.max_context),
        ("--prefill-chunk", args.prefill_chunk),
        ("--max-body", args.max_body),
    ] {
        if v == 0 {
            return Err(format!("{flag}: expected at least 1, found 0"));
        }
    }
    if args.expert_slots == 0 {
        return Err("--expert-slots: expected at least the model's top-k, found 0".into());
    }
    if args.api_key.as_deref() == Some("") {
        return Err("--api-key: expected a non-empty key, found an empty one".into());
    }
    if let Some(path) = &args.model {
        load::check_path(path)?;
    }
    Ok(())
}

pub fn run(args: &ServeArgs) -> Result<(), String> {
    check(args)?;
    let device = target::open(args.target)?;
    let name = match (&args.name, &args.model) {
        (Some(n), _) => n.clone(),
        (None, Some(path)) => path.file_stem().map_or("model".into(), |s| s.to_string_lossy().into_owned()),
        (None, None) => "baro-builtin".into(),
    };
    let size_bytes =
        args.model.as_ref().and_then(|p| std::fs::metadata(p).ok()).filter(|m| m.is_file()).map_or(0, |m| m.len());
    let config = ServerConfig {
        max_queue: args.max_queue,
        limits: Limits { max_tokens: args.max_tokens, ctx: args.max_context },
        scheduler: SchedulerConfig {
            max_batch: args.max_batch,
            prefill_chunk: args.prefill_chunk,
            prefix_cache: args.prefix_cache,
            prefix_block: args.prefix_block,
            prefix_blocks: args.prefix_blocks,
        },
        max_body: args.max_body,
        api_key: args.api_key.clone(),
        request_log: !args.quiet,
    };
    let server = Server::new(name.clone(), size_bytes, config);
    let app = std::sync::Arc::clone(server.app());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    // The port is bound first, so a busy port is reported at once and clients get 503
    // "loading" (and `/health` 503) until the model is ready.
    let listener = runtime.block_on(tokio::net::TcpListener::bind((args.host.as_str(), args.port))).map_err(|e| {
        format!("--host {} --port {}: expected an address to listen on, found an error: {e}", args.host, args.port)
    })?;
    let addr = listener.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
    if !addr.ip().is_loopback() && args.api_key.is_none() {
        eprintln!("warning: listening on {addr}, beyond loopback, without --api-key: anyone who can reach this port can use the model");
    }
    println!("listening on http://{addr}");
    let serving = runtime.spawn(server.serve(listener));
    let (loaded, _) = match &args.model {
        None => spin("building the built-in model", load::default),
        Some(path) => spin("loading the model", || load::open(path)),
    };
    let loaded = loaded?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let Some(tokenizer) = loaded.tokenizer else {
        return Err("serve: expected a model with a tokenizer (the API speaks text), found none".into());
    };
    if args.expert_slots < loaded.config.n_experts_used {
        return Err(format!(
            "--expert-slots: expected at least the model's top-k ({}), found {}",
            loaded.config.n_experts_used, args.expert_slots
        ));
    }
    let options = EngineOptions {
        max_ctx: args.max_context,
        vram_budget: args.vram_budget,
        expert_slots: args.expert_slots,
        precision: args.precision,
        ..EngineOptions::default()
    };
    let (model, _) = spin("compiling kernels and uploading weights", || Model::new(device, &loaded.source, options));
    let model = model.map_err(|e| e.to_string())?;
    let target = format!("{} - {}", model.device().kind(), model.device().name());
    let model = ServerModel { model, tokenizer, template: loaded.template, name: name.clone(), size_bytes };
    app.load(model).map_err(|e| format!("cannot start the scheduler thread: {e}"))?;
    println!("model: {} (served as {name:?})", loaded.description);
    println!("target: {target}");
    println!("ready on http://{addr}");
    runtime.block_on(serving).map_err(|e| format!("serving: {e}"))?.map_err(|e| format!("serving: {e}"))
}
