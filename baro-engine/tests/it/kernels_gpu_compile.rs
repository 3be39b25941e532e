//! Every decode kernel compiles offline for NVPTX (sm_90) and AMDGPU (gfx1100, when `ld.lld`
//! is present): the GPU lowerings accept everything the host runs. Running on a GPU is the
//! conformance suite's job; this only catches a kernel the lowering cannot express.

use baro_dsl::cache::CompileCache;
use baro_dsl::compile::{compile_gpu, CompileError};
use baro_dsl::options::CompileOptions;
use baro_dsl::target::Target;

#[test]
fn every_kernel_compiles_for_gpu_targets() {
    let cache = CompileCache::new(None);
    let opts = CompileOptions::default();
    let mut failures = Vec::new();
    let mut compiled = 0;
    for target in [Target::Nvptx { sm: 90 }, Target::Amdgpu { arch: "gfx1100".into() }] {
        for k in baro_engine::kernels::all() {
            match compile_gpu(&k, &target, &opts, &cache) {
                Ok(a) => {
                    assert!(!a.image.is_empty(), "{}: empty image", k.name);
                    compiled += 1;
                }
                Err(CompileError::Tool { message, .. }) => println!("skipping {target}: {message}"),
                Err(e) => failures.push(format!("{} on {target}: {e}", k.name)),
            }
        }
    }
    println!("{compiled} GPU compiles");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled >= baro_engine::kernels::all().len(), "not even NVPTX compiled every kernel");
}
