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

/// Which unroll hint a loop's latch gets.
#[derive(Clone, Copy, Debug)]
pub(super) enum LoopHint {
    /// Inside a `Lanes` region the count below; elsewhere none (LLVM's own choice).
    Region,
    /// An innermost loop with affine accesses (a sequential reduction over a column, say, whose
    /// loads would otherwise wait one by one): outside a region, `CompileOptions::seq_unroll`
    /// (default 8) divided by the `chains` accumulators one iteration advances (a reduction over R rows in `seq`
    /// order advances R, which already gives R independent loads per iteration).
    Innermost { chains: u32 },
    /// The checked copy of a versioned loop, which runs only where an access fails: outside a
    /// region `llvm.loop.unroll.disable`, so that its checks, copied 8 times, do not raise the
    /// registers the whole kernel is allocated (ptxas allocates for the worst block). Inside a
    /// region it gets the region's count like the fast copy (rolled there, the 8-row q8 tiles
    /// measured more spills under the same register cap with `ptxas -v`).
    Cold,
}

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    /// Attaches `llvm.loop.unroll.count` (`CompileOptions::lane_unroll`, default 8, divided by
    /// the region's result count for a reduction over R rows, at least 1, where the trip count
    /// is not a constant: the lane-strided loop, not the short loops inside it) to a loop's
    /// latch branch on NVPTX, inside a `Lanes` region or for an `Innermost` loop (divided by
    /// its chains), and `llvm.loop.unroll.disable` to a `Cold` one outside a region. Other
    /// loops, and AMDGPU,
    /// where 8 copies spilled scalar registers in `q8_dot` on gfx942, keep LLVM's own choice.
    pub(super) fn loop_hint(&mut self, latch: InstructionValue<'ctx>, hint: LoopHint, fixed_trips: bool) -> R<()> {
        if self.arch != super::Arch::Nvptx {
            return Ok(());
        }
        // Inside a region every loop gets the count, its chains being the region's rows.
        let (base, divisor, cold) = match hint {
            _ if self.region.is_some() => (self.lane_unroll, self.region_rows, false),
            LoopHint::Region => return Ok(()),
            LoopHint::Innermost { chains } => (self.seq_unroll, chains, false),
            LoopHint::Cold => (self.lane_unroll, 1, true),
        };
        let name = if cold { "llvm.loop.unroll.disable" } else { "llvm.loop.unroll.count" };
        // SAFETY: every reference comes from this context and stays alive with it; the
        // temporary node is replaced (and freed) by the node that refers to itself, as the
        // LLVM language reference requires of a loop id.
        unsafe {
            let cx = self.ir.cx.raw();
            let tmp = LLVMTemporaryMDNode(cx, std::ptr::null_mut(), 0);
            let unroll = if fixed_trips { self.lane_unroll } else { (base / divisor).max(1) };
            let count = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(cx), unroll as u64, 0));
            let mut opt = [LLVMMDStringInContext2(cx, name.as_ptr().cast(), name.len()), count];
            let opt = LLVMMDNodeInContext2(cx, opt.as_mut_ptr(), if cold { 1 } else { opt.len() });
            let mut ops = [tmp, opt];
            let id = LLVMMDNodeInContext2(cx, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(tmp, id);
            let kind = LLVMGetMDKindIDInContext(cx, "llvm.loop".as_ptr().cast(), "llvm.loop".len() as u32);
            LLVMSetMetadata(latch.as_value_ref(), kind, LLVMMetadataAsValue(cx, id));
        }
        Ok(())
    }
}
