//! What the server tests share: the embedded default model (the CLI's own builder, included
//! by path: random weights, the real Qwen3.5 tokenizer and template) on the host, a server on
//! 127.0.0.1 with an ephemeral port, and a small HTTP/1.1 client over hyper that can read a
//! streaming body record by record and hang up mid-stream. Loopback only.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use baro_dsl::runtime::Device;
use baro_engine::engine::{EngineOptions, Model, ModelSource};
use baro_engine::model::GgufFile;
use baro_engine::server::{App, Limits, SchedulerConfig, Server, ServerConfig, ServerModel};
use baro_engine::tokenizer::{ChatTemplate, Tokenizer};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

#[path = "../../../src/cli/default_model.rs"]
#[allow(dead_code)]
pub mod default_model;

/// The default model's GGUF bytes, built once per test binary.
fn gguf_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        default_model::gguf_bytes(&default_model::config(), default_model::MIX, default_model::WEIGHT_SEED)
            .expect("the built-in model")
    })
}

/// The default model's source (a fresh copy: a model takes it by reference only).
pub fn source() -> ModelSource {
    ModelSource::Gguf(GgufFile::from_vec(gguf_bytes().to_vec()).expect("the built-in model reads back"))
}

/// The default model ready to serve, with a context of `ctx` positions.
pub fn model(ctx: usize) -> ServerModel {
    let model = Model::new(
        Device::host().expect("the host device"),
        &source(),
        EngineOptions { max_ctx: ctx, ..EngineOptions::default() },
    )
    .expect("model");
    let tokenizer = Tokenizer::qwen35().expect("the built-in tokenizer");
    ServerModel { model, tokenizer, template: ChatTemplate::qwen35(), name: "tiny".into(), size_bytes: 0 }
}

/// A small configuration: room for `max_queue` requests, 32-token outputs, a 256-token context.
pub fn config(max_queue: usize) -> ServerConfig {
    ServerConfig {
        max_queue,
        limits: Limits { max_tokens: 32, ctx: 256 },
        scheduler: SchedulerConfig {
            max_batch: 16,
            prefill_chunk: 16,
            prefix_cache: 4,
            prefix_block: 0,
            prefix_blocks: 0,
        },
        ..ServerConfig::default()
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub app: Arc<App>,
}

/// Starts a server with `config` on the current runtime.
pub async fn start(config: ServerConfig) -> TestServer {
    let ctx = config.limits.ctx;
    let model = tokio::task::spawn_blocking(move || model(ctx)).await.expect("building the model");
    let server = Server::start(model, config).expect("server");
    let app = Arc::clone(server.app());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(server.serve(listener));
    TestServer { addr, app }
}

/// One server for a whole test binary, on a runtime of its own that outlives every test's.
pub fn shared() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            rt.block_on(async {
                let server = start(config(64)).await;
                tx.send(server.addr).expect("send the address");
                std::future::pending::<()>().await
            })
        });
        rx.recv().expect("the shared server started")
    })
}

/// An open response whose body is read as it arrives.
pub struct Response {
    pub status: u16,
    pub content_type: String,
    body: Incoming,
    conn: JoinHandle<()>,
    buf: Vec<u8>,
}

async fn send(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Response {
    send_with(addr, method, path, body, &[]).await
}

/// Sends a request with extra `headers`.
pub async fn send_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Response {
    let stream = TcpStream::connect(addr).await.expect("connect to the test server");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("http handshake");
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.unwrap_or("").to_string()))).expect("request");
    let resp = sender.send_request(req).await.expect("response head");
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    Response { status: resp.status().as_u16(), content_type, body: resp.into_body(), conn, buf: Vec::new() }
}

impl Response {
    /// The whole body as text.
    pub async fn text(mut self) -> String {
        while let Some(frame) = self.body.frame().await {
            if let Ok(data) = frame.expect("body frame").into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
        String::from_utf8(std::mem::take(&mut self.buf)).expect("utf-8 body")
    }

    /// The next record ending in `sep` (`"\n\n"` for SSE, `"\n"` for NDJSON), without it;
    /// `None` at the end of the body.
    pub async fn record(&mut self, sep: &str) -> Option<String> {
        loop {
            if let Some(at) = self.buf.windows(sep.len()).position(|w| w == sep.as_bytes()) {
                let rec: Vec<u8> = self.buf.drain(..at + sep.len()).take(at).collect();
                return Some(String::from_utf8(rec).expect("utf-8 record"));
            }
            match self.body.frame().await {
                None => return None,
                Some(frame) => {
                    if let Ok(data) = frame.expect("body frame").into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// The next server-sent event's data (`[DONE]` included).
    pub async fn sse(&mut self) -> Option<String> {
        let rec = self.record("\n\n").await?;
        Some(rec.strip_prefix("data: ").unwrap_or_else(|| panic!("expected a data record, found {rec:?}")).to_string())
    }

    /// Every remaining server-sent event's data, up to `[DONE]` (excluded), parsed.
    pub async fn sse_all(&mut self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        while let Some(data) = self.sse().await {
            if data == "[DONE]" {
                assert!(self.sse().await.is_none(), "expected the body to end after [DONE]");
                return out;
            }
            out.push(serde_json::from_str(&data).unwrap_or_else(|e| panic!("bad event {data:?}: {e}")));
        }
        panic!("the stream ended without [DONE] after {out:?}");
    }

    /// Every remaining NDJSON line, parsed.
    pub async fn ndjson_all(&mut self) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        while let Some(line) = self.record("\n").await {
            out.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")));
        }
        out
    }

    /// Hangs up: the connection closes with the body unread.
    pub fn disconnect(self) {
        self.conn.abort();
        drop(self.body);
    }
}

pub async fn post(addr: SocketAddr, path: &str, body: &str) -> Response {
    send(addr, "POST", path, Some(body)).await
}

/// The status and parsed JSON body of a response.
pub async fn json_of(r: Response) -> (u16, serde_json::Value) {
    let status = r.status;
    let text = r.text().await;
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("expected JSON, found {text:?}: {e}")))
}

pub async fn get(addr: SocketAddr, path: &str) -> Response {
    send(addr, "GET", path, None).await
}

/// POSTs `body` and parses the JSON answer, with its status.
pub async fn post_json(addr: SocketAddr, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let r = post(addr, path, &body.to_string()).await;
    let status = r.status;
    let text = r.text().await;
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: expected JSON, found {text:?}: {e}")))
}

/// A metric's value from `/metrics`.
pub async fn metric(addr: SocketAddr, name: &str) -> f64 {
    let text = get(addr, "/metrics").await.text().await;
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("metric {name} not in:\n{text}"))
        .parse()
        .expect("a number")
}

/// Polls `/metrics` until `name` equals `value` (the scheduler updates it on its next tick);
/// gives up after a generous bound of polls, which no timing assertion depends on.
pub async fn wait_metric(addr: SocketAddr, name: &str, value: f64) {
    for _ in 0..1200 {
        if metric(addr, name).await == value {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("metric {name} never reached {value}: it is {}", metric(addr, name).await);
}
