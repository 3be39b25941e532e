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

/// The code generator's version, part of every cache key.
pub const CODEGEN_VERSION: &str = "llvm-19.1";

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
pub fn compile_gpu(k: &Kernel, target: &Target, options: &CompileOptions, cache: &CompileCache) -> Result<Arc<GpuArtifact>, CompileError> {
    compile_gpu_traced(k, target, options, cache).map(|(a, _)| a)
}

/// Like `compile_gpu`, also saying where the artifact came from: `Compiled` if any stage was
/// compiled, else `Disk` if any stage came from disk, else `Memory`.
pub fn compile_gpu_traced(k: &Kernel, target: &Target, options: &CompileOptions, cache: &CompileCache) -> Result<(Arc<GpuArtifact>, CacheHit), CompileError> {
    if target.wave_width().is_none() {
        return Err(CompileError::Unsupported { kernel: k.name.clone(), target: target.clone(), message: "expected a GPU target (sm_NN or gfxNNN)".into() });
    }
    crate::verify::check_wellformed(k)
        .map_err(|errs| CompileError::Verify { kernel: k.name.clone(), errors: errs.iter().map(|e| e.to_string()).collect() })?;
    let expanded = crate::mathlib::expand_calls(&crate::lanes::expand(k)?);
    let ir_text = expanded.to_string();
    // The block size is a function of the expanded kernel and target, checked before any
    // cache lookup so that an unsupported lane count is always reported.
    let block_dim = crate::lower::gpu::block_dim(&expanded, target)
        .map_err(|e| CompileError::Unsupported { kernel: k.name.clone(), target: target.clone(), message: e.message })?;
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
    let key = |stage: &str| CacheKey::new(&ir_text, target, options, stage, CODEGEN_VERSION);
    let (image, h1) = cache.get_or_compile(key(image_ext), image_ext, || run(|s| s.image.clone()))?;
    let (asm, h2) = cache.get_or_compile(key("s"), "s", || run(|s| s.asm.as_bytes().to_vec()))?;
    let (ll, h3) = cache.get_or_compile(key("ll"), "ll", || run(|s| s.llvm_ir.as_bytes().to_vec()))?;
    let text = |b: &[u8], what: &str| {
        String::from_utf8(b.to_vec()).map_err(|_| CompileError::Llvm { kernel: k.name.clone(), target: target.clone(), message: format!("cached {what} is not utf-8") })
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
        dump(dir, &ir_text, &artifact).map_err(|message| CompileError::Tool { kernel: k.name.clone(), target: target.clone(), message })?;
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
    let mut files: Vec<(String, &[u8])> = vec![(format!("{base}.ir"), ir_text.as_bytes()), (format!("{base}.ll"), a.llvm_ir.as_bytes())];
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
