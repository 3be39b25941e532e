//! The `baro-engine` command line: with no subcommand, the DSL demonstration (until the decode
//! path lands); `synth-pack` writes a synthetic full-size pack for benchmarks. Parses and
//! dispatches only: the work is in the library (`baro_engine::pack`) and in `demo.rs`. User
//! errors come back as values, printed once by `main`; nothing here panics on input.

pub mod synth_pack;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "baro-engine",
    version,
    about = "baro's inference engine",
    long_about = "baro's inference engine.\n\nWith no subcommand, runs the DSL demonstration: builds, verifies and runs the example \
                  kernels on the host and reports what was proved and measured."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a synthetic qwen35moe GGUF pack: real shapes, random weights, a community quant mix
    #[command(long_about = synth_pack::LONG_ABOUT)]
    SynthPack(synth_pack::SynthPackArgs),
}
