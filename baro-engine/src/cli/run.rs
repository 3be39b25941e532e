//! `baro-engine` with no subcommand: generate text. Without `--model`, from the embedded
//! default (a small random-weight qwen35moe built in memory, the real Qwen3.5 tokenizer); with
//! it, from a GGUF file or a Hugging Face folder. Prints the target, the prompt, the text as it
//! is produced, and prompt and generation tokens/s. Checks every flag before any slow step;
//! a user's mistake is an `Err` with what was expected and what was found, never a panic.

use std::io::Write;
use std::path::PathBuf;

use baro_dsl::runtime::DeviceKind;
use baro_engine::engine::staging::{self, format_bytes};
use baro_engine::engine::{Engine, EngineOptions, Model, Precision, PrefillMode};
use baro_engine::sampling::{SampleError, Sampler, SamplerConfig, StopReason};
use baro_engine::tokenizer::{ChatMessage, ChatOptions, Specials, TokenId};
use clap::builder::{PossibleValuesParser, TypedValueParser};

use crate::cli::generate::{self, Ended, Report, Settings};
use crate::cli::load::{self, Loaded};
use crate::cli::progress::spin;
use crate::cli::target;

/// The prompt of a run without `--prompt`.
pub const DEFAULT_PROMPT: &str = "Explain in one sentence why the order of floating-point additions matters.";

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A GGUF file or a Hugging Face checkpoint folder [default: the built-in random-weight model]
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// The user's message, rendered with the chat template unless --raw
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_PROMPT, hide_default_value = true)]
    pub prompt: String,
    /// The prompt as comma-separated token ids, fed as they are (no template); for models without a tokenizer
    #[arg(long, value_name = "ID,ID,...", value_delimiter = ',', num_args = 1.., conflicts_with_all = ["prompt", "raw"])]
    pub prompt_ids: Option<Vec<TokenId>>,
    /// Feed the prompt text as it is, without the chat template
    #[arg(long)]
    pub raw: bool,
    /// The most tokens to generate
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 is greedy
    #[arg(long, value_name = "T", default_value_t = 0.8, allow_negative_numbers = true)]
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 is off
    #[arg(long, value_name = "K", default_value_t = 40)]
    pub top_k: usize,
    /// Keep the most likely tokens up to this total probability; 1 is off
    #[arg(long, value_name = "P", default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Keep tokens at least this fraction as likely as the most likely one; 0 is off
    #[arg(long, value_name = "P", default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Penalty on tokens already in the prompt or the output; 1 is off
    #[arg(long, value_name = "R", default_value_t = 1.0, allow_negative_numbers = true)]
    pub repetition_penalty: f32,
    /// Seed of the sampler; the same seed, model, prompt and flags give the same text
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Stop when the text contains STR (repeatable); EOS tokens always stop
    #[arg(long, value_name = "STR")]
    pub stop: Vec<String>,
    /// Where to run [default: the best available: cuda, then hip, then host]
    #[arg(long, value_name = "TARGET", value_parser = PossibleValuesParser::new(target::NAMES).try_map(|s| s.parse::<DeviceKind>()))]
    pub target: Option<DeviceKind>,
    /// Positions the KV cache holds (capped by the model's context length)
    #[arg(long, value_name = "N", default_value_t = 4096, alias = "ctx")]
    pub max_context: usize,
    /// How the prompt is fed: `batched` (chunks through the rows kernels, bit-identical to
    /// replay) or `replay` (one decode step per token)
    #[arg(long, value_name = "MODE", default_value = "batched", value_parser = ["batched", "replay"])]
    pub prefill: String,
    /// Prompt tokens per batched chunk
    #[arg(long, value_name = "N", default_value_t = PrefillMode::DEFAULT_CHUNK, alias = "chunk")]
    pub prefill_chunk: usize,
    /// Device memory to plan against, e.g. 24G (K, M, G, T: powers of 1024); routed experts are staged from pinned host memory when the model does not fit [default: the device's free memory]
    #[arg(long, value_name = "SIZE", value_parser = parse_budget)]
    pub vram_budget: Option<u64>,
    /// Decode expert slots per layer on the device when experts are staged (at least the model's top-k)
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub expert_slots: usize,
    /// Activations of the quantized matvecs: f32 (exact f32 activations) or q8 (8-bit blocks of 32, exact integer dots per block); decode and batched prefill agree byte for byte in either mode
    #[arg(long, value_name = "MODE", default_value = "f32", value_parser = PossibleValuesParser::new(Precision::NAMES).try_map(|s| s.parse::<Precision>()))]
    pub precision: Precision,
}

pub(crate) fn parse_budget(text: &str) -> Result<u64, String> {
    staging::parse_bytes(text)
}

impl RunArgs {
    /// The prefill mode the flags ask for.
    pub fn prefill_mode(&self) -> Result<PrefillMode, String> {
        match self.prefill.as_str() {
            "replay" => Ok(PrefillMode::Replay),
            _ if self.prefill_chunk == 0 => Err("--prefill-chunk: expected at least 1 token per chunk, found 0".into()),
            _ => Ok(PrefillMode::Batched { chunk: self.prefill_chunk }),
        }
    }
}

/// The `--help` text of the generation command.
pub const LONG_ABOUT: &str = "baro's inference engine: generates text from a qwen35moe model with baro kernels.\n\n\
    With no arguments, runs the built-in model: qwen35moe-shaped, tiny (hidden 64, 4 layers, 8 experts) with the real \
    Qwen3.5 vocabulary and tokenizer, and random but fixed weights generated in memory at start-up. Its text is \
    gibberish by design; it shows the whole path (tokenizer, chat template, decode kernels, sampling, streaming) and its \
    speed on the best available target. Give --model PATH (a GGUF file or a Hugging Face folder) for a real model.\n\n\
    A model without a tokenizer (no GGUF tokenizer metadata, no tokenizer.json) gets the built-in Qwen3.5 tokenizer \
    when its vocabulary holds every Qwen3.5 id; a smaller one has no tokenizer: give the prompt with --prompt-ids and \
    the output is printed as ids.";

fn sampler_config(args: &RunArgs) -> Result<SamplerConfig, String> {
    let config = SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repetition_penalty: args.repetition_penalty,
        seed: args.seed,
    };
    match config.validate() {
        Ok(()) => Ok(config),
        Err(SampleError::BadConfig { field, expected, found }) => {
            Err(format!("--{}: expected {expected}, found {found}", field.replace('_', "-")))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The checks that need no model.
fn check_flags(args: &RunArgs) -> Result<SamplerConfig, String> {
    if args.max_tokens == 0 {
        return Err("--max-tokens: expected at least 1, found 0".into());
    }
    if args.max_context == 0 {
        return Err("--max-context: expected at least 1, found 0".into());
    }
    if args.expert_slots == 0 {
        return Err("--expert-slots: expected at least the model's top-k, found 0".into());
    }
    if let Some(path) = &args.model {
        load::check_path(path)?;
    } else {
        // The built-in model's shape is known before it is built: check what depends on it.
        let cfg = crate::cli::default_model::config();
        if let Some(&id) = args.prompt_ids.iter().flatten().find(|&&id| id as usize >= cfg.vocab_size) {
            return Err(format!(
                "prompt: token {id}: expected an id below the model's vocabulary size {}",
                cfg.vocab_size
            ));
        }
        if args.expert_slots < cfg.n_experts_used {
            return Err(format!(
                "--expert-slots: expected at least the model's top-k ({}), found {}",
                cfg.n_experts_used, args.expert_slots
            ));
        }
    }
    sampler_config(args)
}

/// The prompt's token ids and the line that shows it.
fn prompt_ids(args: &RunArgs, loaded: &Loaded) -> Result<(Vec<TokenId>, String), String> {
    let vocab = loaded.config.vocab_size;
    let (ids, shown) = if let Some(ids) = &args.prompt_ids {
        let list: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        (ids.clone(), format!("prompt ids: {}", list.join(",")))
    } else {
        let Some(tokenizer) = &loaded.tokenizer else {
            return Err(format!(
                "--prompt: the model has no tokenizer that fits its vocabulary of {vocab} ids: expected the prompt as ids (--prompt-ids 1,2,3), found text"
            ));
        };
        let text = if args.raw {
            args.prompt.clone()
        } else {
            let options = ChatOptions { add_generation_prompt: true, ..ChatOptions::default() };
            loaded
                .template
                .render(&[ChatMessage::new("user", &args.prompt)], &options)
                .map_err(|e| format!("--prompt: {e}"))?
        };
        let mut ids = tokenizer.encode(&text, Specials::With).map_err(|e| format!("--prompt: {e}"))?;
        let special = tokenizer.special_ids();
        if let (true, Some(bos)) = (special.add_bos, special.bos) {
            ids.insert(0, bos);
        }
        let how = if args.raw { "raw" } else { "with the chat template" };
        (ids.clone(), format!("prompt: {} ({} tokens {how})", args.prompt, ids.len()))
    };
    if ids.is_empty() {
        return Err("prompt: expected at least one token, found none".into());
    }
    if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
        return Err(format!("prompt: token {id}: expected an id below the model's vocabulary size {vocab}"));
    }
    Ok((ids, shown))
}

fn io(e: std::io::Error) -> String {
    format!("cannot write the output: {e}")
}

fn rate(tokens: usize, secs: f64) -> String {
    if secs > 0.0 {
        format!("{:.1} tok/s", tokens as f64 / secs)
    } else {
        "- tok/s".into()
    }
}

fn ended(e: &Ended) -> String {
    match e {
        Ended::Stop(StopReason::Eos(id)) => format!("end-of-sequence token {id}"),
        Ended::Stop(StopReason::StopString(s)) => format!("stop string {s:?}"),
        Ended::MaxTokens => "token limit".into(),
        Ended::ContextFull => "context full".into(),
    }
}

fn print_report(out: &mut dyn Write, r: &Report) -> std::io::Result<()> {
    let (p, g) = (r.prompt_time.as_secs_f64(), r.gen_time.as_secs_f64());
    let path = match r.prefill.mode {
        PrefillMode::Batched { chunk } => {
            let chunks =
                if r.prefill.chunks == 1 { "1 chunk".to_string() } else { format!("{} chunks", r.prefill.chunks) };
            format!(
                "batched prefill, {} rows through the rows kernels in {chunks} of up to {chunk}",
                r.prefill.rows_batched
            )
        }
        PrefillMode::Replay => "replay prefill, one decode step per token".to_string(),
    };
    writeln!(out, "prompt: {} tokens in {:.3} s, {} ({path})", r.prompt_tokens, p, rate(r.prompt_tokens, p))?;
    writeln!(
        out,
        "generation: {} tokens in {:.3} s, {} (stopped: {})",
        r.generated,
        g,
        rate(r.generated, g),
        ended(&r.ended)
    )
}

/// Staged mode only: the decode expert cache's hit rate over the run.
fn print_cache_stats(out: &mut dyn Write, model: &mut Model) -> std::io::Result<()> {
    let Some(slots) = model.decode_slots() else { return Ok(()) };
    let s = slots.stats();
    writeln!(
        out,
        "expert cache: {} slots per layer, {} lookups, {:.1} % hits ({} hits, {} misses, {} evictions), {} copied from pinned memory",
        slots.n_slots(),
        s.lookups,
        100.0 * s.hit_rate(),
        s.hits,
        s.misses,
        s.evictions,
        format_bytes(slots.copied_bytes())
    )?;
    if let Some(l) = model.layer_staging() {
        writeln!(
            out,
            "layer staging: {} layers staged for prefill, {} streamed on the copy stream",
            l.stages(),
            format_bytes(l.copied_bytes())
        )?;
    }
    Ok(())
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    let sampler_config = check_flags(args)?;
    args.prefill_mode()?;
    let device = target::open(args.target)?;
    let (loaded, load_time) = match &args.model {
        None => spin("building the built-in model", load::default),
        Some(path) => spin("loading the model", || load::open(path)),
    };
    let loaded = loaded?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    if loaded.tokenizer.is_none() && !args.stop.is_empty() {
        return Err("--stop: expected a model with a tokenizer (stop strings are text), found none".into());
    }
    let (prompt, shown) = prompt_ids(args, &loaded)?;
    let capacity = match loaded.config.context_length {
        0 => args.max_context,
        n => args.max_context.min(n),
    };
    if prompt.len() > capacity {
        return Err(format!(
            "prompt: expected at most {capacity} tokens (--max-context, the model's context length), found {}",
            prompt.len()
        ));
    }
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
    let (engine, engine_time) =
        spin("compiling kernels and uploading weights", || Engine::new(device, &loaded.source, options));
    let mut engine = engine.map_err(|e| e.to_string())?;
    let mut sampler = Sampler::new(sampler_config).map_err(|e| e.to_string())?;
    let c = sampler.config();

    let mut out = std::io::stdout().lock();
    let device = engine.model.device();
    writeln!(out, "target: {} - {} ({})", device.kind(), device.name(), device.driver_version()).map_err(io)?;
    writeln!(out, "model: {}", loaded.description).map_err(io)?;
    writeln!(out, "memory: {}", engine.model.memory_plan()).map_err(io)?;
    let what = if loaded.is_default { "built in memory" } else { "loaded" };
    writeln!(out, "startup: model {what} in {:.2} s, kernels compiled (or loaded from the disk cache) and weights uploaded in {:.2} s", load_time.as_secs_f64(), engine_time.as_secs_f64())
        .map_err(io)?;
    writeln!(
        out,
        "sampling: temperature {}, top-k {}, top-p {}, min-p {}, repetition penalty {}, seed {}",
        c.temperature, c.top_k, c.top_p, c.min_p, c.repetition_penalty, c.seed
    )
    .map_err(io)?;
    writeln!(out, "{shown}").map_err(io)?;
    writeln!(out).map_err(io)?;
    let settings = Settings {
        max_tokens: args.max_tokens,
        stops: &args.stop,
        tokenizer: loaded.tokenizer.as_ref(),
        prefill: args.prefill_mode()?,
    };
    let report = generate::run(&mut engine, &prompt, &mut sampler, &settings, &mut out)?;
    writeln!(out).map_err(io)?;
    writeln!(out).map_err(io)?;
    print_report(&mut out, &report).map_err(io)?;
    print_cache_stats(&mut out, &mut engine.model).map_err(io)?;
    if loaded.is_default {
        writeln!(out, "note: the built-in model's weights are random, so its text is gibberish by design; give --model PATH for a real model").map_err(io)?;
    }
    Ok(())
}
