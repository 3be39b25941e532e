//! `baro_gpu`: every GPU benchmark in one executable, chosen by the name it is called under
//! (`identity_gate`, `prefill_speed`, `long_context`, `decode_bw`, `conformance`, `matvec_bw`, `serve_load`,
//! `q8_bench`, `baro-synth-pack`), like a multi-call binary. Each is linked with LLVM statically (about
//! 23 MB gzipped), so one executable instead of six lets a single carry to the GPU machine
//! (64 MiB, the repository included) hold all of them; `bench/gpu/run.sh` makes the links.
//! Arguments and output are those of the binary of that name.

use std::path::Path;
use std::process::ExitCode;

#[path = "conformance.rs"]
mod conformance;
#[path = "decode_bw.rs"]
mod decode_bw;
#[path = "identity_gate.rs"]
mod identity_gate;
#[path = "long_context.rs"]
mod long_context;
#[path = "matvec_bw.rs"]
mod matvec_bw;
#[path = "prefill_speed.rs"]
mod prefill_speed;
#[path = "serve_load.rs"]
mod serve_load;
#[path = "../../../baro-engine/src/cli/synth_pack.rs"]
mod synth_pack;

const NAMES: [&str; 9] = [
    "identity_gate",
    "prefill_speed",
    "long_context",
    "decode_bw",
    "conformance",
    "matvec_bw",
    "serve_load",
    "q8_bench",
    "baro-synth-pack",
];

#[derive(clap::Parser)]
#[command(name = "baro-synth-pack", about = "Write a synthetic qwen35moe GGUF pack", long_about = synth_pack::LONG_ABOUT)]
struct SynthCli {
    #[command(flatten)]
    args: synth_pack::SynthPackArgs,
}

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let name = Path::new(&argv0).file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
    match name.as_str() {
        "identity_gate" => identity_gate::main(),
        "prefill_speed" => prefill_speed::main(),
        "long_context" => long_context::main(),
        "decode_bw" => decode_bw::main(),
        "conformance" => conformance::main(),
        "matvec_bw" => matvec_bw::main(),
        "serve_load" => serve_load::main(),
        "q8_bench" => baro_bench::q8::main(),
        "baro-synth-pack" => {
            let cli = <SynthCli as clap::Parser>::parse();
            match synth_pack::run(&cli.args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        other => {
            eprintln!(
                "baro_gpu: called as `{other}`: expected one of {} (link or copy this executable under that name)",
                NAMES.join(", ")
            );
            ExitCode::from(2)
        }
    }
}
