//! `dump_gpu`: compiles the bandwidth benchmark's matvec kernels and the engine's K-quant
//! matvecs (m=1 and rows, the routed experts' types) for a GPU target offline (no GPU needed)
//! and writes every compile stage to a directory, for reading the PTX or AMDGPU assembly of
//! the hot loop. Never launches anything.

use std::path::PathBuf;
use std::process::ExitCode;

use baro_bench::conformance::{matvec_half, matvec_wide};
use baro_dsl::cache::CompileCache;
use baro_dsl::compile::compile_gpu;
use baro_dsl::options::CompileOptions;
use baro_dsl::target::Target;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(target), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: dump_gpu <sm_90|gfx1100> <dir>");
        return ExitCode::from(2);
    };
    let target: Target = match target.parse() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("dump_gpu: {e}");
            return ExitCode::from(2);
        }
    };
    let options = match CompileOptions::from_env() {
        Ok(o) => CompileOptions { dump_dir: Some(PathBuf::from(&dir)), ..o },
        Err(e) => {
            eprintln!("dump_gpu: {e}");
            return ExitCode::from(2);
        }
    };
    let cache = CompileCache::new(None);
    let kernels = [
        matvec_half::matvec_f16(),
        matvec_half::matvec_f16_rows(),
        matvec_half::matvec_bf16(),
        matvec_wide::matvec_wide_f16(),
        matvec_wide::matvec_wide_f16_rows(),
        matvec_wide::matvec_wide_bf16(),
        baro_engine::kernels::quant::matvec_q4_k(),
        baro_engine::kernels::quant::matvec_q4_k_rows(),
        baro_engine::kernels::quant::matvec_q5_k(),
        baro_engine::kernels::quant::matvec_q5_k_rows(),
        baro_engine::kernels::gdn::gdn_scan_rows(),
        baro_engine::kernels::quant::matvec_q4_k_xs(),
        baro_engine::kernels::quant::matvec_q6_k_xs(),
        baro_engine::kernels::quant::matvec_q8_0_xs(),
        baro_engine::kernels::gdn::gdn_step(),
    ];
    let mut failed = false;
    for k in &kernels {
        match compile_gpu(k, &target, &options, &cache) {
            Ok(a) => println!("{}: block_dim {}, {} bytes of image", k.name, a.block_dim, a.image.len()),
            Err(e) => {
                eprintln!("dump_gpu: {e}");
                failed = true;
            }
        }
    }
    println!("stages written to {dir}");
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
