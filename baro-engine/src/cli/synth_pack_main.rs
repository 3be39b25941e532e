//! `baro-synth-pack`: the `synth-pack` subcommand as a binary of its own, linked without LLVM
//! (the DSL demonstration in `baro-engine` needs `libLLVM.so`, which the GPU machines lack), so
//! it can be carried to a benchmark machine and run there. Same arguments, same bytes.

mod synth_pack;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "baro-synth-pack", version, about = "Write a synthetic qwen35moe GGUF pack", long_about = synth_pack::LONG_ABOUT)]
struct Cli {
    #[command(flatten)]
    args: synth_pack::SynthPackArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = synth_pack::run(&cli.args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
