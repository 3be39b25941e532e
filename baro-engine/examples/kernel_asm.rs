//! Writes every compile stage (`.ir .ll .s .ptx .hsaco`) of the engine kernels named on the
//! command line, for sm_90 and gfx1100, into a folder, offline (no GPU): for reading what a
//! kernel's lowering emits before measuring it on a GPU.
//!
//! Run: `cargo run -p baro-engine --example kernel_asm -- DIR KERNEL...` (a kernel name, or
//! `all`). The `BARO_*` lowering options of the environment apply. gfx1100 needs `ld.lld-19`; where it is missing that target is skipped with a note.

use baro_dsl::cache::CompileCache;
use baro_dsl::compile::{compile_gpu, CompileError};
use baro_dsl::options::CompileOptions;
use baro_dsl::target::Target;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, names)) = args.split_first().filter(|(_, n)| !n.is_empty()) else {
        eprintln!("usage: kernel_asm DIR KERNEL... (engine kernel names, or `all`)");
        std::process::exit(2);
    };
    let all = baro_engine::kernels::all();
    let picked: Vec<_> = all.iter().filter(|k| names.iter().any(|n| n == "all" || *n == k.name)).collect();
    for n in names.iter().filter(|n| *n != "all" && !all.iter().any(|k| &k.name == *n)) {
        eprintln!("kernel_asm: no engine kernel is named {n}");
        std::process::exit(2);
    }
    // The lowering's knobs (`BARO_LANE_UNROLL`, `BARO_SEQ_UNROLL`, ...) as the engine reads them.
    let env = CompileOptions::from_env().unwrap_or_else(|e| {
        eprintln!("kernel_asm: {e}");
        std::process::exit(2);
    });
    let opts = CompileOptions { dump_dir: Some(dir.into()), cache_dir: None, ..env };
    let cache = CompileCache::new(None);
    for target in [Target::Nvptx { sm: 90 }, Target::Amdgpu { arch: "gfx1100".into() }] {
        for k in &picked {
            match compile_gpu(k, &target, &opts, &cache) {
                Ok(a) => println!("{} {target}: {} bytes", k.name, a.image.len()),
                Err(CompileError::Tool { message, .. }) => println!("{} {target}: skipped ({message})", k.name),
                Err(e) => {
                    eprintln!("{} {target}: {e}", k.name);
                    std::process::exit(1);
                }
            }
        }
    }
}
