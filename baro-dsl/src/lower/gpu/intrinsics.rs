//! Per-target GPU primitives: thread and workgroup ids, the workgroup barrier, and 32-bit
//! lane exchange (xor butterfly, read from a given lane). Everything target-specific in the
//! GPU lowering is here; the wave width is never assumed, it is passed in.

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::values::{BasicMetadataValueEnum, IntValue};

use super::Arch;
use crate::ir::Dot4Kind;
use crate::lower::ir::Ir;
use crate::lower::{fail, Fail, R};

/// The helper that makes an AMDGPU barrier also order workgroup memory. Written as IR text
/// because the LLVM 19 C API cannot build a fence with a sync scope.
const AMDGPU_BARRIER: &str = "baro.amdgpu.barrier";

fn call0<'ctx>(ir: &Ir<'_, 'ctx>, name: &str) -> R<IntValue<'ctx>> {
    Ok(ir.intrinsic(name, &[], &[])?.into_int_value())
}

/// This thread's index along x in its workgroup (i32).
pub(super) fn thread_id<'ctx>(ir: &Ir<'_, 'ctx>, arch: Arch) -> R<IntValue<'ctx>> {
    match arch {
        Arch::Nvptx => call0(ir, "llvm.nvvm.read.ptx.sreg.tid.x"),
        Arch::Amdgpu => call0(ir, "llvm.amdgcn.workitem.id.x"),
    }
}

/// The workgroup's index on `axis` (i32).
pub(super) fn group_id<'ctx>(ir: &Ir<'_, 'ctx>, arch: Arch, axis: u8) -> R<IntValue<'ctx>> {
    let xyz = ["x", "y", "z"];
    let Some(a) = xyz.get(axis as usize) else { return fail(format!("group id axis {axis}: expected 0, 1 or 2")) };
    match arch {
        Arch::Nvptx => call0(ir, &format!("llvm.nvvm.read.ptx.sreg.ctaid.{a}")),
        Arch::Amdgpu => call0(ir, &format!("llvm.amdgcn.workgroup.id.{a}")),
    }
}

/// A workgroup barrier that also orders shared and global memory within the workgroup.
pub(super) fn barrier(ir: &Ir<'_, '_>, arch: Arch) -> R<()> {
    match arch {
        Arch::Nvptx => {
            let Some(i) = inkwell::intrinsics::Intrinsic::find("llvm.nvvm.barrier0") else {
                return fail("llvm intrinsic `llvm.nvvm.barrier0` not found");
            };
            let Some(f) = i.get_declaration(ir.m, &[]) else {
                return fail("llvm intrinsic `llvm.nvvm.barrier0` has no declaration");
            };
            ir.b.build_call(f, &[], "")?;
        }
        Arch::Amdgpu => {
            let f = match ir.m.get_function(AMDGPU_BARRIER) {
                Some(f) => f,
                None => {
                    let text = format!(
                        "target datalayout = \"{}\"\ntarget triple = \"{}\"\n\
                         define void @\"{AMDGPU_BARRIER}\"() #0 {{\n  fence syncscope(\"workgroup\") release\n  call void @llvm.amdgcn.s.barrier()\n  fence syncscope(\"workgroup\") acquire\n  ret void\n}}\n\
                         declare void @llvm.amdgcn.s.barrier() #1\n\
                         attributes #0 = {{ alwaysinline convergent nounwind }}\nattributes #1 = {{ convergent nounwind willreturn }}\n",
                        ir.m.get_data_layout().as_str().to_string_lossy(),
                        ir.m.get_triple().as_str().to_string_lossy(),
                    );
                    let buf = MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "barrier");
                    let helper = ir
                        .cx
                        .create_module_from_ir(buf)
                        .map_err(|e| Fail(format!("barrier helper: {}", e.to_string())))?;
                    ir.m.link_in_module(helper).map_err(|e| Fail(format!("barrier helper: {}", e.to_string())))?;
                    // Linked as an external definition (the linker drops unreferenced local
                    // ones), then made internal.
                    let f =
                        ir.m.get_function(AMDGPU_BARRIER)
                            .ok_or_else(|| Fail("barrier helper missing after linking".into()))?;
                    f.set_linkage(inkwell::module::Linkage::Internal);
                    f
                }
            };
            ir.b.build_call(f, &[], "")?;
        }
    }
    Ok(())
}

/// How a target computes `Expr::Dot4`: every choice gives `Dot4Kind::eval`'s integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dot4Isa {
    /// PTX `dp4a.{s32,u32}.s32` (sm_61 and later) through inline assembly: LLVM 19's NVPTX
    /// has no dp4a intrinsic. The 32-bit result wraps, like the IR's.
    Dp4a,
    /// `llvm.amdgcn.sudot4` (gfx11 and later: `v_dot4_i32_iu8`, a signedness flag per
    /// operand), clamp off, so the sum wraps.
    Sudot4,
    /// No dot instruction used: four exact multiply-adds (`Ir::dot4_exact`).
    Exact,
}

impl Dot4Isa {
    pub(super) fn of(target: &crate::target::Target) -> Dot4Isa {
        use crate::target::Target;
        match target {
            Target::Nvptx { sm } if *sm >= 61 => Dot4Isa::Dp4a,
            Target::Amdgpu { arch } if arch.starts_with("gfx11") || arch.starts_with("gfx12") => Dot4Isa::Sudot4,
            _ => Dot4Isa::Exact,
        }
    }
}

/// `c + Σ a.byte(i) · b.byte(i)` with `isa`'s instruction (all operands i32).
pub(super) fn dot4<'ctx>(
    ir: &Ir<'_, 'ctx>,
    isa: Dot4Isa,
    kind: Dot4Kind,
    a: IntValue<'ctx>,
    b: IntValue<'ctx>,
    c: IntValue<'ctx>,
) -> R<IntValue<'ctx>> {
    match isa {
        Dot4Isa::Dp4a => {
            let i32t = ir.cx.i32_type();
            let fty = i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into()], false);
            let atype = if kind.a_signed() { "s32" } else { "u32" };
            // Pure: no side effects, so LLVM may move or drop it like any arithmetic.
            let asm = ir.cx.create_inline_asm(
                fty,
                format!("dp4a.{atype}.s32 $0, $1, $2, $3;"),
                "=r,r,r,r".to_string(),
                false,
                false,
                None,
                false,
            );
            let call = ir.b.build_indirect_call(fty, asm, &[a.into(), b.into(), c.into()], "")?;
            // Says so at the call: inline assembly is otherwise taken to touch memory, which
            // keeps LLVM from merging the loads around it into vector loads.
            for (attr, v) in [("nounwind", 0), ("willreturn", 0), ("nosync", 0), ("memory", super::checks::MEMORY_NONE)]
            {
                call.add_attribute(
                    AttributeLoc::Function,
                    ir.cx.create_enum_attribute(Attribute::get_named_enum_kind_id(attr), v),
                );
            }
            match call.try_as_basic_value().basic() {
                Some(v) => Ok(v.into_int_value()),
                None => fail("dp4a inline assembly returned no value"),
            }
        }
        Dot4Isa::Sudot4 => {
            let i1 = ir.cx.bool_type();
            let flag = |s: bool| i1.const_int(s as u64, false);
            let args =
                [flag(kind.a_signed()).into(), a.into(), flag(true).into(), b.into(), c.into(), flag(false).into()];
            Ok(ir.intrinsic("llvm.amdgcn.sudot4", &[], &args)?.into_int_value())
        }
        Dot4Isa::Exact => ir.dot4_exact(kind, a, b, c),
    }
}

/// How a lane picks its partner in an exchange.
#[derive(Clone, Copy)]
pub(super) enum Partner<'ctx> {
    /// `lane ^ mask`, every partner inside the region (count a power of two, mask < count).
    Xor(u32),
    /// An explicit lane index (i32).
    Lane(IntValue<'ctx>),
}

/// Reads the i32 `v` from the partner lane. `members` is the number of lanes taking part
/// (lanes `0..members`, all within one wave).
pub(super) fn exchange_i32<'ctx>(
    ir: &Ir<'_, 'ctx>,
    arch: Arch,
    v: IntValue<'ctx>,
    partner: Partner<'ctx>,
    lane: IntValue<'ctx>,
    members: u32,
) -> R<IntValue<'ctx>> {
    let call = |name: &str, args: &[BasicMetadataValueEnum<'ctx>]| -> R<IntValue<'ctx>> {
        let Some(i) = inkwell::intrinsics::Intrinsic::find(name) else {
            return fail(format!("llvm intrinsic `{name}` not found"));
        };
        let Some(f) = i.get_declaration(ir.m, &[]) else {
            return fail(format!("llvm intrinsic `{name}` has no declaration"));
        };
        match ir.b.build_call(f, args, "")?.try_as_basic_value().basic() {
            Some(r) => Ok(r.into_int_value()),
            None => fail(format!("llvm intrinsic `{name}` returned no value")),
        }
    };
    match arch {
        Arch::Nvptx => {
            let member_mask = if members >= 32 { u32::MAX } else { (1u32 << members) - 1 };
            // c = 0x1f: the whole 32-lane warp is one segment.
            let (name, sel) = match partner {
                Partner::Xor(m) => ("llvm.nvvm.shfl.sync.bfly.i32", ir.i32(m)),
                Partner::Lane(l) => ("llvm.nvvm.shfl.sync.idx.i32", l),
            };
            call(name, &[ir.i32(member_mask).into(), v.into(), sel.into(), ir.i32(0x1f).into()])
        }
        Arch::Amdgpu => {
            let lane32 = ir.trunc(lane, ir.cx.i32_type())?;
            let p = match partner {
                Partner::Xor(m) => ir.xor(lane32, ir.i32(m))?,
                Partner::Lane(l) => l,
            };
            // ds_bpermute addresses lanes in bytes.
            let addr = ir.shl(p, ir.i32(2))?;
            call("llvm.amdgcn.ds.bpermute", &[addr.into(), v.into()])
        }
    }
}
