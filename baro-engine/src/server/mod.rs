//! `baro-engine serve`'s library half: an HTTP server (axum on tokio) with OpenAI-compatible
//! (`/v1/chat/completions`, `/v1/completions`, `/v1/models`) and Ollama-compatible (`/api/chat`,
//! `/api/generate`, `/api/tags`) routes, streaming as server-sent events or NDJSON, plus
//! `/health` and `/metrics`.
//!
//! The routes parse and check a request (`body`, `params`), render the chat template, tokenize,
//! take a place in the bounded queue and hand a `Job` to the scheduler thread, which owns the
//! `Model` and steps every active sequence together (`scheduler`, `batch`), each in its own
//! `State`, so a request's tokens and log-probabilities are the same bytes whatever else is in
//! flight. A client that goes away closes its event channel and the scheduler frees its
//! sequence. Nothing here launches a kernel or calls a driver: the engine does.

pub mod batch;
pub mod body;
pub mod constrain;
pub mod error;
pub mod gbnf;
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
pub mod tools;

use std::sync::atomic::AtomicUsize;
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};

use crate::engine::Model;
use crate::tokenizer::{ChatTemplate, Tokenizer};

pub use error::{ApiError, ErrorKind, Flavor};
pub use job::{Event, Finish, Job, Ticket, TokenOut, Usage};
pub use metrics::Metrics;
pub use params::Limits;
pub use scheduler::SchedulerConfig;

/// The model a server serves, with its text side.
pub struct ServerModel {
    /// The weights and kernels every request's sequence is stepped on.
    pub model: Model,
    pub tokenizer: Tokenizer,
    pub template: ChatTemplate,
    /// The name clients use (`model` in requests).
    pub name: String,
    /// Bytes of the model's weights as stored (Ollama's `size`; 0 when unknown).
    pub size_bytes: u64,
}

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The most requests waiting or running at once; beyond it, 503.
    pub max_queue: usize,
    pub limits: Limits,
    pub scheduler: SchedulerConfig,
    /// The largest request body in bytes; beyond it, 413.
    pub max_body: usize,
    /// The bearer token both APIs require (`/`, `/health` and `/metrics` stay open); `None`: open.
    pub api_key: Option<String>,
    /// Whether each finished request writes one line to stderr (`request::log_line`).
    pub request_log: bool,
}

/// `--max-body`'s default: 2 MiB.
pub const DEFAULT_MAX_BODY: usize = 2 << 20;

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_queue: 64,
            limits: Limits { max_tokens: 512, ctx: 4096 },
            scheduler: SchedulerConfig {
                max_batch: 16,
                prefill_chunk: 64,
                prefix_cache: 4,
                prefix_block: 64,
                prefix_blocks: 16,
            },
            max_body: DEFAULT_MAX_BODY,
            api_key: None,
            request_log: false,
        }
    }
}

/// What exists once the model is loaded: its text side and the scheduler's job queue.
pub struct Ready {
    pub tokenizer: Arc<Tokenizer>,
    pub template: ChatTemplate,
    /// The chat template's source (Ollama's `/api/show`), when the model carries one.
    pub template_source: String,
    /// Compiles requests' schemas and grammars for this vocabulary.
    pub grammars: constrain::Grammars,
    jobs: Sender<Job>,
}

/// What every route shares.
pub struct App {
    pub name: String,
    pub family: String,
    pub size_bytes: u64,
    pub config: ServerConfig,
    pub metrics: Arc<Metrics>,
    /// Unix seconds at start (`created` of `/v1/models`).
    pub started: u64,
    /// `config.limits.ctx` capped by the model's context at load.
    limits_ctx: AtomicUsize,
    /// Set once, when the model has loaded; until then requests get 503 "loading".
    ready: OnceLock<Ready>,
    /// The scheduler thread, joined when the app goes (see `Drop`).
    scheduler: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for App {
    /// Closes the job queue and waits for the scheduler thread to drop the model, so no
    /// model teardown runs on after its server is gone (racing the process's exit and the
    /// code generator's global destructors).
    fn drop(&mut self) {
        drop(self.ready.take());
        if let Some(handle) = self.scheduler.get_mut().ok().and_then(Option::take) {
            let _ = handle.join();
        }
    }
}

/// A server: its routes, answering 503 "loading" until `load` has run, then feeding the
/// scheduler.
pub struct Server {
    app: Arc<App>,
}

/// Unix time in seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Server {
    /// A server for the model called `name` (`size_bytes` as stored, 0 when unknown) that is
    /// not loaded yet: bind and serve it at once, then `load` the model.
    pub fn new(name: String, size_bytes: u64, config: ServerConfig) -> Server {
        let app = App {
            name,
            family: "qwen35moe".to_string(),
            size_bytes,
            metrics: Arc::new(Metrics::default()),
            started: unix_now(),
            limits_ctx: AtomicUsize::new(config.limits.ctx),
            ready: OnceLock::new(),
            scheduler: std::sync::Mutex::new(None),
            config,
        };
        Server { app: Arc::new(app) }
    }

    /// A server with `model` loaded (`new` then `load`).
    pub fn start(model: ServerModel, config: ServerConfig) -> std::io::Result<Server> {
        let server = Server::new(model.name.clone(), model.size_bytes, config);
        server.load(model)?;
        Ok(server)
    }

    /// Loads `model` (`App::load`).
    pub fn load(&self, model: ServerModel) -> std::io::Result<()> {
        self.app.load(model)
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
    /// Starts the scheduler thread on `model`; from then on requests are served. The context
    /// limit is capped by the model's own capacity. Fails if called twice.
    pub fn load(&self, model: ServerModel) -> std::io::Result<()> {
        let app = self;
        let ctx = app.config.limits.ctx.min(model.model.max_context()).max(1);
        app.limits_ctx.store(ctx, std::sync::atomic::Ordering::Relaxed);
        let ServerModel { model, tokenizer, template, .. } = model;
        // The largest step the scheduler runs is max_batch decode rows or one prefill chunk:
        // its scratch is allocated now, a clear error here rather than an out-of-memory
        // mid-request.
        let scheduler = app.config.scheduler;
        let rows = scheduler.max_batch.max(scheduler.prefill_chunk);
        model.reserve_rows(rows).map_err(|e| {
            std::io::Error::other(format!("reserving device scratch for {rows} rows (max_batch / prefill_chunk): {e}"))
        })?;
        let template_source = tokenizer.chat_template().unwrap_or_default().to_string();
        let tokenizer = Arc::new(tokenizer);
        let grammars = constrain::Grammars::new(&tokenizer).map_err(std::io::Error::other)?;
        let (tx, rx) = std::sync::mpsc::channel();
        let (t, m, log) = (Arc::clone(&tokenizer), Arc::clone(&app.metrics), app.config.request_log);
        if app.is_ready() {
            return Err(std::io::Error::other(
                "the model is already loaded: expected one load, found a second (a bug in baro)",
            ));
        }
        let handle = std::thread::Builder::new()
            .name("baro-scheduler".into())
            .spawn(move || scheduler::run(model, &t, rx, scheduler, m, log))?;
        if let Ok(mut slot) = self.scheduler.lock() {
            *slot = Some(handle);
        }
        // Only one caller loads (the CLI, a test); a lost race would leave the extra scheduler
        // without jobs, and it exits.
        let _ = app.ready.set(Ready { tokenizer, template, template_source, grammars, jobs: tx });
        Ok(())
    }

    /// The loaded model, or 503 "loading" while it is not.
    pub fn ready(&self) -> Result<&Ready, ApiError> {
        self.ready.get().ok_or_else(|| {
            ApiError::new(
                ErrorKind::Loading,
                format!(
                    "model {:?} is loading: expected a loaded model, found it still loading; retry shortly",
                    self.name
                ),
            )
        })
    }

    pub fn is_ready(&self) -> bool {
        self.ready.get().is_some()
    }

    /// The context each sequence holds (the configured one, capped by the model's at load).
    pub fn ctx(&self) -> usize {
        self.limits_ctx.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The per-request limits, with the context as loaded.
    pub fn limits(&self) -> Limits {
        Limits { max_tokens: self.config.limits.max_tokens, ctx: self.ctx() }
    }

    /// Hands `job` to the scheduler.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        self.ready()?.jobs.send(job).map_err(|_| {
            ApiError::new(
                ErrorKind::Internal,
                "the scheduler has stopped: expected it running, found it gone (a bug in baro or a device failure)",
            )
        })
    }
}
