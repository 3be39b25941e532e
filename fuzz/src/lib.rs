//! The bodies of the fuzz targets, one function per target, each fed arbitrary bytes. A target
//! fails only by panicking (an overflow, an index out of range, a broken invariant checked
//! here), by hanging, or by running out of memory; an `Err` from the code under test is the
//! expected answer to a bad input. The libFuzzer entries (`fuzz_targets/`) call these, and
//! `tests/it/corpus.rs` replays the committed corpus and every regression input through them
//! without libFuzzer, so a fixed crash stays fixed in `cargo test`. Nothing here writes files.

use std::path::PathBuf;

use baro_dsl::ir::Kernel;
use baro_engine::model::{GgufFile, HfCheckpoint, ModelConfig};
use baro_engine::server::params::{self, Limits};
use baro_engine::server::{body, tools};
use baro_engine::tokenizer::{ChatMessage, ChatOptions, ChatTemplate, Specials, Tokenizer};

/// Tensors up to this many elements are dequantized (larger ones only have their view taken):
/// a fuzzed header may declare a gigabyte tensor over a small file only if the bytes are
/// there, and converting those is slow, not interesting.
const MAX_DEQUANT: usize = 1 << 16;

/// Text the tokenizer targets encode and decode once they have a tokenizer.
const SAMPLE_TEXT: &str = "<|im_start|>user\nHello, wörld! 123 \u{1F600}\n<|im_end|>";

/// The GGUF reader: the header, metadata and tensor directory; then every tensor's bytes
/// (dequantized when small), the model configuration and the tokenizer from its metadata.
pub fn gguf(data: &[u8]) {
    let Ok(file) = GgufFile::from_vec(data.to_vec()) else { return };
    for (_, v) in &file.metadata {
        let _ = (v.as_u64(), v.as_f64(), v.as_str(), v.kind(), v.type_id());
    }
    for info in &file.tensors {
        let view = file.tensor(&info.name).expect("a listed tensor has a view");
        assert_eq!(view.bytes.len() as u64, info.n_bytes, "{}: view length", info.name);
        assert_eq!(view.ty.bytes_for(view.shape), Some(view.bytes.len()), "{}: bytes for the shape", info.name);
        if view.n_elements() <= MAX_DEQUANT {
            assert_eq!(view.to_f32().len(), view.n_elements(), "{}: dequantized length", info.name);
        }
    }
    if let Ok(cfg) = ModelConfig::from_gguf(&file) {
        let _ = cfg.validate();
    }
    let _ = Tokenizer::from_gguf(&file);
}

/// The tiny fixture's configuration: a safetensors shard is read against a real config.
fn tiny_config() -> ModelConfig {
    ModelConfig::from_hf_json(include_str!("../../baro-engine/fixtures/tiny/config.json"))
        .expect("the tiny fixture's config")
}

/// The safetensors reader (its 8-byte length, the JSON header, the dtype and offset checks)
/// on one shard, then every tensor's bytes; the input's first byte, when it is `{`, is instead
/// read as a `config.json` (the HF configuration reader).
pub fn safetensors(data: &[u8]) {
    if data.first() == Some(&b'{') {
        if let Ok(text) = std::str::from_utf8(data) {
            if let Ok(cfg) = ModelConfig::from_hf_json(text) {
                let _ = cfg.validate();
                let _ = cfg.to_gguf_metadata();
            }
        }
        return;
    }
    let Ok(ck) = HfCheckpoint::from_parts(tiny_config(), vec![(PathBuf::from("fuzz.safetensors"), data.to_vec())])
    else {
        return;
    };
    let names: Vec<String> = ck.names().map(str::to_string).collect();
    for name in names {
        let view = ck.tensor(&name).expect("a listed tensor has a view");
        assert_eq!(view.ty.bytes_for(view.shape), Some(view.bytes.len()), "{name}: bytes for the shape");
        if view.n_elements() <= MAX_DEQUANT {
            assert_eq!(view.to_f32().len(), view.n_elements(), "{name}: converted length");
        }
    }
}

/// Encodes and decodes `SAMPLE_TEXT` and every id, with and without specials.
fn exercise(t: &Tokenizer) {
    for specials in [Specials::With, Specials::Without] {
        if let Ok(ids) = t.encode(SAMPLE_TEXT, specials) {
            let _ = t.decode(&ids, specials);
            let mut stream = t.stream(specials);
            for &id in &ids {
                let _ = stream.push(id);
            }
            let _ = stream.finish();
        }
    }
    for id in 0..t.n_ids().min(512) as u32 {
        let _ = (t.id_to_token(id), t.is_special(id));
    }
    let _ = t.decode(&[0, 1, u32::MAX], Specials::With);
}

/// The `tokenizer.json` loader, then the tokenizer on sample text.
pub fn tokenizer_json(data: &[u8]) {
    let Ok(t) = Tokenizer::from_json_bytes(data, "fuzz") else { return };
    exercise(&t);
}

/// The GGUF metadata tokenizer loader (`tokenizer.ggml.*`), then the tokenizer on sample text.
pub fn tokenizer_gguf(data: &[u8]) {
    let Ok(file) = GgufFile::from_vec(data.to_vec()) else { return };
    let Ok(t) = Tokenizer::from_gguf(&file) else { return };
    exercise(&t);
    if let Some(source) = t.chat_template() {
        if let Ok(template) = ChatTemplate::from_source(source) {
            let _ = template.render(&[ChatMessage::new("user", "hi")], &ChatOptions::default());
        }
    }
}

/// Splits `data` at NUL bytes into (template source, then role/content pairs): the template is
/// compiled and rendered with those messages; the messages are also rendered through the
/// built-in Qwen3.5 template.
pub fn chat_template(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.split('\0');
    let source = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    let messages: Vec<ChatMessage> =
        rest.chunks(2).map(|c| ChatMessage::new(c[0], c.get(1).copied().unwrap_or(""))).collect();
    let n = messages.len();
    for (i, generation) in [(0, false), (1, true)] {
        let options = ChatOptions {
            add_generation_prompt: generation,
            enable_thinking: [None, Some(true), Some(false)][(n + i) % 3],
            bos_token: "<s>".into(),
            eos_token: "</s>".into(),
        };
        if let Ok(template) = ChatTemplate::from_source(source) {
            let _ = template.render(&messages, &options);
        }
        let _ = ChatTemplate::qwen35().render(&messages, &options);
    }
}

/// The IR text parser; a kernel that parses prints to text that parses back to the same kernel
/// and prints the same again.
pub fn ir_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(kernel) = Kernel::from_text(text) else { return };
    let printed = kernel.to_string();
    let again =
        Kernel::from_text(&printed).unwrap_or_else(|e| panic!("printed kernel does not parse back: {e}\n{printed}"));
    assert_eq!(again.to_string(), printed, "print, parse, print is not a fixed point");
}

fn int(v: &serde_json::Value, key: &str) -> Option<i64> {
    v.get(key).and_then(serde_json::Value::as_i64)
}

/// The server's request parsing: `body::parse` (empty, malformed, non-object bodies, then a
/// typed request of both APIs' common shape) and the parameter checks of `params` on whatever
/// numbers and stop strings the body holds.
pub fn server_request(data: &[u8]) {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Typed {
        model: Option<String>,
        messages: Option<Vec<serde_json::Value>>,
        prompt: Option<serde_json::Value>,
        stop: Option<serde_json::Value>,
        response_format: Option<serde_json::Value>,
        format: Option<serde_json::Value>,
        tools: Option<serde_json::Value>,
        tool_choice: Option<serde_json::Value>,
        max_tokens: Option<i64>,
        temperature: Option<f32>,
        top_p: Option<f32>,
        top_k: Option<i64>,
        n: Option<i64>,
        seed: Option<serde_json::Number>,
        stream: Option<bool>,
    }
    let _ = tools::parse_call(&String::from_utf8_lossy(data));
    let route = "/fuzz";
    let Ok(value) = baro_engine::server::body::parse::<serde_json::Value>(data, route) else { return };
    let limits = Limits { max_tokens: 512, ctx: 4096 };
    let _ = params::max_tokens(int(&value, "max_tokens"), "max_tokens", 128, &limits);
    let _ = params::top_k(int(&value, "top_k"), "top_k");
    let _ = params::top_logprobs(int(&value, "top_logprobs"), "top_logprobs");
    let _ = params::one_choice(int(&value, "n"));
    let penalty = value.get("presence_penalty").and_then(serde_json::Value::as_f64).map(|p| p as f32);
    let _ = params::unsupported_penalty(penalty, "presence_penalty");
    if let Ok(typed) = baro_engine::server::body::parse::<Typed>(data, route) {
        if let Ok(stop) = body::strings(typed.stop, "stop") {
            let _ = params::stops(stop, "stop");
        }
        let _ = body::prompt(typed.prompt, "prompt");
        let _ = params::openai_spec(typed.response_format, None);
        let _ = params::ollama_spec(typed.format, None);
        if let Ok((tools, _)) = tools::parse_tools(typed.tools, "tools") {
            let _ = tools::parse_choice(typed.tool_choice, &tools);
        }
        let config = baro_engine::sampling::SamplerConfig {
            temperature: typed.temperature.unwrap_or(1.0),
            top_p: typed.top_p.unwrap_or(1.0),
            top_k: typed.top_k.map_or(0, |k| k.unsigned_abs() as usize),
            seed: body::seed(typed.seed.as_ref(), "seed").ok().flatten().unwrap_or(0),
            ..Default::default()
        };
        let _ = params::sampler(config, &|f| f);
    }
}
