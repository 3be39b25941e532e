//! The `baro-engine` command line: with no subcommand, generation (`run.rs`: the embedded
//! default model, or `--model PATH`); `demo-dsl` runs the DSL demonstration (`demo.rs`);
//! `synth-pack` writes a synthetic full-size pack for benchmarks; `serve` runs the HTTP server.
//! Parses and dispatches; the work is in the library (`baro_engine::engine`, `pack`,
//! `tokenizer`, `sampling`, `server`). User
//! errors come back as values, printed once by `main`; nothing here panics on input.

pub mod default_model;
pub mod generate;
pub mod load;
pub mod progress;
pub mod run;
pub mod serve;
pub mod synth_pack;
pub mod target;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "baro-engine", version, about = "baro's inference engine: generate text with baro kernels", long_about = run::LONG_ABOUT, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: run::RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The DSL demonstration: build, verify and run the example kernels on the host, report what was proved
    DemoDsl,
    /// Write a synthetic qwen35moe GGUF pack: real shapes, random weights, a community quant mix
    #[command(long_about = synth_pack::LONG_ABOUT)]
    SynthPack(synth_pack::SynthPackArgs),
    /// Serve the model over HTTP: OpenAI- and Ollama-compatible routes, concurrent requests decoded together
    #[command(long_about = serve::LONG_ABOUT)]
    Serve(serve::ServeArgs),
}
