//! The kernel entry of the GPU lowering: its signature and calling convention, per-target
//! attributes and module flags, thread and group ids, zeroed variable slots and shared arrays.
//! Nothing here lowers statements (`stmt`) or lane regions (`lanes`).

use std::collections::HashMap;

use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::module::{FlagBehavior, Linkage, Module};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{BasicMetadataValueEnum, PointerValue};
use inkwell::AddressSpace;

use super::{Arch, Gpu};
use crate::ir::{Kernel, ParamKind, Stmt, Var};
use crate::lower::expr::ParamVal;
use crate::lower::expr::{mem_ty, reg_ty};
use crate::lower::ir::Ir;
use crate::lower::{fail, Fail, R};
use crate::options::{CodeObjectVersion, CompileOptions};

/// LLVM calling conventions of kernel entries.
const CC_PTX_KERNEL: u32 = 71;
const CC_AMDGPU_KERNEL: u32 = 91;

pub(super) const GLOBAL: u16 = 1;
pub(super) const SHARED: u16 = 3;

// The target's arch and its dot and matrix instructions travel separately: one more than clippy's 7.
#[allow(clippy::too_many_arguments)]
pub(super) fn build<'ctx>(
    cx: &'ctx Context,
    m: &Module<'ctx>,
    k: &Kernel,
    arch: Arch,
    (dot4, mma): (super::intrinsics::Dot4Isa, super::mma::MmaIsa),
    wave: u32,
    block_dim: u32,
    options: &CompileOptions,
) -> R<()> {
    if k.grid.is_empty() || k.grid.len() > 3 {
        return fail(format!("a kernel has 1 to 3 grid axes, found {}", k.grid.len()));
    }
    if k.name.is_empty()
        || !k.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || k.name.starts_with(|c: char| c.is_ascii_digit())
    {
        return fail(format!("kernel name `{}`: expected an identifier (letters, digits, `_`)", k.name));
    }
    let gptr = cx.ptr_type(AddressSpace::from(GLOBAL));
    let i64t = cx.i64_type();
    let mut sig: Vec<BasicMetadataTypeEnum> = Vec::new();
    for p in &k.params {
        match p.kind {
            ParamKind::Buffer { .. } => {
                sig.push(gptr.into());
                sig.push(i64t.into());
            }
            ParamKind::Scalar(_) => sig.push(i64t.into()),
        }
    }
    sig.push(gptr.into());
    let f = m.add_function(&k.name, cx.void_type().fn_type(&sig, false), None);
    annotate(cx, m, f, arch, (wave, block_dim), k.min_groups, options)?;

    let b = cx.create_builder();
    let allocas = cx.create_builder();
    let entry = cx.append_basic_block(f, "entry");
    let start = cx.append_basic_block(f, "start");
    allocas.position_at_end(entry);
    b.position_at_end(start);
    let ir = Ir { cx, b: &b, m };

    let arg = |i: u32| f.get_nth_param(i).ok_or_else(|| Fail(format!("missing entry parameter {i}")));
    let mut params = Vec::with_capacity(k.params.len());
    let mut next = 0u32;
    for p in &k.params {
        match p.kind {
            ParamKind::Buffer { .. } => {
                let ptr = arg(next)?.into_pointer_value();
                let len = arg(next + 1)?.into_int_value();
                ptr.set_name(&p.name);
                len.set_name(&format!("{}_len", p.name));
                params.push(ParamVal::Buffer { ptr, len });
                next += 2;
            }
            ParamKind::Scalar(t) => {
                let bits = arg(next)?.into_int_value();
                bits.set_name(&p.name);
                params.push(ParamVal::Scalar(ir.scalar_from_bits64(bits, t)?));
                next += 1;
            }
        }
    }
    let err = arg(next)?.into_pointer_value();
    err.set_name("error_record");

    let tid = ir.zext(super::intrinsics::thread_id(&ir, arch)?, i64t)?;
    let mut group = [ir.i64(0); 3];
    for (axis, g) in group.iter_mut().enumerate() {
        *g = ir.zext(super::intrinsics::group_id(&ir, arch, axis as u8)?, i64t)?;
    }
    let mut shared = Vec::with_capacity(k.shared.len());
    for s in &k.shared {
        let t = mem_ty(cx, s.elem).array_type(s.len);
        let g = m.add_global(t, Some(AddressSpace::from(SHARED)), &format!("shared_{}", s.name));
        g.set_linkage(Linkage::Internal);
        g.set_initializer(&t.get_undef());
        // 16 bytes: four consecutive 32-bit elements at a multiple of four may then be read
        // as one vector load.
        g.set_alignment(16);
        shared.push(g.as_pointer_value());
    }

    let zero_t = cx.i64_type().array_type(2);
    let zero = m.add_global(zero_t, Some(AddressSpace::from(GLOBAL)), "baro_zero");
    zero.set_linkage(Linkage::Internal);
    zero.set_constant(true);
    zero.set_initializer(&zero_t.const_zero());
    zero.set_alignment(16);
    let checks = super::checks::CheckFns::declare(m);

    let mut gpu = Gpu {
        ir,
        allocas,
        f,
        k,
        arch,
        dot4,
        mma,
        wave,
        block_dim,
        slots: HashMap::new(),
        lets: HashMap::new(),
        params,
        shared,
        err,
        xchg: None,
        checks,
        zero_global: zero.as_pointer_value(),
        tid,
        group,
        region: None,
        team: None,
        unchecked: Default::default(),
        hoisted: Default::default(),
        silent: None,
        region_rows: 1,
        lane_unroll: options.lane_unroll,
        seq_unroll: options.seq_unroll,
        loop_versioning: options.loop_versioning,
    };
    gpu.declare_vars()?;
    gpu.zero_shared()?;
    gpu.block(&k.body)?;
    gpu.flush_failure()?;
    gpu.ir.b.build_return(None)?;
    gpu.allocas.build_unconditional_branch(start)?;
    Ok(())
}

/// Calling convention, launch bounds and floating-point mode of the entry; module flags.
/// `min_groups` (`Kernel::min_groups`) becomes NVPTX's `minctasm` (ptxas then allots at most
/// 65536 / (block · N) registers a thread) and AMDGPU's minimum waves per execution unit (a
/// compute unit's four SIMDs sharing the N workgroups' waves).
fn annotate<'ctx>(
    cx: &'ctx Context,
    m: &Module<'ctx>,
    f: inkwell::values::FunctionValue<'ctx>,
    arch: Arch,
    (wave, block_dim): (u32, u32),
    min_groups: Option<u32>,
    options: &CompileOptions,
) -> R<()> {
    if let Some(g) = min_groups.filter(|g| !(1..=crate::ir::MAX_MIN_GROUPS).contains(g)) {
        return fail(format!(
            "`min_groups {g}`: expected 1 to {} workgroups per compute unit",
            crate::ir::MAX_MIN_GROUPS
        ));
    }
    let attr = |k: &str, v: &str| f.add_attribute(AttributeLoc::Function, cx.create_string_attribute(k, v));
    // f32 denormals are preserved on every target (no flush to zero).
    attr("denormal-fp-math-f32", "ieee,ieee");
    attr("denormal-fp-math", "ieee,ieee");
    match arch {
        Arch::Nvptx => {
            f.set_call_conventions(CC_PTX_KERNEL);
            // One `nvvm.annotations` entry per launch bound: (entry, key, value).
            let bound = |key: &str, value: u32| -> R<()> {
                let md: [BasicMetadataValueEnum; 3] = [
                    f.as_global_value().as_pointer_value().into(),
                    cx.metadata_string(key).into(),
                    cx.i32_type().const_int(value as u64, false).into(),
                ];
                m.add_global_metadata("nvvm.annotations", &cx.metadata_node(&md))
                    .map_err(|e| Fail(format!("nvvm.annotations: {e}")))
            };
            bound("maxntidx", block_dim)?;
            if let Some(g) = min_groups {
                bound("minctasm", g)?;
            }
        }
        Arch::Amdgpu => {
            f.set_call_conventions(CC_AMDGPU_KERNEL);
            attr("amdgpu-flat-work-group-size", &format!("{block_dim},{block_dim}"));
            attr("uniform-work-group-size", "true");
            if let Some(g) = min_groups {
                attr("amdgpu-waves-per-eu", &(g * block_dim).div_ceil(wave * 4).max(1).to_string());
            }
            let cov = match options.amdgpu_code_object {
                CodeObjectVersion::V4 => 400,
                CodeObjectVersion::V5 => 500,
            };
            m.add_basic_value_flag(
                "amdhsa_code_object_version",
                FlagBehavior::Error,
                cx.i32_type().const_int(cov, false),
            );
        }
    }
    Ok(())
}

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    /// Gives every statement-defined variable a zeroed private slot.
    fn declare_vars(&mut self) -> R<()> {
        let mut all = Vec::new();
        collect_defs(&self.k.body, &mut all);
        for v in all {
            if self.slots.contains_key(&v) {
                continue;
            }
            let Some(decl) = self.k.vars.get(v.index()) else { return fail(format!("variable {v} is not declared")) };
            let p = self.alloca_zeroed(reg_ty(self.ir.cx, decl.ty), &decl.name)?;
            self.slots.insert(v, p);
        }
        Ok(())
    }

    pub(super) fn alloca_zeroed(&self, t: BasicTypeEnum<'ctx>, name: &str) -> R<PointerValue<'ctx>> {
        let p = self.allocas.build_alloca(t, name)?;
        self.allocas.build_store(p, t.const_zero())?;
        Ok(p)
    }

    /// Shared arrays start zeroed (as on the host): every thread clears a strided share,
    /// then the workgroup waits at a barrier.
    fn zero_shared(&mut self) -> R<()> {
        if self.k.shared.is_empty() {
            return Ok(());
        }
        for (i, s) in self.k.shared.iter().enumerate() {
            let t = mem_ty(self.ir.cx, s.elem);
            let base = self.shared[i];
            let n = self.ir.i64(s.len as u64);
            self.strided_loop(crate::ir::ScalarType::INDEX, n, None, &mut |g, j| {
                let p = unsafe { g.ir.b.build_in_bounds_gep(t, base, &[j], "")? };
                g.ir.b.build_store(p, t.const_zero())?;
                Ok(())
            })?;
        }
        self.barrier()
    }
}

/// Every variable a statement defines or assigns.
fn collect_defs(stmts: &[Stmt], all: &mut Vec<Var>) {
    for s in stmts {
        match s {
            Stmt::Let { var, .. } | Stmt::Assign { var, .. } => all.push(*var),
            Stmt::LetRows { vars, .. } => all.extend(vars.iter().copied()),
            Stmt::For { var, body, .. } | Stmt::ParFor { var, body, .. } => {
                all.push(*var);
                collect_defs(body, all);
            }
            Stmt::If { then_body, else_body, .. } => {
                collect_defs(then_body, all);
                collect_defs(else_body, all);
            }
            Stmt::Lanes { lane, body, .. } => {
                all.push(*lane);
                collect_defs(body, all);
            }
            Stmt::Store { .. } | Stmt::Barrier | Stmt::Check { .. } | Stmt::MmaI8(_) => {}
        }
    }
}
