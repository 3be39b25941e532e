//! `cargo run -p baro-engine`: with no subcommand, until the engine lands, a demonstration of
//! the DSL. It builds every example kernel pair, verifies each kernel and each rows sibling,
//! runs them on the host JIT, compares the rows sibling with replays of the m=1 kernel byte
//! for byte, and prints what was proved and measured. It never claims a target it did not run.
//! Subcommands (`cli/`): `synth-pack` writes a synthetic full-size pack for benchmarks.

mod cli;
mod demo;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        None => demo::run(),
        Some(cli::Command::SynthPack(args)) => cli::synth_pack::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
