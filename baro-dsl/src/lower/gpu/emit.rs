//! From expanded kernel IR to GPU bytes: target machine, lowering, LLVM's O2 pipeline (which
//! never reassociates or contracts floats: no fast-math flags exist), then PTX text or an
//! AMDGPU object linked into a code object.
//!
//! AMDGPU code generation rewrites the module it is given, so every output is emitted from a
//! fresh clone; this module never emits twice from one module.

use std::sync::Once;

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTarget, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;

use crate::ir::Kernel;
use crate::lower::LowerError;
use crate::options::CompileOptions;
use crate::target::Target;

/// Every stage of one GPU compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuStages {
    /// The kernel entry's symbol.
    pub entry: String,
    pub block_dim: u32,
    /// The optimized LLVM IR that was compiled.
    pub llvm_ir: String,
    /// PTX (NVPTX) or AMDGPU assembly.
    pub asm: String,
    /// PTX text (NVPTX) or the linked code object (AMDGPU).
    pub image: Vec<u8>,
}

/// Why GPU code generation failed. `Lower` may be the kernel author's (an unsupported lane
/// count); `Llvm` is a bug in baro or LLVM; `Link` is usually a missing or broken `ld.lld`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error("llvm: {0}")]
    Llvm(String),
    #[error("{0}")]
    Link(String),
}

static INIT: Once = Once::new();

/// The LLVM target machine for a GPU target (`sm_NN` + PTX 8.0, or a gfx processor).
pub fn target_machine(target: &Target) -> Result<TargetMachine, EmitError> {
    INIT.call_once(|| {
        let cfg = InitializationConfig::default();
        LlvmTarget::initialize_nvptx(&cfg);
        LlvmTarget::initialize_amd_gpu(&cfg);
    });
    let features = match target {
        Target::Nvptx { .. } => "+ptx80",
        Target::Amdgpu { .. } => "",
        Target::Host => return Err(EmitError::Llvm("the host is not a GPU target".into())),
    };
    let triple = TargetTriple::create(target.triple());
    let t = LlvmTarget::from_triple(&triple)
        .map_err(|e| EmitError::Llvm(format!("no llvm target for {}: {}", target.triple(), e.to_string())))?;
    t.create_target_machine(
        &triple,
        &target.cpu(),
        features,
        OptimizationLevel::Default,
        RelocMode::PIC,
        CodeModel::Default,
    )
    .ok_or_else(|| EmitError::Llvm(format!("llvm has no target machine for {target} ({})", target.triple())))
}

/// Lowers, optimizes and emits `k` (expanded and call-free) for `target`.
pub fn emit_gpu(k: &Kernel, target: &Target, options: &CompileOptions) -> Result<GpuStages, EmitError> {
    let tm = target_machine(target)?;
    let cx = Context::create();
    let m = super::lower_gpu(&cx, k, target, options, &tm)?;
    let block_dim = super::block_dim(k, target)?;
    m.run_passes("default<O2>", &tm, PassBuilderOptions::create())
        .map_err(|e| EmitError::Llvm(format!("optimizing: {}", e.to_string())))?;
    super::checks::expand(&m, &tm)
        .map_err(|e| EmitError::Llvm(format!("expanding the bounds checks of `{}`: {}", k.name, e.0)))?;
    let llvm_ir = m.print_to_string().to_string();
    let asm_bytes = emit(&m, &tm, FileType::Assembly)?;
    let asm = String::from_utf8(asm_bytes).map_err(|_| EmitError::Llvm("assembly is not utf-8".into()))?;
    let image = match target {
        Target::Nvptx { .. } => asm.as_bytes().to_vec(),
        _ => {
            let obj = emit(&m, &tm, FileType::Object)?;
            super::link::link_code_object(&obj, &k.name, options)?
        }
    };
    Ok(GpuStages { entry: k.name.clone(), block_dim, llvm_ir, asm, image })
}

/// Emits one output from a clone of `m`.
fn emit(m: &Module<'_>, tm: &TargetMachine, ft: FileType) -> Result<Vec<u8>, EmitError> {
    let copy = m.clone();
    let buf = tm
        .write_to_memory_buffer(&copy, ft)
        .map_err(|e| EmitError::Llvm(format!("code generation: {}", e.to_string())))?;
    Ok(buf.as_slice().to_vec())
}
