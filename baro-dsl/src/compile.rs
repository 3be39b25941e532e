//! The GPU compile entry point: check, expand, lower, emit, through the compile cache, with
//! every stage optionally dumped (`BARO_DUMP`, stages named by extension:
//! `.ir → .ll → .s/.ptx → .hsaco`).
//!
//! Compiling is a pure function of (kernel, target, options): everything that can change the
//! bytes is in the cache key. This module never runs a kernel and never reads the environment
//! (`CompileOptions::from_env` does).

use std::path::Path;
use std::sync::Arc;

use crate::cache::{CacheHit, CacheKey, CompileCache};
use crate::ir::Kernel;
use crate::lower::gpu::{emit_gpu, EmitError, GpuStages};
use crate::options::CompileOptions;
use crate::target::Target;

/// The LLVM the code generator is built against, part of every cache key (`codegen_version`).
pub const CODEGEN_VERSION: &str = "llvm-19.1";

/// The GPU lowering's own source, digested into every cache key: a changed lowering (say, a
/// new loop versioning) must never be served a kernel a previous build cached under the same
/// IR text and crate version.
const LOWERING_SOURCES: [&str; 16] = [
    include_str!("lower/mod.rs"),
    include_str!("lower/expr.rs"),
    include_str!("lower/ops.rs"),
    include_str!("lower/convert.rs"),
    include_str!("lower/ir.rs"),
    include_str!("lower/gpu/mod.rs"),
    include_str!("lower/gpu/checks.rs"),
    include_str!("lower/gpu/emit.rs"),
    include_str!("lower/gpu/entry.rs"),
    include_str!("lower/gpu/hints.rs"),
    include_str!("lower/gpu/intrinsics.rs"),
    include_str!("lower/gpu/lanes.rs"),
    include_str!("lower/gpu/link.rs"),
    include_str!("lower/gpu/mma.rs"),
    include_str!("lower/gpu/stmt.rs"),
    include_str!("lower/gpu/version.rs"),
];

/// `CODEGEN_VERSION` and a digest of the GPU lowering's source: the code generator's identity
/// in every cache key.
pub fn codegen_version() -> &'static str {
    static V: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{CODEGEN_VERSION}+lower-{}", digest(&LOWERING_SOURCES)));
    &V
}

/// The host lowering's own source (shared expression lowering, the host lowering, the O2
/// pipeline and the object emission), digested into the host kernels' disk cache keys.
const HOST_LOWERING_SOURCES: [&str; 12] = [
    include_str!("lower/mod.rs"),
    include_str!("lower/expr.rs"),
    include_str!("lower/ops.rs"),
    include_str!("lower/convert.rs"),
    include_str!("lower/ir.rs"),
    include_str!("lower/host/mod.rs"),
    include_str!("lower/host/expr.rs"),
    include_str!("lower/host/mma.rs"),
    include_str!("lower/host/region.rs"),
    include_str!("lower/host/stmt.rs"),
    include_str!("runtime/host.rs"),
    include_str!("runtime/host_jit.rs"),
];

/// `CODEGEN_VERSION` and a digest of the host lowering's source: the host code generator's
/// identity in every host cache key (the target triple is added by the host runtime).
pub fn host_codegen_version() -> &'static str {
    static V: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{CODEGEN_VERSION}+host-{}", digest(&HOST_LOWERING_SOURCES)));
    &V
}

fn digest(sources: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for s in sources {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    }
    h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A kernel compiled for a GPU, ready for a runtime to load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuArtifact {
    pub target: Target,
    /// The kernel as given (for argument checking and grid evaluation).
    pub kernel: Kernel,
    /// Symbol name of the kernel entry.
    pub entry: String,
    /// Threads per workgroup (x only).
    pub block_dim: u32,
    /// NVPTX: PTX text (no NUL); AMDGPU: the linked code object (hsaco).
    pub image: Vec<u8>,
    /// PTX text or AMDGPU assembly.
    pub asm: String,
    pub llvm_ir: String,
}

/// A GPU compile failed. `Verify`, `Expand` and `Unsupported` are the kernel author's to fix
/// (or the caller's choice of target); `Tool` means a missing or broken `ld.lld`;
/// `Llvm` is a bug in baro.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("kernel `{kernel}` is not well formed:\n{}", .errors.join("\n"))]
    Verify { kernel: String, errors: Vec<String> },
    #[error(transparent)]
    Expand(#[from] crate::lanes::ExpandError),
    #[error("kernel `{kernel}` on {target}: {message}")]
    Unsupported { kernel: String, target: Target, message: String },
    #[error("kernel `{kernel}` on {target}: {message}")]
    Tool { kernel: String, target: Target, message: String },
    #[error("kernel `{kernel}` on {target}: {message}")]
    Llvm { kernel: String, target: Target, message: String },
}

/// Compiles `k` for a GPU target (`sm_NN` or `gfxNNN`), or returns the cached compile.
pub fn compile_gpu(
    k: &Kernel,
    target: &Target,
    options: &CompileOptions,
    cache: &CompileCache,
) -> Result<Arc<GpuArtifact>, CompileError> {
    compile_gpu_traced(k, target, options, cache).map(|(a, _)| a)
}

/// Like `compile_gpu`, also saying where the artifact came from: `Compiled` if any stage was
/// compiled, else `Disk` if any stage came from disk, else `Memory`.
pub fn compile_gpu_traced(
    k: &Kernel,
    target: &Target,
    options: &CompileOptions,
    cache: &CompileCache,
) -> Result<(Arc<GpuArtifact>, CacheHit), CompileError> {
    if target.wave_width().is_none() {
        return Err(CompileError::Unsupported {
            kernel: k.name.clone(),
            target: target.clone(),
            message: "expected a GPU target (sm_NN or gfxNNN)".into(),
        });
    }
    crate::verify::check_wellformed(k).map_err(|errs| CompileError::Verify {
        kernel: k.name.clone(),
        errors: errs.iter().map(|e| e.to_string()).collect(),
    })?;
    let expanded = crate::mathlib::expand_calls(&crate::lanes::expand(k)?);
    let ir_text = expanded.to_string();
    // The block size is a function of the expanded kernel and target, checked before any
    // cache lookup so that an unsupported lane count is always reported.
    let block_dim = crate::lower::gpu::block_dim(&expanded, target).map_err(|e| CompileError::Unsupported {
        kernel: k.name.clone(),
        target: target.clone(),
        message: e.message,
    })?;
    let image_ext = match target {
        Target::Nvptx { .. } => "ptx",
        _ => "hsaco",
    };
    let mut fresh: Option<GpuStages> = None;
    let mut run = |pick: fn(&GpuStages) -> Vec<u8>| -> Result<Vec<u8>, CompileError> {
        if fresh.is_none() {
            fresh = Some(emit_gpu(&expanded, target, options).map_err(|e| emit_error(k, target, e))?);
        }
        Ok(fresh.as_ref().map(pick).unwrap_or_default())
    };
    let key = |stage: &str| CacheKey::new(&ir_text, target, options, stage, codegen_version());
    let (image, h1) = cache.get_or_compile(key(image_ext), image_ext, || run(|s| s.image.clone()))?;
    let (asm, h2) = cache.get_or_compile(key("s"), "s", || run(|s| s.asm.as_bytes().to_vec()))?;
    let (ll, h3) = cache.get_or_compile(key("ll"), "ll", || run(|s| s.llvm_ir.as_bytes().to_vec()))?;
    let text = |b: &[u8], what: &str| {
        String::from_utf8(b.to_vec()).map_err(|_| CompileError::Llvm {
            kernel: k.name.clone(),
            target: target.clone(),
            message: format!("cached {what} is not utf-8"),
        })
    };
    let artifact = GpuArtifact {
        target: target.clone(),
        kernel: k.clone(),
        entry: expanded.name.clone(),
        block_dim,
        image: image.to_vec(),
        asm: text(&asm, "assembly")?,
        llvm_ir: text(&ll, "llvm ir")?,
    };
    if let Some(dir) = &options.dump_dir {
        dump(dir, &ir_text, &artifact).map_err(|message| CompileError::Tool {
            kernel: k.name.clone(),
            target: target.clone(),
            message,
        })?;
    }
    let hits = [h1, h2, h3];
    let hit = if hits.contains(&CacheHit::Compiled) {
        CacheHit::Compiled
    } else if hits.contains(&CacheHit::Disk) {
        CacheHit::Disk
    } else {
        CacheHit::Memory
    };
    Ok((Arc::new(artifact), hit))
}

fn emit_error(k: &Kernel, target: &Target, e: EmitError) -> CompileError {
    let (kernel, target) = (k.name.clone(), target.clone());
    match e {
        EmitError::Lower(l) => CompileError::Unsupported { kernel, target, message: l.message },
        EmitError::Llvm(message) => CompileError::Llvm { kernel, target, message },
        EmitError::Link(message) => CompileError::Tool { kernel, target, message },
    }
}

/// The file names of every stage `dump` writes for a kernel on a target.
pub fn dump_names(kernel: &str, target: &Target) -> Vec<String> {
    let exts: &[&str] = match target {
        Target::Nvptx { .. } => &["ir", "ll", "ptx"],
        _ => &["ir", "ll", "s", "hsaco"],
    };
    exts.iter().map(|e| format!("{kernel}.{target}.{e}")).collect()
}

/// Writes `<kernel>.<target>.{ir,ll,s|ptx,hsaco}` into `dir`.
fn dump(dir: &Path, ir_text: &str, a: &GpuArtifact) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("BARO_DUMP: creating {}: {e}", dir.display()))?;
    let base = format!("{}.{}", a.kernel.name, a.target);
    let mut files: Vec<(String, &[u8])> =
        vec![(format!("{base}.ir"), ir_text.as_bytes()), (format!("{base}.ll"), a.llvm_ir.as_bytes())];
    match a.target {
        Target::Nvptx { .. } => files.push((format!("{base}.ptx"), &a.image)),
        _ => {
            files.push((format!("{base}.s"), a.asm.as_bytes()));
            files.push((format!("{base}.hsaco"), &a.image));
        }
    }
    for (name, bytes) in files {
        let p = dir.join(&name);
        std::fs::write(&p, bytes).map_err(|e| format!("BARO_DUMP: writing {}: {e}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_key_digests_every_lowering_source_file() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut on_disk = Vec::new();
        for dir in ["lower", "lower/gpu"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "rs") {
                    on_disk.push(std::fs::read_to_string(&p).unwrap());
                }
            }
        }
        for s in &on_disk {
            assert!(
                LOWERING_SOURCES.contains(&s.as_str()),
                "a lowering source file is missing from LOWERING_SOURCES:\n{}",
                &s[..s.len().min(200)]
            );
        }
        assert_eq!(on_disk.len(), LOWERING_SOURCES.len());
        assert!(
            codegen_version().starts_with("llvm-19.1+lower-")
                && codegen_version().len() == "llvm-19.1+lower-".len() + 16
        );
    }

    #[test]
    fn the_host_cache_key_digests_every_host_lowering_source_file() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut on_disk = Vec::new();
        for dir in ["lower", "lower/host"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "rs") {
                    on_disk.push(std::fs::read_to_string(&p).unwrap());
                }
            }
        }
        for f in ["runtime/host.rs", "runtime/host_jit.rs"] {
            on_disk.push(std::fs::read_to_string(root.join(f)).unwrap());
        }
        for s in &on_disk {
            assert!(
                HOST_LOWERING_SOURCES.contains(&s.as_str()),
                "a host lowering source file is missing from HOST_LOWERING_SOURCES:\n{}",
                &s[..s.len().min(200)]
            );
        }
        assert_eq!(on_disk.len(), HOST_LOWERING_SOURCES.len());
        assert!(host_codegen_version().starts_with("llvm-19.1+host-"));
    }
}
