//! Bounds checks in two phases, so that LLVM can merge the checks of one element.
//!
//! A thread keeps its first failure in private state that every checked access updates (a
//! compare and two selects). Written out directly, that chain ties every check to the one
//! before it: after unrolling, a quantized matvec loads each weight word once (GVN merges the
//! loads) but still runs the failure update of every source-level access of it — on sm_90 that
//! was about half of `matvec_q6_k_xs`'s instructions.
//!
//! So the lowering emits the checks as calls, which the O2 pipeline treats as plain values:
//! - `@baro.in_range(i64 index, i64 len, i32 code) -> i1`: `memory(none)`, so two checks of
//!   one index against one length are one value (EarlyCSE/GVN), and a check is hoisted or
//!   sunk with the load it guards;
//! - `@baro.record(i1 bad, i32 code, i64 index)` (a failed store, a bad loop step) and the
//!   reads `@baro.fail_code()`, `@baro.fail_index()` at kernel end: `memory(inaccessiblemem)`,
//!   so they keep their order among themselves.
//!
//! After O2, [`expand`] replaces each call by what it stands for — `index < len` plus the
//! failure update, the update alone, or a read of the state — on a fresh pair of private
//! variables, and a short pipeline promotes them to registers. What is computed is unchanged;
//! what is reported is still a failure of this thread, the first in the optimized program's
//! order (merged checks of one element count once). A check whose load is dead is removed
//! with it, as LLVM removes the load itself: a read that influences nothing is not reported.

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::ContextRef;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::TargetMachine;
use inkwell::values::{
    BasicMetadataValueEnum, CallSiteValue, FunctionValue, InstructionOpcode, InstructionValue, IntValue,
};
use inkwell::IntPredicate as P;

use crate::lower::{fail, R};

const IN_RANGE: &str = "baro.in_range";
const RECORD: &str = "baro.record";
const FAIL_CODE: &str = "baro.fail_code";
const FAIL_INDEX: &str = "baro.fail_index";

/// `memory(...)` encodings (LLVM's `MemoryEffects`: two mod/ref bits per location, argument
/// memory first, then inaccessible memory, then the rest).
pub(super) const MEMORY_NONE: u64 = 0;
const INACCESSIBLE_READ: u64 = 1 << 2;
const INACCESSIBLE_READ_WRITE: u64 = 3 << 2;

/// The four declarations a kernel's checks call.
#[derive(Clone, Copy)]
pub(super) struct CheckFns<'ctx> {
    pub in_range: FunctionValue<'ctx>,
    pub record: FunctionValue<'ctx>,
    pub fail_code: FunctionValue<'ctx>,
    pub fail_index: FunctionValue<'ctx>,
}

impl<'ctx> CheckFns<'ctx> {
    pub(super) fn declare(m: &Module<'ctx>) -> CheckFns<'ctx> {
        let cx = m.get_context();
        let (b, i32t, i64t, void) = (cx.bool_type(), cx.i32_type(), cx.i64_type(), cx.void_type());
        let decl = |name: &str, f: inkwell::types::FunctionType<'ctx>, memory: u64| {
            let fv = m.get_function(name).unwrap_or_else(|| m.add_function(name, f, None));
            for (attr, v) in [("nounwind", 0), ("willreturn", 0), ("nosync", 0), ("memory", memory)] {
                fv.add_attribute(
                    AttributeLoc::Function,
                    cx.create_enum_attribute(Attribute::get_named_enum_kind_id(attr), v),
                );
            }
            fv
        };
        CheckFns {
            in_range: decl(IN_RANGE, b.fn_type(&[i64t.into(), i64t.into(), i32t.into()], false), MEMORY_NONE),
            record: decl(RECORD, void.fn_type(&[b.into(), i32t.into(), i64t.into()], false), INACCESSIBLE_READ_WRITE),
            fail_code: decl(FAIL_CODE, i32t.fn_type(&[], false), INACCESSIBLE_READ),
            fail_index: decl(FAIL_INDEX, i64t.fn_type(&[], false), INACCESSIBLE_READ),
        }
    }
}

/// Replaces every check call in `m` by its code (see the module comment), then promotes the
/// failure state to registers and folds what the expansion left.
pub(super) fn expand<'ctx>(m: &Module<'ctx>, tm: &TargetMachine) -> R<()> {
    let cx = m.get_context();
    let names = [IN_RANGE, RECORD, FAIL_CODE, FAIL_INDEX];
    let ours: Vec<FunctionValue<'ctx>> = names.iter().filter_map(|n| m.get_function(n)).collect();
    if ours.is_empty() {
        return Ok(());
    }
    // O2 unrolls the lane loops late (after its last GVN): merge the copies' common index
    // arithmetic, checks and loads first.
    if let Err(e) = m.run_passes(
        "function(early-cse<memssa>,gvn,instcombine<no-verify-fixpoint>)",
        tm,
        PassBuilderOptions::create(),
    ) {
        return fail(format!("merging the checks: {}", e.to_string()));
    }
    let mut f = m.get_first_function();
    while let Some(func) = f {
        f = func.get_next_function();
        if func.count_basic_blocks() > 0 {
            expand_function(&cx, func)?;
        }
    }
    for fv in ours {
        // SAFETY: a plain query on a live function of this module.
        if !unsafe { inkwell::llvm_sys::core::LLVMGetFirstUse(inkwell::values::AsValueRef::as_value_ref(&fv)) }
            .is_null()
        {
            return fail(format!("`{}` is still called after the check expansion", fv.get_name().to_string_lossy()));
        }
        // SAFETY: the declaration has no uses left (checked just above).
        unsafe { fv.delete() };
    }
    match m.run_passes(
        "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg)",
        tm,
        PassBuilderOptions::create(),
    ) {
        Ok(()) => Ok(()),
        Err(e) => fail(format!("optimizing the expanded checks: {}", e.to_string())),
    }
}

fn expand_function<'ctx>(cx: &ContextRef<'ctx>, func: FunctionValue<'ctx>) -> R<()> {
    let calls: Vec<(InstructionValue<'ctx>, String)> = func
        .get_basic_block_iter()
        .flat_map(|bb| bb.get_instructions())
        .filter(|i| i.get_opcode() == InstructionOpcode::Call)
        .filter_map(|i| {
            let callee = CallSiteValue::try_from(i).ok()?.get_called_fn_value()?;
            let name = callee.get_name().to_str().ok()?;
            [IN_RANGE, RECORD, FAIL_CODE, FAIL_INDEX].contains(&name).then(|| (i, name.to_string()))
        })
        .collect();
    if calls.is_empty() {
        return Ok(());
    }
    let b = cx.create_builder();
    let (i32t, i64t) = (cx.i32_type(), cx.i64_type());
    let entry = func.get_first_basic_block().expect("a function with a body has an entry block");
    match entry.get_first_instruction() {
        Some(first) => b.position_before(&first),
        None => b.position_at_end(entry),
    }
    let code_slot = b.build_alloca(i32t, "fail_code")?;
    let index_slot = b.build_alloca(i64t, "fail_index")?;
    b.build_store(code_slot, i32t.const_zero())?;
    b.build_store(index_slot, i64t.const_zero())?;
    let state = State { b: &b, code_slot, index_slot };
    for (call, name) in calls {
        b.position_before(&call);
        let arg = |n: u32| -> R<IntValue<'ctx>> {
            match call.get_operand(n).and_then(|o| o.value()) {
                Some(v) if v.is_int_value() => Ok(v.into_int_value()),
                _ => fail(format!("`{name}` call without integer operand {n}")),
            }
        };
        let value = match name.as_str() {
            IN_RANGE => {
                let (index, len, code) = (arg(0)?, arg(1)?, arg(2)?);
                let ok = b.build_int_compare(P::ULT, index, len, "in_range")?;
                let bad = b.build_not(ok, "")?;
                state.record(bad, code, index)?;
                Some(ok)
            }
            RECORD => {
                state.record(arg(0)?, arg(1)?, arg(2)?)?;
                None
            }
            FAIL_CODE => Some(b.build_load(i32t, code_slot, "")?.into_int_value()),
            _ => Some(b.build_load(i64t, index_slot, "")?.into_int_value()),
        };
        if let Some(v) = value {
            let Ok(old) = IntValue::try_from(call) else {
                return fail(format!("`{name}` call is not an integer value"));
            };
            old.replace_all_uses_with(v);
        }
        call.erase_from_basic_block();
    }
    Ok(())
}

struct State<'b, 'ctx> {
    b: &'b Builder<'ctx>,
    code_slot: inkwell::values::PointerValue<'ctx>,
    index_slot: inkwell::values::PointerValue<'ctx>,
}

impl<'ctx> State<'_, 'ctx> {
    /// The thread's first failure wins: `code`/`index` are kept when `bad` and none is yet.
    fn record(&self, bad: IntValue<'ctx>, code: IntValue<'ctx>, index: IntValue<'ctx>) -> R<()> {
        let b = self.b;
        let (i32t, i64t) = (code.get_type(), index.get_type());
        let old = b.build_load(i32t, self.code_slot, "")?.into_int_value();
        let none = b.build_int_compare(P::EQ, old, i32t.const_zero(), "")?;
        let first = b.build_and(bad, none, "")?;
        b.build_store(self.code_slot, b.build_select(first, code, old, "")?)?;
        let old_index = b.build_load(i64t, self.index_slot, "")?.into_int_value();
        b.build_store(self.index_slot, b.build_select(first, index, old_index, "")?)?;
        Ok(())
    }
}

/// Calls `in_range` as the lowering does (its result is the check's `index < len`).
pub(super) fn call_in_range<'ctx>(
    b: &Builder<'ctx>,
    fns: &CheckFns<'ctx>,
    index: IntValue<'ctx>,
    len: IntValue<'ctx>,
    code: IntValue<'ctx>,
) -> R<IntValue<'ctx>> {
    let args: [BasicMetadataValueEnum<'ctx>; 3] = [index.into(), len.into(), code.into()];
    let site = b.build_call(fns.in_range, &args, "ok")?;
    match site.try_as_basic_value().basic() {
        Some(v) => Ok(v.into_int_value()),
        None => fail("`baro.in_range` returned no value".to_string()),
    }
}
