//! GPU lowering (NVPTX and AMDGPU): one kernel entry per IR kernel, run by a workgroup of
//! `block_dim` threads per grid point.
//!
//! Entry ABI (what every launcher passes, in order): for each IR parameter, a buffer becomes
//! `(ptr addrspace(1) elements, i64 element_count)` and a scalar one `i64` holding its
//! canonical bits; then `ptr addrspace(1)` to an `ErrorRecord` (4 × u64) zeroed before launch.
//!
//! Execution: uniform code runs redundantly in every thread; a `Lanes { count }` region runs
//! in threads `0..count` with `lane = thread id` (the others skip it; a region wider than the
//! wave spans the whole workgroup), and afterwards every uniform variable it assigned is
//! broadcast from lane 0 (through workgroup memory when the workgroup is wider than a wave);
//! `ParFor` strides by `block_dim`
//! and ends with a barrier. A failed bounds check skips the access (a load yields 0) and is
//! kept as the thread's first failure; at kernel end each failed thread publishes its own
//! with a compare-and-swap on `kind` (the first to arrive wins); a bad loop step records and
//! skips the loop. The wave width always comes from `Target::wave_width`. This module never emits
//! fast-math flags, fma or `llvm.fmuladd`.

mod checks;
mod emit;
mod entry;
mod hints;
mod intrinsics;
mod lanes;
mod link;
mod mma;
mod stmt;
mod version;

use std::collections::{HashMap, HashSet};

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};

use super::ir::Ir;
use super::LowerError;
use crate::ir::{Kernel, Stmt, Var};
use crate::lower::expr::ParamVal;
use crate::options::CompileOptions;
use crate::target::Target;
use inkwell::targets::TargetMachine;

pub use emit::{emit_gpu, EmitError, GpuStages};
pub use link::find_ld_lld;

/// Which GPU instruction set a lowering targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arch {
    Nvptx,
    Amdgpu,
}

/// The largest workgroup any supported GPU launches.
pub const MAX_BLOCK_DIM: u32 = crate::ir::MAX_BLOCK;

/// Threads per workgroup for `k` on `target`: the kernel's `block` if it states one, else the
/// wave width, or the largest `Lanes` count, whichever is larger, rounded up to a multiple of
/// the wave width. A lane region wider than the wave must span the whole workgroup (its count
/// a multiple of the wave width and equal to the workgroup), because its cross-wave exchanges
/// are workgroup barriers every thread must reach.
pub fn block_dim(k: &Kernel, target: &Target) -> Result<u32, LowerError> {
    let err = |message: String| LowerError { kernel: k.name.clone(), message };
    let Some(wave) = target.wave_width() else { return Err(err(format!("target {target} is not a GPU"))) };
    let mut widest = 0u32;
    max_lanes(&k.body, &mut widest);
    if widest > wave && widest % wave != 0 {
        return Err(err(format!(
            "a lane region of {widest} lanes on {target}: expected at most the wave width {wave}, or a multiple of it"
        )));
    }
    let dim = widest.max(wave).max(k.block.unwrap_or(0)).div_ceil(wave) * wave;
    if dim > MAX_BLOCK_DIM {
        return Err(err(format!("a workgroup of {dim} threads on {target}: expected at most {MAX_BLOCK_DIM}")));
    }
    if widest > wave && widest != dim {
        return Err(err(format!(
            "a lane region of {widest} lanes in a workgroup of {dim} threads (`block`) on {target}: a region wider than the wave {wave} must span the workgroup"
        )));
    }
    Ok(dim)
}

fn max_lanes(stmts: &[Stmt], widest: &mut u32) {
    for s in stmts {
        match s {
            Stmt::Lanes { count, body, .. } => {
                *widest = (*widest).max(*count);
                max_lanes(body, widest);
            }
            Stmt::For { body, .. } | Stmt::ParFor { body, .. } => max_lanes(body, widest),
            Stmt::If { then_body, else_body, .. } => {
                max_lanes(then_body, widest);
                max_lanes(else_body, widest);
            }
            Stmt::Let { .. }
            | Stmt::LetRows { .. }
            | Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Barrier
            | Stmt::Check { .. }
            | Stmt::MmaI8(_) => {}
        }
    }
}

/// The state of one GPU kernel's lowering.
pub(super) struct Gpu<'a, 'ctx> {
    ir: Ir<'a, 'ctx>,
    /// Positioned in the entry block, where every alloca goes.
    allocas: Builder<'ctx>,
    f: FunctionValue<'ctx>,
    k: &'a Kernel,
    arch: Arch,
    /// How `Expr::Dot4` is computed on this target.
    dot4: intrinsics::Dot4Isa,
    /// How `Stmt::MmaI8` is computed on this target.
    mma: mma::MmaIsa,
    wave: u32,
    block_dim: u32,
    slots: HashMap<Var, PointerValue<'ctx>>,
    lets: HashMap<Var, BasicValueEnum<'ctx>>,
    params: Vec<ParamVal<'ctx>>,
    shared: Vec<PointerValue<'ctx>>,
    err: PointerValue<'ctx>,
    /// `[block_dim x i32]` in workgroup memory for cross-wave exchanges (made on first use).
    xchg: Option<PointerValue<'ctx>>,
    /// This thread's first failure: packed kind/id/signed (i32, 0: none) and index (i64).
    /// The bounds-check calls (`checks.rs`), expanded after optimization.
    checks: checks::CheckFns<'ctx>,
    /// A zeroed global a failing buffer load reads instead of the buffer.
    zero_global: PointerValue<'ctx>,
    /// This thread's index in the workgroup (i64).
    tid: IntValue<'ctx>,
    /// The workgroup's index per axis (i64).
    group: [IntValue<'ctx>; 3],
    /// The lane count of the enclosing `Lanes` region.
    region: Option<u32>,
    /// Lanes per team inside a teamed `ParFor` iteration (its thread's lane is `tid % team`).
    team: Option<u32>,
    /// Index expressions (by node) whose accesses the current loop copy runs unchecked: its
    /// versioning proved them in range for every iteration (`version`).
    unchecked: HashSet<*const crate::ir::Expr>,
    /// Values the current unchecked copy uses for the loads of its indices' invariant parts
    /// (by index node): the ones its versioning checked (`version`).
    hoisted: version::Hoisted<'ctx>,
    /// While versioning evaluates indices at the loop's ends: the in-range bits of the loads
    /// met, which record no failure there (`version`).
    silent: Option<Vec<IntValue<'ctx>>>,
    /// The results of the enclosing `Lanes` region's reduction (1 outside one).
    region_rows: u32,
    /// `CompileOptions::lane_unroll` and `loop_versioning`.
    lane_unroll: u32,
    /// `CompileOptions::seq_unroll`.
    seq_unroll: u32,
    loop_versioning: bool,
}

/// Lowers an expanded, call-free kernel to a module holding one kernel entry named after
/// the kernel, laid out for `tm` (AMDGPU allocas live in address space 5).
pub fn lower_gpu<'ctx>(
    cx: &'ctx Context,
    k: &Kernel,
    target: &Target,
    options: &CompileOptions,
    tm: &TargetMachine,
) -> Result<Module<'ctx>, LowerError> {
    let m = cx.create_module(&k.name);
    m.set_triple(&tm.get_triple());
    m.set_data_layout(&tm.get_target_data().get_data_layout());
    let block_dim = block_dim(k, target)?;
    let fail = |message: &str| LowerError { kernel: k.name.clone(), message: message.into() };
    let arch = match target {
        Target::Nvptx { .. } => Arch::Nvptx,
        Target::Amdgpu { .. } => Arch::Amdgpu,
        Target::Host => return Err(fail("the host is not a GPU target")),
    };
    let Some(wave) = target.wave_width() else { return Err(fail("the target has no wave width")) };
    let isa = (intrinsics::Dot4Isa::of(target), mma::MmaIsa::of(target));
    entry::build(cx, &m, k, arch, isa, wave, block_dim, options)
        .map_err(|super::Fail(message)| LowerError { kernel: k.name.clone(), message })?;
    if let Err(e) = m.verify() {
        return Err(LowerError {
            kernel: k.name.clone(),
            message: format!("llvm rejected the module (a bug in baro): {}", e.to_string()),
        });
    }
    Ok(m)
}
