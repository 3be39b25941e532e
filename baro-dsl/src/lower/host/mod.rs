//! Host (x86-64) lowering: one LLVM function per kernel that runs every workgroup of a launch
//! in sequence (axes z, y, x), emulating `Lanes` regions in lockstep (`region`), with every
//! load and store bounds-checked. With `HostOrder::Shuffled` the workgroups of each axis and
//! the iterations of every `ParFor` run in a seeded permuted order instead (a race-free
//! kernel gives the same bytes; a racy one shows it).
//!
//! Entry signature (C ABI): `fn(ptrs: *const *mut u8, lens: *const u64, scalars: *const u64,
//! grid: *const u64 /* x, y, z */, scratch: *mut u8, err: *mut ErrorRecord)`. Buffer `i` is
//! `ptrs[i]` with `lens[i]` elements; scalar `i` is the canonical bits `scalars[i]`;
//! `scratch` holds the shared arrays at `shared_layout`'s offsets. On a failed check the
//! function fills `err` and returns at once.
//!
//! Defined results (so nothing is undefined behaviour): integer `x / 0` and `x % 0` are 0,
//! `MIN / -1` wraps to MIN (and `MIN % -1` is 0); shift amounts are taken modulo the width;
//! a `For` with step 0 (or a negative signed step) is a launch error; a shuffle whose partner
//! lane is outside `0..count` reads the lane's own value; variables and shared arrays start
//! zeroed. This module never emits fast-math flags, fma or `llvm.fmuladd`.

mod expr;
mod mma;
mod region;
mod stmt;

use std::collections::HashMap;

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::AddressSpace;

use super::ir::Ir;
use super::{fail, Fail, LowerError, R};
use crate::ir::{Expr, Kernel, ParamKind, Stmt, Var};
use crate::lower::expr::ParamVal;
use crate::options::HostOrder;

/// The JIT entry's symbol name.
pub const ENTRY_NAME: &str = "baro_entry";

/// `ErrorRecord::kind` values.
pub const ERR_READ: u64 = 1;
pub const ERR_WRITE: u64 = 2;
pub const ERR_READ_SHARED: u64 = 3;
pub const ERR_WRITE_SHARED: u64 = 4;
pub const ERR_FOR_STEP: u64 = 5;
/// A `check!` whose condition did not hold (`id`: the check's id).
pub const ERR_CHECK: u64 = 6;

/// What a failed check leaves behind: kind 0 means success.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorRecord {
    pub kind: u64,
    /// Param index (ERR_READ/ERR_WRITE) or shared array index.
    pub id: u64,
    /// The offending index (as u64; see `signed`) or, for ERR_FOR_STEP, the step.
    pub index: u64,
    /// 1 if `index` came from a signed type.
    pub signed: u64,
}

/// Byte offset of each shared array in the scratch block (8-aligned), and the total size.
pub fn shared_layout(k: &Kernel) -> (Vec<u64>, u64) {
    let mut offsets = Vec::with_capacity(k.shared.len());
    let mut total = 0u64;
    for s in &k.shared {
        offsets.push(total);
        total += (s.len as u64 * s.elem.size_bytes() as u64).div_ceil(8) * 8;
    }
    (offsets, total)
}

/// Where a statement-defined variable lives.
#[derive(Clone, Copy)]
pub(super) struct Slot<'ctx> {
    ptr: PointerValue<'ctx>,
    /// `Some(count)`: a per-lane array `[count x T]`.
    lanes: Option<u32>,
}

pub(super) struct Cg<'a, 'ctx> {
    ir: Ir<'a, 'ctx>,
    /// Positioned in the entry block, where every alloca goes.
    allocas: Builder<'ctx>,
    f: FunctionValue<'ctx>,
    k: &'a Kernel,
    slots: HashMap<Var, Slot<'ctx>>,
    lets: HashMap<Var, BasicValueEnum<'ctx>>,
    params: Vec<ParamVal<'ctx>>,
    shared: Vec<PointerValue<'ctx>>,
    group: [PointerValue<'ctx>; 3],
    err: PointerValue<'ctx>,
    /// The lane being executed (i64), inside a lane loop.
    cur_lane: Option<IntValue<'ctx>>,
    /// The lane count of the enclosing `Lanes` region.
    region: Option<u32>,
    /// Per-lane temporaries holding a shuffle's operand for every lane, keyed by node.
    shuffles: HashMap<*const Expr, PointerValue<'ctx>>,
    /// For a region's top-level statements whose results only some lanes need, those lanes
    /// (`region::lane_masks`), keyed by statement.
    lane_masks: HashMap<*const Stmt, u128>,
    /// `(a, b)`: `ParFor` iterations and workgroups run in the order i ↦ (a·i + b) mod n.
    order: Option<(u64, u64)>,
}

pub(super) use crate::lower::expr::{mem_ty, reg_ty};

/// Lowers an expanded, call-free kernel to a module holding `ENTRY_NAME`.
/// `order` permutes `ParFor` iterations and workgroups (`HostOrder::Shuffled`).
pub fn lower_host<'ctx>(cx: &'ctx Context, k: &Kernel, order: HostOrder) -> Result<Module<'ctx>, LowerError> {
    let expanded;
    let k = if mma::has_mma(&k.body) {
        expanded = mma::expand(k);
        &expanded
    } else {
        k
    };
    let m = cx.create_module(&k.name);
    let b = cx.create_builder();
    let allocas = cx.create_builder();
    build(cx, &m, &b, allocas, k, order.affine())
        .map_err(|Fail(message)| LowerError { kernel: k.name.clone(), message })?;
    if let Err(e) = m.verify() {
        return Err(LowerError {
            kernel: k.name.clone(),
            message: format!("llvm rejected the module (a bug in baro): {}", e.to_string()),
        });
    }
    Ok(m)
}

fn build<'a, 'ctx>(
    cx: &'ctx Context,
    m: &'a Module<'ctx>,
    b: &'a Builder<'ctx>,
    allocas: Builder<'ctx>,
    k: &'a Kernel,
    order: Option<(u64, u64)>,
) -> R<()> {
    if k.grid.is_empty() || k.grid.len() > 3 {
        return fail(format!("a kernel has 1 to 3 grid axes, found {}", k.grid.len()));
    }
    let ptr = cx.ptr_type(AddressSpace::default());
    let fty = cx.void_type().fn_type(&[ptr.into(); 6], false);
    let f = m.add_function(ENTRY_NAME, fty, None);
    let entry = cx.append_basic_block(f, "entry");
    let start = cx.append_basic_block(f, "start");
    allocas.position_at_end(entry);
    b.position_at_end(start);
    let arg = |i: u32| {
        f.get_nth_param(i).map(|p| p.into_pointer_value()).ok_or_else(|| Fail("missing entry parameter".into()))
    };
    let (ptrs, lens, scalars, grid, scratch, err) = (arg(0)?, arg(1)?, arg(2)?, arg(3)?, arg(4)?, arg(5)?);
    let ir = Ir { cx, b, m };
    let i64t = cx.i64_type();
    let group = [
        allocas.build_alloca(i64t, "group_x")?,
        allocas.build_alloca(i64t, "group_y")?,
        allocas.build_alloca(i64t, "group_z")?,
    ];
    let mut cg = Cg {
        ir,
        allocas,
        f,
        k,
        slots: HashMap::new(),
        lets: HashMap::new(),
        params: Vec::new(),
        shared: Vec::new(),
        group,
        err,
        cur_lane: None,
        region: None,
        lane_masks: HashMap::new(),
        shuffles: HashMap::new(),
        order,
    };
    cg.load_params(ptrs, lens, scalars)?;
    let (offsets, _) = shared_layout(k);
    for off in offsets {
        let p = unsafe { cg.ir.b.build_in_bounds_gep(cx.i8_type(), scratch, &[cg.ir.i64(off)], "shared")? };
        cg.shared.push(p);
    }
    cg.declare_vars()?;
    let sizes: Vec<IntValue> = (0..3u64)
        .map(|a| -> R<IntValue> {
            let p = unsafe { cg.ir.b.build_in_bounds_gep(i64t, grid, &[cg.ir.i64(a)], "")? };
            Ok(cg.ir.b.build_load(i64t, p, "grid")?.into_int_value())
        })
        .collect::<R<_>>()?;
    // z, y, x: the last axis varies slowest.
    cg.count_loop(sizes[2], &mut |cg, z| {
        let z = cg.permute(z, sizes[2])?;
        cg.ir.b.build_store(cg.group[2], z)?;
        cg.count_loop(sizes[1], &mut |cg, y| {
            let y = cg.permute(y, sizes[1])?;
            cg.ir.b.build_store(cg.group[1], y)?;
            cg.count_loop(sizes[0], &mut |cg, x| {
                let x = cg.permute(x, sizes[0])?;
                cg.ir.b.build_store(cg.group[0], x)?;
                cg.block(&k.body)
            })
        })
    })?;
    cg.ir.b.build_return(None)?;
    cg.allocas.build_unconditional_branch(start)?;
    Ok(())
}

impl<'a, 'ctx> Cg<'a, 'ctx> {
    fn load_params(
        &mut self,
        ptrs: PointerValue<'ctx>,
        lens: PointerValue<'ctx>,
        scalars: PointerValue<'ctx>,
    ) -> R<()> {
        let cx = self.ir.cx;
        let (i64t, ptr) = (cx.i64_type(), cx.ptr_type(AddressSpace::default()));
        for (i, p) in self.k.params.iter().enumerate() {
            let idx = self.ir.i64(i as u64);
            let v = match &p.kind {
                ParamKind::Buffer { .. } => {
                    let pp = unsafe { self.ir.b.build_in_bounds_gep(ptr, ptrs, &[idx], "")? };
                    let lp = unsafe { self.ir.b.build_in_bounds_gep(i64t, lens, &[idx], "")? };
                    ParamVal::Buffer {
                        ptr: self.ir.b.build_load(ptr, pp, &p.name)?.into_pointer_value(),
                        len: self.ir.b.build_load(i64t, lp, "len")?.into_int_value(),
                    }
                }
                ParamKind::Scalar(t) => {
                    let sp = unsafe { self.ir.b.build_in_bounds_gep(i64t, scalars, &[idx], "")? };
                    let bits = self.ir.b.build_load(i64t, sp, &p.name)?.into_int_value();
                    ParamVal::Scalar(self.ir.scalar_from_bits64(bits, *t)?)
                }
            };
            self.params.push(v);
        }
        Ok(())
    }

    /// Gives every statement-defined variable a zeroed slot: per-lane arrays for variables
    /// defined inside a `Lanes` region, plain slots otherwise.
    fn declare_vars(&mut self) -> R<()> {
        let mut lanes: HashMap<Var, u32> = HashMap::new();
        let mut all: Vec<Var> = Vec::new();
        collect_defs(&self.k.body, None, &mut lanes, &mut all);
        for v in all {
            if self.slots.contains_key(&v) {
                continue;
            }
            let Some(decl) = self.k.vars.get(v.index()) else { return fail(format!("variable {v} is not declared")) };
            let t = reg_ty(self.ir.cx, decl.ty);
            let slot = match lanes.get(&v) {
                Some(&n) => Slot { ptr: self.alloca_zeroed(t.array_type(n).into(), &decl.name)?, lanes: Some(n) },
                None => Slot { ptr: self.alloca_zeroed(t, &decl.name)?, lanes: None },
            };
            self.slots.insert(v, slot);
        }
        Ok(())
    }

    pub(super) fn alloca_zeroed(&self, t: BasicTypeEnum<'ctx>, name: &str) -> R<PointerValue<'ctx>> {
        let p = self.allocas.build_alloca(t, name)?;
        self.allocas.build_store(p, t.const_zero())?;
        Ok(p)
    }
}

/// Records every variable a statement defines (`Let`, `For`/`ParFor` variables, lane
/// indices), and for those inside a `Lanes` region, its lane count.
fn collect_defs(stmts: &[Stmt], region: Option<u32>, lanes: &mut HashMap<Var, u32>, all: &mut Vec<Var>) {
    let def = |v: Var, lanes: &mut HashMap<Var, u32>, all: &mut Vec<Var>| {
        all.push(v);
        if let Some(n) = region {
            lanes.insert(v, n);
        }
    };
    for s in stmts {
        match s {
            Stmt::Let { var, .. } => def(*var, lanes, all),
            Stmt::LetRows { vars, .. } => vars.iter().for_each(|v| def(*v, lanes, all)),
            Stmt::Assign { var, .. } => all.push(*var),
            Stmt::For { var, body, .. } | Stmt::ParFor { var, body, .. } => {
                def(*var, lanes, all);
                collect_defs(body, region, lanes, all);
            }
            Stmt::If { then_body, else_body, .. } => {
                collect_defs(then_body, region, lanes, all);
                collect_defs(else_body, region, lanes, all);
            }
            Stmt::Lanes { lane, count, body, .. } => {
                all.push(*lane);
                lanes.insert(*lane, *count);
                collect_defs(body, Some(*count), lanes, all);
            }
            Stmt::Store { .. } | Stmt::Barrier | Stmt::Check { .. } | Stmt::MmaI8(_) => {}
        }
    }
}
