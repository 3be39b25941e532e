//! `cargo run -p baro-engine`: with no subcommand, text generation (`cli/run.rs`) from the
//! embedded default model (random weights, real Qwen3.5 tokenizer) or `--model PATH`, on the
//! best available target. Subcommands: `demo-dsl` (the DSL demonstration, `demo.rs`),
//! `synth-pack` (a synthetic full-size pack for benchmarks) and `serve` (the HTTP server).
//! Every error a user can cause, a bad flag included, is printed as `error: ...` and exits
//! with status 1.

mod cli;
mod demo;

use clap::error::ErrorKind;
use clap::Parser;

fn main() {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
        Err(e) => {
            // clap's own rendering already starts with `error: `.
            let _ = e.print();
            std::process::exit(1);
        }
    };
    let result = match &cli.command {
        None => cli::run::run(&cli.run),
        Some(cli::Command::DemoDsl) => demo::run().map_err(|e| e.to_string()),
        Some(cli::Command::SynthPack(args)) => cli::synth_pack::run(args).map_err(|e| e.to_string()),
        Some(cli::Command::Serve(args)) => cli::serve::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
