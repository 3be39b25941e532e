//! `identity_gate`: batched prefill vs replay in one binary (`baro_bench::identity`), on a
//! model (default: the tiny fixture of `baro-engine/fixtures/tiny`, relative to the
//! repository root) and a target. Prints one line per prompt and the summary last; exits 1
//! when any prompt fails (or, with `--negative-control`, when none diverges: the control must
//! be caught), 2 on a usage or engine error. `--out file.md` also writes the lines there.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use baro_bench::identity::{self, case_line, Case};
use baro_bench::report::Meta;
use baro_dsl::runtime::{Device, DeviceKind};
use baro_engine::engine::staging::parse_bytes;
use baro_engine::engine::{Engine, EngineOptions, ModelSource, Precision};
use clap::Parser;

#[derive(Parser)]
#[command(about = "identity gate: batched prefill vs token-by-token replay, byte for byte")]
struct Cli {
    /// A GGUF file or a Hugging Face folder.
    #[arg(long, default_value = "baro-engine/fixtures/tiny")]
    model: PathBuf,
    /// host, cuda or hip.
    #[arg(long, default_value = "host")]
    target: String,
    /// Greedy tokens decoded after each prompt in both arms.
    #[arg(long, default_value_t = 64)]
    greedy: usize,
    #[arg(long, default_value_t = 0x6261726f)]
    seed: u64,
    /// Only the default prompts of at most this many tokens.
    #[arg(long)]
    max_len: Option<usize>,
    /// Extra prompts as LEN:CHUNK.
    #[arg(long, value_delimiter = ',')]
    case: Vec<String>,
    /// The negative control: batched prefill with the reordered attention (not identical).
    #[arg(long)]
    negative_control: bool,
    /// A device-memory budget (e.g. 24G): routed experts staged from pinned host memory when
    /// the model does not fit. A staged run must print the resident run's logits digest.
    #[arg(long)]
    vram_budget: Option<String>,
    /// Decode expert slots per layer when staged.
    #[arg(long, default_value_t = 64)]
    expert_slots: usize,
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
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("identity_gate: {e}");
            ExitCode::from(2)
        }
    }
}

fn parse_case(s: &str) -> Result<Case, String> {
    let bad = || format!("--case {s}: expected LEN:CHUNK with LEN and CHUNK at least 1");
    let (len, chunk) = s.split_once(':').ok_or_else(bad)?;
    let (len, chunk) = (len.parse::<usize>().map_err(|_| bad())?, chunk.parse::<usize>().map_err(|_| bad())?);
    if len == 0 || chunk == 0 {
        return Err(bad());
    }
    Ok(Case { len, chunk })
}

fn main_inner(cli: Cli) -> Result<bool, String> {
    let target: DeviceKind = cli.target.parse().map_err(|e: baro_dsl::runtime::DeviceError| e.to_string())?;
    let mut cases: Vec<Case> =
        identity::default_cases().into_iter().filter(|c| cli.max_len.is_none_or(|m| c.len <= m)).collect();
    for c in &cli.case {
        cases.push(parse_case(c)?);
    }
    let longest = cases
        .iter()
        .map(|c| c.len)
        .max()
        .ok_or("no prompts: --max-len excludes every default prompt and no --case was given")?;
    let device = Device::open(target, 0).map_err(|e| e.to_string())?;
    let meta = Meta::new(device.name(), device.driver_version(), cli.commit.clone());
    let source = ModelSource::open(&cli.model).map_err(|e| format!("{}: {e}", cli.model.display()))?;
    let started = std::time::Instant::now();
    let vram_budget =
        cli.vram_budget.as_deref().map(parse_bytes).transpose().map_err(|e| format!("--vram-budget: {e}"))?;
    let options = EngineOptions {
        max_ctx: longest + cli.greedy + 1,
        vram_budget,
        expert_slots: cli.expert_slots,
        precision: cli.precision,
        ..EngineOptions::default()
    };
    let mut engine = Engine::new(device, &source, options).map_err(|e| e.to_string())?;
    engine.model.set_reordered_attention(cli.negative_control);
    let cfg = engine.model.config().clone();
    let mut lines = vec![
        meta.markdown_header(),
        format!(
            "model {} (hidden {}, {} layers, {} experts top-{}, vocab {}), {} prompts, seed {:#x}, memory: {}, precision: {}, batched attention: {}",
            cli.model.display(),
            cfg.hidden_dim,
            cfg.n_layers,
            cfg.n_experts,
            cfg.n_experts_used,
            cfg.vocab_size,
            cases.len(),
            cli.seed,
            engine.model.memory_plan(),
            engine.model.precision().name(),
            if cli.negative_control { "REORDERED (negative control, opted out of identity)" } else { "attention_pv_rows (the verified sibling)" }
        ),
    ];
    println!("{}\n{}", lines[0], lines[1]);
    let mut out = std::io::stdout();
    let report = identity::run(&mut engine, &cases, cli.greedy, cli.seed, &mut |r| {
        let line = case_line(r);
        let _ = writeln!(out, "{line}");
        lines.push(line);
    })
    .map_err(|e| e.to_string())?;
    let mut tail = vec![report.summary()];
    let agree = report.top1_agree() as f64 / report.positions().max(1) as f64;
    let delta = report.max_rel_delta.map_or("not kept (logits too large)".to_string(), |d| format!("{d:.3e}"));
    tail.push(format!(
        "logits digest (every prompt position and greedy step of both arms; equal across memory modes and targets): {}",
        report.digest_hex()
    ));
    tail.push(format!(
        "teacher-forced agreement: top-1 {}/{} positions ({:.4}), max |Δ| / max |logit| {delta}",
        report.top1_agree(),
        report.positions(),
        agree
    ));
    let ok = if cli.negative_control {
        let diverged = report.failed();
        tail.push(format!(
            "negative control: {diverged} of {} prompts diverge from replay: {}",
            report.cases.len(),
            if diverged > 0 { "DETECTED" } else { "NOT DETECTED (the gate missed a reordering)" }
        ));
        diverged > 0
    } else {
        report.failed() == 0
    };
    tail.push(format!("wall {:.1} s", started.elapsed().as_secs_f64()));
    for l in &tail {
        println!("{l}");
    }
    lines.extend(tail);
    if let Some(path) = &cli.out {
        std::fs::write(path, lines.join("\n\n") + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(ok)
}
