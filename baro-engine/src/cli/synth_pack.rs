//! `baro-engine synth-pack`: resolves the config, plans the pack, writes it with a progress
//! bar (hidden when stderr is not a terminal) and prints what was written: size, time,
//! throughput and the tensor-type histogram. Never decides a byte of the pack itself.

use std::error::Error;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use baro_engine::model::ModelConfig;
use baro_engine::pack::{self, presets, QuantMix, TokenizerSource, WriteOptions};
use clap::builder::PossibleValuesParser;
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Debug, clap::Args)]
pub struct SynthPackArgs {
    /// Where to write the pack
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// Model shapes: `real` (Qwen3.5-35B-A3B), `tiny` (test size) or a Hugging Face config.json
    #[arg(long, value_name = "real|tiny|FILE.json", default_value = "real")]
    pub config: String,
    /// Seed of the random weights; the same seed and config give the same bytes
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Quant mix
    #[arg(long, default_value = "community", value_parser = PossibleValuesParser::new(["community", "f32", "q8_0"]))]
    pub mix: String,
    /// Worker threads generating data [default: available parallelism]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

fn resolve_config(spec: &str) -> Result<ModelConfig, String> {
    match spec {
        "real" => Ok(presets::real()),
        "tiny" => Ok(presets::tiny()),
        path => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read config {path}: {e}"))?;
            ModelConfig::from_hf_json(&text).map_err(|e| format!("config {path}: {e}"))
        }
    }
}

/// The `--help` text of the subcommand.
pub const LONG_ABOUT: &str = "Write a synthetic qwen35moe GGUF v3 pack for benchmarks: the shapes of a real model, its \
    tokenizer section, and random weights (determined by the seed) with realistic magnitudes in a quant mix.\n\n\
    Mixes: community = Q4_K routed gate/up experts, Q5_K routed down experts (Q6_K in the first and last eighth of \
    the layers), Q6_K output head, Q8_0 embedding, projections and shared experts, F32 norms, router and small \
    vectors (about 22 GB for the real config); q8_0 = every quantized tensor Q8_0; f32 = everything F32.\n\n\
    The pack is written to PATH.tmp and renamed to PATH (replacing it) when complete. A synthetic pack measures speed only: its \
    weights are noise.";

fn size(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.2} GB", bytes as f64 / 1e9)
    } else {
        format!("{:.2} MB", bytes as f64 / 1e6)
    }
}

pub fn run(args: &SynthPackArgs) -> Result<(), Box<dyn Error>> {
    let mix: QuantMix = args.mix.parse()?;
    let threads = match args.threads {
        Some(0) => return Err("--threads: expected at least 1, found 0".into()),
        Some(n) => n,
        None => pack::default_threads(),
    };
    let cfg = resolve_config(&args.config)?;
    let plan = pack::plan(&cfg, mix, args.seed)?;
    let total = plan.file_len();
    let tokenizer = match plan.tokenizer {
        TokenizerSource::Qwen35 => "the qwen3.5 tokenizer",
        TokenizerSource::Synthetic => "a synthetic byte-level tokenizer",
    };
    println!(
        "writing {}: {} tensors, {} ({} mix, seed {}, {}, {} threads)",
        args.out.display(),
        plan.tensors.len(),
        size(total),
        mix,
        args.seed,
        tokenizer,
        threads
    );
    for t in plan.fallbacks() {
        println!("   note: {} {:?}: {} does not fit the shape, using {}", t.name, t.shape, t.wanted, t.ty);
    }

    let bar = if std::io::stderr().is_terminal() {
        let style = ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}")
            .map_err(|e| format!("progress bar template: {e}"))?;
        ProgressBar::new(total).with_style(style)
    } else {
        ProgressBar::hidden()
    };
    let start = Instant::now();
    let opts = WriteOptions { seed: args.seed, threads };
    let result = pack::write_pack(&plan, Path::new(&args.out), &opts, &mut |n| bar.set_position(n));
    bar.finish_and_clear();
    let written = result?;
    let secs = start.elapsed().as_secs_f64();
    println!("wrote {} in {:.1} s ({:.0} MB/s)", size(written), secs, written as f64 / 1e6 / secs.max(1e-9));
    println!("   {:<6} {:>7} {:>12}", "type", "tensors", "bytes");
    for (ty, n, bytes) in plan.histogram() {
        println!("   {:<6} {:>7} {:>12}", ty.to_string(), n, size(bytes));
    }
    Ok(())
}
