//! `long_context`: a prompt of 100k tokens or more through batched prefill on one engine
//! (`baro_bench::long_context`): the memory plan for the context first (refused, saying what
//! was needed and what is available, when it does not fit), then per prompt the prefill's
//! seconds and tokens/s, batched prefill against replay over the last chunk boundaries byte
//! for byte (PASS/FAIL with the first differing position), replay's ms/token at that
//! context, and greedy tokens after the prompt.
//!
//! The prompt: with a tokenizer (the GGUF's, or a Hugging Face folder's `tokenizer.json`)
//! filler text with a needle, "The secret number is N.", at each `--depths` percentage and a
//! question after it; without one (or `--prompt random`), a seeded token sequence. A
//! synthetic pack (random weights) cannot retrieve anything, so there the answer is printed
//! but not judged and the identity check is the evidence. Exits 1 on FAIL (or a needle not
//! retrieved by a real model), 2 on a usage or engine error or a context that does not fit.

use std::path::PathBuf;
use std::process::ExitCode;

use baro_bench::identity::sequence;
use baro_bench::long_context::{self, needle_prompt, Check, Verdict};
use baro_bench::report::Meta;
use baro_dsl::runtime::{Device, DeviceKind};
use baro_engine::engine::staging::{format_bytes, parse_bytes};
use baro_engine::engine::{ContextMemory, Engine, EngineOptions, Logits, ModelSource, Precision, PrefillMode};
use baro_engine::model::gguf::MetaValue;
use baro_engine::tokenizer::{Specials, TokenId, Tokenizer};
use clap::Parser;

#[derive(Parser)]
#[command(
    about = "long context: batched prefill of 100k+ tokens, identical to replay over its last chunk boundaries, and a needle"
)]
struct Cli {
    /// A GGUF file or a Hugging Face folder (e.g. the synthetic full-size pack).
    #[arg(long, alias = "pack")]
    model: PathBuf,
    #[arg(long, default_value = "cuda")]
    target: String,
    /// Prompt lengths in tokens.
    #[arg(long, value_delimiter = ',', default_value = "100000")]
    lengths: Vec<usize>,
    #[arg(long, default_value_t = PrefillMode::DEFAULT_CHUNK)]
    chunk: usize,
    /// Chunk boundaries inside the replayed tail (each with positions on both sides); 0: no
    /// replay arm.
    #[arg(long, default_value_t = 2)]
    boundaries: usize,
    /// Positions replayed before the first of those boundaries.
    #[arg(long, default_value_t = 4)]
    margin: usize,
    /// Greedy tokens decoded after the prompt.
    #[arg(long, default_value_t = 16)]
    greedy: usize,
    /// auto (needle with a tokenizer, random without), needle (a tokenizer required), random.
    #[arg(long, default_value = "auto")]
    prompt: String,
    /// Needle depths, in percent of the filler (one prompt each).
    #[arg(long, value_delimiter = ',', default_value = "10,50,90")]
    depths: Vec<f64>,
    /// The needle's secret number.
    #[arg(long, default_value_t = 7294)]
    secret: u32,
    /// The seed of `--prompt random`.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Prefill the replay arm's prefix again on the reset state instead of copying the state
    /// (one sequence state on the device instead of two, one more prefix prefill).
    #[arg(long)]
    fresh: bool,
    /// Print the context's memory plan from the model's config and stop (no device, no load).
    #[arg(long)]
    plan_only: bool,
    #[arg(long)]
    vram_budget: Option<String>,
    /// Activations of the quantized matvecs: f32 or q8 (8-bit blocks, exact integer dots).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    commit: Option<String>,
}

pub fn main() -> ExitCode {
    match main_inner(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("long_context: {e}");
            ExitCode::from(2)
        }
    }
}

/// The model's own tokenizer, if it brings one.
fn tokenizer(source: &ModelSource, path: &std::path::Path) -> Result<Option<Tokenizer>, String> {
    match source {
        ModelSource::Gguf(file) if file.meta("tokenizer.ggml.model").is_some() => {
            Tokenizer::from_gguf(file).map(Some).map_err(|e| format!("{}: its tokenizer: {e}", path.display()))
        }
        ModelSource::Hf(_) if path.join("tokenizer.json").is_file() => {
            Tokenizer::from_file(&path.join("tokenizer.json")).map(Some).map_err(|e| format!("{}: {e}", path.display()))
        }
        _ => Ok(None),
    }
}

/// Whether the weights are random: a pack `baro-synth-pack` wrote.
fn synthetic(source: &ModelSource) -> bool {
    match source {
        ModelSource::Gguf(file) => {
            matches!(file.meta("general.name"), Some(MetaValue::String(n)) if n.starts_with("baro synthetic"))
        }
        ModelSource::Hf(_) => false,
    }
}

struct Prompt {
    what: String,
    tokens: Vec<TokenId>,
    /// The needle's answer, when the prompt holds one.
    answer: Option<String>,
}

fn main_inner(cli: Cli) -> Result<bool, String> {
    let target: DeviceKind = cli.target.parse().map_err(|e: baro_dsl::runtime::DeviceError| e.to_string())?;
    if cli.lengths.is_empty() || cli.lengths.contains(&0) {
        return Err(format!("--lengths: expected lengths of at least 1 token, found {:?}", cli.lengths));
    }
    if cli.chunk == 0 {
        return Err("--chunk: expected at least 1 token, found 0".into());
    }
    if let Some(d) = cli.depths.iter().find(|d| !(0.0..=100.0).contains(*d)) {
        return Err(format!("--depths: expected percentages in 0..=100, found {d}"));
    }
    let longest = *cli.lengths.iter().max().unwrap_or(&1);
    let source = ModelSource::open(&cli.model).map_err(|e| format!("{}: {e}", cli.model.display()))?;
    let cfg = source.config().map_err(|e| format!("{}: {e}", cli.model.display()))?;
    // n greedy tokens take n − 1 positions after the prompt.
    let max_ctx = longest + cli.greedy.max(1);
    if cfg.context_length > 0 && max_ctx > cfg.context_length {
        return Err(format!(
            "--lengths: the longest prompt {longest} plus {} greedy tokens needs {max_ctx} positions; expected at most the model's context length {}",
            cli.greedy, cfg.context_length
        ));
    }
    let random = synthetic(&source);
    let tok = tokenizer(&source, &cli.model)?;
    let needle = match (cli.prompt.as_str(), &tok) {
        ("needle", None) => {
            return Err(format!(
                "--prompt needle: {} has no tokenizer (no tokenizer.ggml.* metadata, no tokenizer.json), and the needle is text; pass --prompt random for a seeded token sequence",
                cli.model.display()
            ))
        }
        ("needle", Some(_)) | ("auto", Some(_)) => true,
        ("random", _) | ("auto", None) => false,
        (other, _) => return Err(format!("--prompt: expected auto, needle or random, found {other:?}")),
    };
    let states = if cli.fresh || cli.boundaries == 0 { 1 } else { 2 };
    let chunk_rows = cli.chunk.min(longest);
    let ctx = ContextMemory::new(&cfg, max_ctx, chunk_rows);
    let need = ctx.total(states);
    let states_text = if states == 2 {
        "two sequence states (the sequence and the replay arm's copy; --fresh keeps one)"
    } else {
        "one sequence state"
    };
    let plan_line = format!(
        "memory plan for {max_ctx} positions: {ctx}; {states_text} + the chunk scratch = {}",
        format_bytes(need)
    );
    if cli.plan_only {
        println!("{plan_line}");
        return Ok(true);
    }

    let device = Device::open(target, 0).map_err(|e| e.to_string())?;
    let meta = Meta::new(device.name(), device.driver_version(), cli.commit.clone());
    let vram_budget =
        cli.vram_budget.as_deref().map(parse_bytes).transpose().map_err(|e| format!("--vram-budget: {e}"))?;
    let before = device.memory_info().map_err(|e| e.to_string())?;
    let available = vram_budget.or(before.map(|m| m.free));
    if let Some(a) = available.filter(|&a| need > a) {
        return Err(format!(
            "context {max_ctx} does not fit: expected at most {} ({}), found the context alone needs {} ({}), before any weight",
            format_bytes(a),
            if vram_budget.is_some() { "--vram-budget" } else { "the device's free memory" },
            format_bytes(need),
            plan_line
        ));
    }
    let options = EngineOptions { max_ctx, vram_budget, precision: cli.precision, ..EngineOptions::default() };
    let mut engine = Engine::new(device, &source, options).map_err(|e| e.to_string())?;
    let plan = engine.model.memory_plan().clone();
    // The plan's fixed bytes include the one state `Model::new` measured: the rest is weights.
    let weights = plan.device_bytes().saturating_sub(ctx.state());
    let total = weights + need;
    let mut lines = vec![
        meta.markdown_header(),
        format!(
            "model {} ({} layers, {} attention, hidden {}, vocab {}{}), chunk {}, precision {}, memory: {plan}",
            cli.model.display(),
            cfg.n_layers,
            cfg.layer_kinds.iter().filter(|k| **k == baro_engine::model::LayerKind::Attention).count(),
            cfg.hidden_dim,
            cfg.vocab_size,
            if random { ", a synthetic pack: random weights" } else { "" },
            cli.chunk,
            engine.model.precision().name()
        ),
        plan_line,
        format!(
            "total planned: weights {} + context {} = {}; device: {}{}",
            format_bytes(weights),
            format_bytes(need),
            format_bytes(total),
            before.map_or("the host (no device memory limit)".to_string(), |m| format!(
                "{} total, {} free before loading",
                format_bytes(m.total),
                format_bytes(m.free)
            )),
            vram_budget.map_or(String::new(), |b| format!(", --vram-budget {}", format_bytes(b)))
        ),
    ];
    println!("{}", lines.join("\n"));
    // What the run adds to the loaded model: the chunk scratch and the state's copy, against
    // the budget's remainder (the staging plan counts neither) or the driver's free memory.
    let extra = need - ctx.state();
    let left = match vram_budget {
        Some(b) => Some((b.saturating_sub(plan.device_bytes()), "left of --vram-budget after the model")),
        None => engine.model.device().memory_info().map_err(|e| e.to_string())?.map(|m| (m.free, "free on the device")),
    };
    if let Some((left, what)) = left.filter(|&(l, _)| extra > l) {
        return Err(format!(
            "context {max_ctx} does not fit after loading: expected {} for the chunk scratch and the state copy, found {} {what} ({})",
            format_bytes(extra),
            format_bytes(left),
            lines[2]
        ));
    }

    let vocab = cfg.vocab_size;
    let mut prompts = Vec::new();
    for &len in &cli.lengths {
        match &tok {
            Some(t) if needle => {
                for &d in &cli.depths {
                    let p = needle_prompt(t, len, d / 100.0, cli.secret)?;
                    if let Some(&bad) = p.tokens.iter().find(|&&id| id as usize >= vocab) {
                        return Err(format!(
                            "the tokenizer gives id {bad}; expected ids below the model's vocabulary {vocab}"
                        ));
                    }
                    prompts.push(Prompt {
                        what: format!("needle at {d} % (token {} of {len})", p.needle_at),
                        tokens: p.tokens,
                        answer: Some(p.answer),
                    });
                }
            }
            _ => prompts.push(Prompt {
                what: format!("seeded token sequence (seed {}, no needle)", cli.seed),
                tokens: sequence(cli.seed, len, vocab),
                answer: None,
            }),
        }
    }
    if needle && random {
        let l = "a synthetic pack (random weights): retrieval cannot be judged; the greedy tokens are printed, and the evidence is batched prefill = replay over the last chunk boundaries".to_string();
        println!("{l}");
        lines.push(l);
    }

    // Warm-up: the rows kernels' first launches and the decode graph's first build.
    let e = |e: baro_engine::engine::EngineError| e.to_string();
    let first = &prompts[0].tokens;
    engine.reset().map_err(e)?;
    engine
        .prefill(&first[..cli.chunk.min(first.len())], PrefillMode::Batched { chunk: cli.chunk }, Logits::Last)
        .map_err(e)?;
    engine.step(first[0]).map_err(e)?;

    let check = Check {
        chunk: cli.chunk,
        boundaries: cli.boundaries,
        margin: cli.margin,
        greedy: cli.greedy,
        fresh: cli.fresh,
    };
    let mut ok = true;
    for p in &prompts {
        let len = p.tokens.len();
        let head = format!("prompt {len} tokens, {}", p.what);
        println!("{head}");
        lines.push(head);
        let r = long_context::run(&mut engine, &p.tokens, &p.tokens, check, &mut |s| println!("  {s}"))
            .map_err(|e| e.to_string())?;
        let secs = r.prefill_seconds();
        let mut out = vec![format!(
            "batched prefill {len} tokens: {secs:.3} s, {:.1} tok/s (prefix 0..{} {:.3} s; the last {} tokens with every position's logits {:.3} s)",
            len as f64 / secs,
            r.aligned,
            r.prefix_seconds,
            len - r.aligned,
            r.batched.seconds
        )];
        if let Some(rep) = &r.replay {
            let n = (len - r.start).max(1);
            out.push(format!(
                "replay {n} tokens at context {}..{len}: {:.2} ms/token ({:.1} tok/s; batched / replay {:.1}×)",
                r.start,
                rep.seconds * 1e3 / n as f64,
                n as f64 / rep.seconds,
                (len as f64 / secs) / (n as f64 / rep.seconds)
            ));
        }
        if let (Some(b), Some(m)) = (before, r.memory_after_batched) {
            out.push(format!(
                "device memory in use after the batched arm (driver: free before loading − free now): {}; planned {} ({})",
                format_bytes(b.free.saturating_sub(m.free)),
                format_bytes(total),
                if b.free.saturating_sub(m.free) <= total { "within the plan" } else { "MORE than the plan: the difference is the driver's context, modules and allocation rounding" }
            ));
        }
        let text =
            tok.as_ref().map(|t| t.decode(&r.batched.greedy, Specials::With).unwrap_or_else(|e| format!("<{e}>")));
        out.push(format!(
            "greedy {} tokens after the prompt: {:?}{}",
            r.batched.greedy.len(),
            r.batched.greedy,
            text.as_ref().map_or(String::new(), |t| format!(" = {t:?}"))
        ));
        if let (Some(answer), Some(text)) = (&p.answer, &text) {
            let found = text.contains(answer.as_str());
            out.push(if random {
                format!("needle: answer {answer} NOT JUDGED (random weights)")
            } else {
                ok &= found;
                format!("needle: answer {answer} {}", if found { "RETRIEVED" } else { "NOT RETRIEVED" })
            });
        }
        out.push(r.line());
        ok &= !matches!(r.verdict(), Verdict::Fail { .. });
        for l in out {
            println!("{l}");
            lines.push(l);
        }
    }
    if let Some(path) = &cli.out {
        std::fs::write(path, lines.join("\n\n") + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(ok)
}
