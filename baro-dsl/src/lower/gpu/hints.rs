//! Loop metadata for the GPU lowering: the strided loop of a `Lanes` region is asked to be
//! unrolled, so that several independent loads are in flight per lane. Unrolling never
//! changes what is computed: the float accumulator chain stays sequential (strict `fadd`,
//! no reassociation flags), only the loads of later iterations may be issued earlier.
//!
//! Written against the LLVM C API because inkwell cannot build the self-referencing node
//! `!llvm.loop` needs; this module must never attach anything but loop hints.

use inkwell::llvm_sys::core::{
    LLVMConstInt, LLVMGetMDKindIDInContext, LLVMInt32TypeInContext, LLVMMDNodeInContext2, LLVMMDStringInContext2,
    LLVMMetadataAsValue, LLVMSetMetadata, LLVMValueAsMetadata,
};
use inkwell::llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
use inkwell::values::{AsValueRef, InstructionValue};

use super::Gpu;
use crate::lower::R;

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    /// Attaches `llvm.loop.unroll.count` (`CompileOptions::lane_unroll`, default 8, divided by
    /// the region's result count for a reduction over R rows, at least 1, where the trip count
    /// is not a constant: the lane-strided loop, not the short loops inside it) to a loop's
    /// latch branch on NVPTX, inside a `Lanes` region or for an `innermost` loop with affine
    /// accesses (a sequential reduction over a column, say, whose loads would otherwise wait one
    /// by one). Other loops, and AMDGPU, where 8 copies spilled scalar registers in `q8_dot` on
    /// gfx942, keep LLVM's own choice.
    pub(super) fn loop_hint(&mut self, latch: InstructionValue<'ctx>, innermost: bool, fixed_trips: bool) -> R<()> {
        if (self.region.is_none() && !innermost) || self.arch != super::Arch::Nvptx {
            return Ok(());
        }
        let name = "llvm.loop.unroll.count";
        // SAFETY: every reference comes from this context and stays alive with it; the
        // temporary node is replaced (and freed) by the node that refers to itself, as the
        // LLVM language reference requires of a loop id.
        unsafe {
            let cx = self.ir.cx.raw();
            let tmp = LLVMTemporaryMDNode(cx, std::ptr::null_mut(), 0);
            let unroll = if fixed_trips { self.lane_unroll } else { (self.lane_unroll / self.region_rows).max(1) };
            let count = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(cx), unroll as u64, 0));
            let mut opt = [LLVMMDStringInContext2(cx, name.as_ptr().cast(), name.len()), count];
            let opt = LLVMMDNodeInContext2(cx, opt.as_mut_ptr(), opt.len());
            let mut ops = [tmp, opt];
            let id = LLVMMDNodeInContext2(cx, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(tmp, id);
            let kind = LLVMGetMDKindIDInContext(cx, "llvm.loop".as_ptr().cast(), "llvm.loop".len() as u32);
            LLVMSetMetadata(latch.as_value_ref(), kind, LLVMMetadataAsValue(cx, id));
        }
        Ok(())
    }
}
