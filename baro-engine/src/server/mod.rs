//! `baro-engine serve`'s library half: an HTTP server (axum on tokio) with OpenAI-compatible
//! (`/v1/chat/completions`, `/v1/completions`, `/v1/models`) and Ollama-compatible (`/api/chat`,
//! `/api/generate`, `/api/tags`) routes, streaming as server-sent events or NDJSON, plus
//! `/health` and `/metrics`.
//!
//! The routes parse and check a request (`body`, `params`), render the chat template, tokenize,
//! take a place in the bounded queue and hand a `Job` to the scheduler thread, which owns the
//! `Engine` and steps every active sequence together (`scheduler`, `batch`), each in its own
//! state, so a request's tokens and log-probabilities are the same bytes whatever else is in
//! flight. A client that goes away closes its event channel and the scheduler frees its
//! sequence. Nothing here launches a kernel or calls a driver: the engine does.

pub mod batch;
pub mod body;
pub mod error;
pub mod job;
pub mod logprob;
pub mod metrics;
pub mod ollama;
pub mod openai;
pub mod params;
pub mod prefix_cache;
pub mod prompt;
pub mod routes;
pub mod scheduler;
pub mod sequence;
pub mod stream;

use std::sync::mpsc::Sender;
use std::sync::Arc;

use crate::engine::Engine;
use crate::tokenizer::{ChatTemplate, Tokenizer};

pub use error::{ApiError, ErrorKind, Flavor};
pub use job::{Event, Finish, Job, Ticket, TokenOut, Usage};
pub use metrics::Metrics;
pub use params::Limits;
pub use scheduler::SchedulerConfig;

/// The model a server serves, with its text side.
pub struct ServerModel {
    pub engine: Engine,
    pub tokenizer: Tokenizer,
    pub template: ChatTemplate,
    /// The name clients use (`model` in requests).
    pub name: String,
    /// Bytes of the model's weights as stored (Ollama's `size`; 0 when unknown).
    pub size_bytes: u64,
}

/// Server settings.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// The most requests waiting or running at once; beyond it, 503.
    pub max_queue: usize,
    pub limits: Limits,
    pub scheduler: SchedulerConfig,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_queue: 64,
            limits: Limits { max_tokens: 512, ctx: 4096 },
            scheduler: SchedulerConfig { max_batch: 16, prefill_chunk: 64, prefix_cache: 4 },
        }
    }
}

/// What every route shares.
pub struct App {
    pub name: String,
    pub family: String,
    pub size_bytes: u64,
    pub tokenizer: Arc<Tokenizer>,
    pub template: ChatTemplate,
    pub config: ServerConfig,
    pub metrics: Arc<Metrics>,
    /// Unix seconds at start (`created` of `/v1/models`).
    pub started: u64,
    jobs: Sender<Job>,
}

/// A running scheduler and the routes that feed it.
pub struct Server {
    app: Arc<App>,
}

/// Unix time in seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Server {
    /// Starts the scheduler thread on `model`'s engine. The context limit is capped by the
    /// engine's own capacity.
    pub fn start(model: ServerModel, mut config: ServerConfig) -> std::io::Result<Server> {
        let engine_ctx = model.engine.new_state().map(|s| s.max_ctx).unwrap_or(config.limits.ctx);
        config.limits.ctx = config.limits.ctx.min(engine_ctx).max(1);
        let ServerModel { mut engine, tokenizer, template, name, size_bytes } = model;
        // The largest step the scheduler runs is max_batch decode rows or one prefill chunk:
        // its scratch is allocated now, a clear error here rather than an out-of-memory
        // mid-request.
        let rows = config.scheduler.max_batch.max(config.scheduler.prefill_chunk);
        engine.reserve_rows(rows).map_err(|e| std::io::Error::other(format!("reserving device scratch for {rows} rows (max_batch / prefill_chunk): {e}")))?;
        let family = "qwen35moe".to_string();
        let tokenizer = Arc::new(tokenizer);
        let metrics = Arc::new(Metrics::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let (t, m, s) = (Arc::clone(&tokenizer), Arc::clone(&metrics), config.scheduler);
        std::thread::Builder::new().name("baro-scheduler".into()).spawn(move || scheduler::run(engine, &t, rx, s, m))?;
        let app = App { name, family, size_bytes, tokenizer, template, config, metrics, started: unix_now(), jobs: tx };
        Ok(Server { app: Arc::new(app) })
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Every route.
    pub fn router(&self) -> axum::Router {
        routes::router(Arc::clone(&self.app))
    }

    /// Serves on `listener` until the process ends.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.router()).await
    }
}

impl App {
    /// Hands `job` to the scheduler.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        self.jobs.send(job).map_err(|_| ApiError::new(ErrorKind::Internal, "the scheduler has stopped: expected it running, found it gone (a bug in baro or a device failure)"))
    }
}
