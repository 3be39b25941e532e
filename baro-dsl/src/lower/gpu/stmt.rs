//! Statements of the GPU lowering: private variable slots, loops, branches, bounds-checked
//! loads and stores that record the failure and skip the access, and the expression leaves
//! the shared walk (`lower::expr`) needs.
//!
//! Failures are kept per thread (its first one, in program order, as selects on private
//! state: no branch in a load's path) and published once at kernel end by a
//! compare-and-swap across threads ("first" = the thread's first failure, from whichever
//! thread reaches the end first).
//!
//! Loops never run forever and never overflow their counter: a bad step records
//! `ERR_FOR_STEP` and skips the loop, and an iteration whose next counter would overflow is
//! the last one. Nothing here returns early from the kernel (a barrier may follow).

use std::collections::HashMap;

use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{AtomicOrdering, IntPredicate as P};

use super::hints::LoopHint;
use super::version::Plan;
use super::{intrinsics, Gpu};
use crate::ir::{Access, Buf, Expr, Kernel, ParamKind, ScalarType, Stmt, Var};
use crate::lower::expr::ParamVal;
use crate::lower::expr::{mem_ty, reg_ty, ExprLeaves, Val};
use crate::lower::host::{ERR_FOR_STEP, ERR_READ, ERR_READ_SHARED, ERR_WRITE, ERR_WRITE_SHARED};
use crate::lower::ir::Ir;
use crate::lower::{fail, R};

/// A thread's failure state packs `kind | signed << 7 | id << 8` into one i32 (0: none),
/// 32 bits so that its per-access update is one compare and one select.
const FAIL_KIND_MASK: u64 = 0x7f;
const FAIL_SIGNED_BIT: u64 = 7;
const FAIL_ID_SHIFT: u64 = 8;

pub(super) type Body<'b, 'a, 'ctx> = dyn FnMut(&mut Gpu<'a, 'ctx>, IntValue<'ctx>) -> R<()> + 'b;

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    pub(super) fn block(&mut self, stmts: &'a [Stmt]) -> R<()> {
        for s in stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &'a Stmt) -> R<()> {
        match s {
            Stmt::Let { var, value } | Stmt::Assign { var, value } => {
                let v = self.expr(value)?;
                self.store_var(*var, v.v)
            }
            // Expanded away (`lanes::expand`): lowering its value reports the unexpanded reduction.
            Stmt::LetRows { value, .. } => self.expr(value).map(|_| ()),
            Stmt::Store { buf, index, value } => {
                let (idx, signed) = self.index(index)?;
                let v = self.expr(value)?;
                let v = match v.ty {
                    ScalarType::Bool => self.ir.zext(v.v.into_int_value(), self.ir.cx.i8_type())?.into(),
                    _ => v.v,
                };
                self.checked_store(*buf, index, idx, signed, v)
            }
            Stmt::For { var, start, end, step, body } => {
                let ty = self.var_ty(*var)?;
                let (s, e, st) = (self.expr(start)?, self.expr(end)?, self.expr(step)?);
                let plan = Plan::new(*var, ty, body, &|b| read_only(self.k, b));
                self.for_loop(
                    ty,
                    s.v.into_int_value(),
                    e.v.into_int_value(),
                    st.v.into_int_value(),
                    plan.as_ref(),
                    &mut |g, i| {
                        g.store_var(*var, i.into())?;
                        g.block(body)
                    },
                )
            }
            Stmt::ParFor { var, end, team, body } => {
                if self.region.is_some() || self.team.is_some() {
                    return fail("a `ParFor` inside a `Lanes` region or a teamed `ParFor`");
                }
                let ty = self.var_ty(*var)?;
                let e = self.expr(end)?.v.into_int_value();
                // A parallel loop runs an iteration or two per lane: versioning it saves a few
                // checks and, where its body holds a sequential loop (versioned by its own
                // plan), doubles every copy of that loop and the registers the kernel is
                // allocated for them, so such a loop is not versioned.
                let plan = Plan::new(*var, ty, body, &|b| read_only(self.k, b)).filter(|p| p.innermost());
                match *team {
                    None => self.strided_loop(ty, e, plan.as_ref(), &mut |g, i| {
                        g.store_var(*var, i.into())?;
                        g.block(body)
                    })?,
                    Some(t) => {
                        if t == 0
                            || !t.is_power_of_two()
                            || t > self.wave
                            || self.wave % t != 0
                            || self.block_dim % t != 0
                        {
                            return fail(format!(
                                "a `par` team of {t} lanes in a workgroup of {} threads with a wave of {}: expected a power of two that divides the wave",
                                self.block_dim, self.wave
                            ));
                        }
                        if self.arch == super::Arch::Nvptx && t != self.wave {
                            return fail(format!("a `par` team of {t} lanes on a wave of {}: NVPTX lane exchanges need the team to be the whole wave", self.wave));
                        }
                        self.team = Some(t);
                        let r = self.team_loop(ty, e, t, plan.as_ref(), &mut |g, i| {
                            g.store_var(*var, i.into())?;
                            g.block(body)
                        });
                        self.team = None;
                        r?;
                    }
                }
                self.barrier()
            }
            Stmt::If { cond, then_body, else_body } => {
                let c = self.expr(cond)?.v.into_int_value();
                self.if_else(c, then_body, else_body)
            }
            Stmt::Lanes { lane, count, implements, body } => {
                if self.region.is_some() {
                    return fail("a `Lanes` region inside another `Lanes` region");
                }
                // A region computing R results (a reduction over rows) already has R
                // independent chains per element: its strided loop is unrolled R times less.
                self.region_rows = implements.as_ref().map_or(1, |i| i.results.len().max(1) as u32);
                let r = self.lanes_region(*lane, *count, body);
                self.region_rows = 1;
                r
            }
            Stmt::Barrier => {
                if self.region.is_some() {
                    return fail("a barrier inside a `Lanes` region");
                }
                self.barrier()
            }
            Stmt::MmaI8(m) => self.mma_i8(m),
            Stmt::Check { id, cond } => {
                let ok = self.expr(cond)?.v.into_int_value();
                let bad = self.ir.b.build_not(ok, "")?;
                let zero = self.ir.i64(0);
                self.record_if(bad, crate::lower::ERR_CHECK, u64::from(*id), zero, false)
            }
        }
    }

    pub(super) fn barrier(&mut self) -> R<()> {
        intrinsics::barrier(&self.ir, self.arch)
    }

    pub(super) fn if_else(&mut self, c: IntValue<'ctx>, then_body: &'a [Stmt], else_body: &'a [Stmt]) -> R<()> {
        self.branch(c, &mut |g| g.block(then_body), &mut |g| g.block(else_body))
    }

    /// `if c { then } else { els }` around arbitrary code.
    pub(super) fn branch(
        &mut self,
        c: IntValue<'ctx>,
        then: &mut dyn FnMut(&mut Self) -> R<()>,
        els: &mut dyn FnMut(&mut Self) -> R<()>,
    ) -> R<()> {
        let cx = self.ir.cx;
        let (t, e, done) = (
            cx.append_basic_block(self.f, "then"),
            cx.append_basic_block(self.f, "else"),
            cx.append_basic_block(self.f, "endif"),
        );
        self.ir.b.build_conditional_branch(c, t, e)?;
        self.ir.b.position_at_end(t);
        then(self)?;
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(e);
        els(self)?;
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(done);
        Ok(())
    }

    pub(super) fn store_var(&mut self, v: Var, val: BasicValueEnum<'ctx>) -> R<()> {
        let Some(&p) = self.slots.get(&v) else { return fail(format!("variable {v} has no slot")) };
        self.ir.b.build_store(p, val)?;
        Ok(())
    }

    pub(super) fn load_var(&mut self, v: Var) -> R<BasicValueEnum<'ctx>> {
        if let Some(&val) = self.lets.get(&v) {
            return Ok(val);
        }
        let Some(&p) = self.slots.get(&v) else { return fail(format!("variable {v} is read but never defined")) };
        let t = reg_ty(self.ir.cx, self.var_ty(v)?);
        Ok(self.ir.b.build_load(t, p, "")?)
    }

    /// Base pointer, length, error kind and id of a buffer access.
    pub(super) fn access(&self, buf: Buf, write: bool) -> R<(PointerValue<'ctx>, IntValue<'ctx>, u64, u64)> {
        match buf {
            Buf::Param(p) => match (self.params.get(p.index()), &self.k.params[p.index()].kind) {
                (Some(ParamVal::Buffer { .. }), ParamKind::Buffer { access: Access::Read, .. }) if write => {
                    fail(format!("store to read-only buffer `{}`", self.k.params[p.index()].name))
                }
                (Some(ParamVal::Buffer { ptr, len }), _) => {
                    Ok((*ptr, *len, if write { ERR_WRITE } else { ERR_READ }, p.index() as u64))
                }
                _ => fail(format!("parameter {p} is not a buffer")),
            },
            Buf::Shared(s) => {
                let Some(&ptr) = self.shared.get(s.index()) else {
                    return fail(format!("shared array {s} does not exist"));
                };
                let len = self.ir.i64(self.k.shared[s.index()].len as u64);
                Ok((ptr, len, if write { ERR_WRITE_SHARED } else { ERR_READ_SHARED }, s.index() as u64))
            }
        }
    }

    /// `buf[idx] = v` when `idx` is in range, else a recorded failure; `index` is the index
    /// expression (no check at all where loop versioning proved it in range).
    fn checked_store(
        &mut self,
        buf: Buf,
        index: &'a Expr,
        idx: IntValue<'ctx>,
        signed: bool,
        v: BasicValueEnum<'ctx>,
    ) -> R<()> {
        let Some(elem) = self.k.buf_elem(buf) else { return fail(format!("{buf:?} is not a buffer")) };
        let (base, len, kind, id) = self.access(buf, true)?;
        let t = mem_ty(self.ir.cx, elem);
        if self.unchecked.contains(&(index as *const Expr)) {
            let p = unsafe { self.ir.b.build_in_bounds_gep(t, base, &[idx], "")? };
            self.ir.b.build_store(p, v)?;
            return Ok(());
        }
        let ok = self.ir.icmp(P::ULT, idx, len)?;
        self.branch(
            ok,
            &mut |g| {
                let p = unsafe { g.ir.b.build_in_bounds_gep(t, base, &[idx], "")? };
                g.ir.b.build_store(p, v)?;
                Ok(())
            },
            &mut |g| g.record(kind, id, idx, signed),
        )
    }

    /// Records a failure in this thread's failure state unless an earlier one was recorded
    /// there (the thread's first failure wins); `flush_failure` publishes it at kernel end.
    pub(super) fn record(&mut self, kind: u64, id: u64, index: IntValue<'ctx>, signed: bool) -> R<()> {
        let yes = self.ir.cx.bool_type().const_int(1, false);
        self.record_if(yes, kind, id, index, signed)
    }

    /// `record` when `bad` holds, without a branch (`checks.rs` expands the call after
    /// optimization into two selects on the thread's state).
    pub(super) fn record_if(
        &mut self,
        bad: IntValue<'ctx>,
        kind: u64,
        id: u64,
        index: IntValue<'ctx>,
        signed: bool,
    ) -> R<()> {
        let code = self.fail_code(kind, id, signed)?;
        self.ir.b.build_call(self.checks.record, &[bad.into(), code.into(), index.into()], "")?;
        Ok(())
    }

    /// The packed failure code `kind | signed << 7 | id << 8`.
    pub(super) fn fail_code(&self, kind: u64, id: u64, signed: bool) -> R<IntValue<'ctx>> {
        if kind == 0 || kind > FAIL_KIND_MASK || id > (u32::MAX as u64 >> FAIL_ID_SHIFT) {
            return fail(format!("failure kind {kind} id {id}: expected a kind in 1..=127 and an id below 2^24"));
        }
        Ok(self.ir.i32((kind | ((signed as u64) << FAIL_SIGNED_BIT) | (id << FAIL_ID_SHIFT)) as u32))
    }

    /// At kernel end: a thread that recorded a failure tries to publish it (compare-and-swap
    /// on `kind` from 0; the first thread to get there wins, the others' failures are dropped).
    pub(super) fn flush_failure(&mut self) -> R<()> {
        let i64t = self.ir.cx.i64_type();
        let call = |g: &Self, f| -> R<IntValue<'ctx>> {
            match g.ir.b.build_call(f, &[], "")?.try_as_basic_value().basic() {
                Some(v) => Ok(v.into_int_value()),
                None => fail("a failure-state read returned no value"),
            }
        };
        let code = call(self, self.checks.fail_code)?;
        let code = self.ir.zext(code, i64t)?;
        let index = call(self, self.checks.fail_index)?;
        let failed = self.ir.icmp(P::NE, code, self.ir.i64(0))?;
        let err = self.err;
        self.branch(
            failed,
            &mut |g| {
                let kind = g.ir.and(code, g.ir.i64(FAIL_KIND_MASK))?;
                let signed = g.ir.and(g.ir.lshr(code, g.ir.i64(FAIL_SIGNED_BIT))?, g.ir.i64(1))?;
                let id = g.ir.lshr(code, g.ir.i64(FAIL_ID_SHIFT))?;
                let r = g.ir.b.build_cmpxchg(
                    err,
                    g.ir.i64(0),
                    kind,
                    AtomicOrdering::Monotonic,
                    AtomicOrdering::Monotonic,
                )?;
                let won = g.ir.b.build_extract_value(r, 1, "")?.into_int_value();
                g.branch(
                    won,
                    &mut |g| {
                        for (field, v) in [(1u64, id), (2, index), (3, signed)] {
                            let p = unsafe { g.ir.b.build_in_bounds_gep(i64t, err, &[g.ir.i64(field)], "")? };
                            g.ir.b.build_store(p, v)?;
                        }
                        Ok(())
                    },
                    &mut |_| Ok(()),
                )
            },
            &mut |_| Ok(()),
        )
    }

    /// `for i in (tid..end).step_by(block_dim)` over integer type `ty`.
    pub(super) fn strided_loop(
        &mut self,
        ty: ScalarType,
        end: IntValue<'ctx>,
        plan: Option<&Plan<'a>>,
        body: &mut Body<'_, 'a, 'ctx>,
    ) -> R<()> {
        if !ty.is_int() {
            return fail(format!("`ParFor` variable of type {ty}: expected an integer"));
        }
        let it = reg_ty(self.ir.cx, ty).into_int_type();
        let step = it.const_int(self.block_dim as u64, false);
        let tid = if it.get_bit_width() == 64 { self.tid } else { self.ir.trunc(self.tid, it)? };
        self.counted(ty, tid, end, step, plan, body)
    }

    /// `for i in (tid / team..end).step_by(block_dim / team)` over integer type `ty`: one
    /// iteration per team of `team` consecutive threads.
    fn team_loop(
        &mut self,
        ty: ScalarType,
        end: IntValue<'ctx>,
        team: u32,
        plan: Option<&Plan<'a>>,
        body: &mut Body<'_, 'a, 'ctx>,
    ) -> R<()> {
        if !ty.is_int() {
            return fail(format!("`ParFor` variable of type {ty}: expected an integer"));
        }
        let it = reg_ty(self.ir.cx, ty).into_int_type();
        let step = it.const_int((self.block_dim / team) as u64, false);
        let first = self.ir.b.build_int_unsigned_div(self.tid, self.ir.i64(team as u64), "")?;
        let first = if it.get_bit_width() == 64 { first } else { self.ir.trunc(first, it)? };
        self.counted(ty, first, end, step, plan, body)
    }

    /// `for i in (start..end).step_by(step)` over integer type `ty`; a non-positive step
    /// records `ERR_FOR_STEP` and skips the loop.
    pub(super) fn for_loop(
        &mut self,
        ty: ScalarType,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        step: IntValue<'ctx>,
        plan: Option<&Plan<'a>>,
        body: &mut Body<'_, 'a, 'ctx>,
    ) -> R<()> {
        if !ty.is_int() {
            return fail(format!("loop variable of type {ty}: expected an integer"));
        }
        let signed = ty.is_signed();
        if step.get_zero_extended_constant().is_some_and(|c| c != 0 && !signed) {
            return self.counted(ty, start, end, step, plan, body);
        }
        let cx = self.ir.cx;
        let it = step.get_type();
        let step_ok = if signed {
            self.ir.icmp(P::SGT, step, it.const_zero())?
        } else {
            self.ir.icmp(P::NE, step, it.const_zero())?
        };
        let step64 = if ty.bits() == 64 {
            step
        } else if signed {
            self.ir.b.build_int_s_extend(step, cx.i64_type(), "")?
        } else {
            self.ir.zext(step, cx.i64_type())?
        };
        let mut body = Some(body);
        self.branch(
            step_ok,
            &mut |g| match body.take() {
                Some(b) => g.counted(ty, start, end, step, plan, b),
                None => fail("loop body lowered twice"),
            },
            &mut |g| g.record(ERR_FOR_STEP, 0, step64, signed),
        )
    }

    /// The loop itself, step known to be positive. The trip count is computed up front
    /// (`(end - start - 1) / step + 1` when `start < end`, so no counter ever overflows) and
    /// the loop has one exit, which lets LLVM unroll it: the body runs for
    /// `i = start, start + step, …` while `i < end`, exactly as `(start..end).step_by(step)`.
    /// With a versioning `plan`, the loop is emitted twice: a copy whose planned accesses are
    /// unchecked, taken when they are in range at the first and last iteration, and the
    /// checked loop otherwise (`version`).
    fn counted(
        &mut self,
        ty: ScalarType,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        step: IntValue<'ctx>,
        plan: Option<&Plan<'a>>,
        body: &mut Body<'_, 'a, 'ctx>,
    ) -> R<()> {
        let it = reg_ty(self.ir.cx, ty).into_int_type();
        let signed = ty.is_signed();
        let go = self.ir.icmp(if signed { P::SLT } else { P::ULT }, start, end)?;
        // end - start as an unsigned distance (exact when start < end), minus one.
        let span = self.ir.sub(self.ir.sub(end, start)?, it.const_int(1, false))?;
        let trips = self.ir.add(self.ir.b.build_int_unsigned_div(span, step, "")?, it.const_int(1, false))?;
        // An innermost loop with affine accesses (the ones `plan` exists for) is unrolled too:
        // its loads issue ahead of the sequential float chains, which stay as written.
        let hint = match plan {
            Some(p) if p.innermost() => LoopHint::Innermost { chains: p.chains() },
            _ => LoopHint::Region,
        };
        let Some(plan) = plan.filter(|_| self.loop_versioning) else {
            return self.trips(it, start, step, go, trips, hint, body);
        };
        // The last iteration's value (meaningful when `go`; its checks are pure either way).
        let last =
            self.ir.add(start, self.ir.b.build_int_mul(self.ir.sub(trips, it.const_int(1, false))?, step, "")?)?;
        let (safe, hoisted) = self.in_range_throughout(plan, start, last)?;
        let fast = self.ir.and(go, safe)?;
        // `branch` by hand: both copies call the one `body`.
        let cx = self.ir.cx;
        let (unchecked, checked, done) = (
            cx.append_basic_block(self.f, "versioned"),
            cx.append_basic_block(self.f, "checked"),
            cx.append_basic_block(self.f, "endversion"),
        );
        self.ir.b.build_conditional_branch(fast, unchecked, checked)?;
        self.ir.b.position_at_end(unchecked);
        let added: Vec<_> = plan.unchecked().filter(|p| self.unchecked.insert(*p)).collect();
        let outer = std::mem::replace(&mut self.hoisted, hoisted);
        let r = self.trips(it, start, step, go, trips, hint, body);
        self.hoisted = outer;
        for p in added {
            self.unchecked.remove(&p);
        }
        r?;
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(checked);
        // The checked copy runs only where an access fails: kept rolled, so that its checks
        // do not multiply the registers the kernel is allocated for the fast copy.
        self.trips(it, start, step, go, trips, LoopHint::Cold, body)?;
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(done);
        Ok(())
    }

    /// `trips` iterations of `body` from `start` by `step`, entered when `go`; `hint` says
    /// which unroll hint its latch gets (`hints.rs`).
    #[allow(clippy::too_many_arguments)]
    fn trips(
        &mut self,
        it: inkwell::types::IntType<'ctx>,
        start: IntValue<'ctx>,
        step: IntValue<'ctx>,
        go: IntValue<'ctx>,
        trips: IntValue<'ctx>,
        hint: LoopHint,
        body: &mut Body<'_, 'a, 'ctx>,
    ) -> R<()> {
        let cx = self.ir.cx;
        let (ctr, j) = (self.alloca_zeroed(it.into(), "i")?, self.alloca_zeroed(it.into(), "trip")?);
        self.ir.b.build_store(ctr, start)?;
        self.ir.b.build_store(j, it.const_zero())?;
        let (bb, exit) = (cx.append_basic_block(self.f, "body"), cx.append_basic_block(self.f, "exit"));
        self.ir.b.build_conditional_branch(go, bb, exit)?;
        self.ir.b.position_at_end(bb);
        let i = self.ir.b.build_load(it, ctr, "")?.into_int_value();
        let n = self.ir.b.build_load(it, j, "")?.into_int_value();
        body(self, i)?;
        let next_n = self.ir.add(n, it.const_int(1, false))?;
        self.ir.b.build_store(j, next_n)?;
        // Wraps only after the last iteration, where it is never used.
        self.ir.b.build_store(ctr, self.ir.add(i, step)?)?;
        let more = self.ir.icmp(P::ULT, next_n, trips)?;
        let latch = self.ir.b.build_conditional_branch(more, bb, exit)?;
        self.loop_hint(latch, hint, trips.is_const())?;
        self.ir.b.position_at_end(exit);
        Ok(())
    }
}

impl<'a, 'ctx> ExprLeaves<'a, 'ctx> for Gpu<'a, 'ctx> {
    fn ir(&self) -> &Ir<'a, 'ctx> {
        &self.ir
    }

    fn kernel(&self) -> &'a Kernel {
        self.k
    }

    fn lets(&mut self) -> &mut HashMap<Var, BasicValueEnum<'ctx>> {
        &mut self.lets
    }

    fn var_value(&mut self, v: Var) -> R<BasicValueEnum<'ctx>> {
        self.load_var(v)
    }

    fn params(&self) -> &[ParamVal<'ctx>] {
        &self.params
    }

    fn dot4(
        &mut self,
        kind: crate::ir::Dot4Kind,
        a: IntValue<'ctx>,
        b: IntValue<'ctx>,
        c: IntValue<'ctx>,
    ) -> R<IntValue<'ctx>> {
        super::intrinsics::dot4(&self.ir, self.dot4, kind, a, b, c)
    }

    fn group_id(&mut self, axis: u8) -> R<IntValue<'ctx>> {
        match self.group.get(axis as usize) {
            Some(&g) => Ok(g),
            None => fail(format!("group id axis {axis}: expected 0, 1 or 2")),
        }
    }

    /// A failed check yields 0 and records the failure, without a branch: the load reads the
    /// zeroed constant module global `baro_zero` instead of the buffer (buffers), or element 0
    /// with its value replaced by 0 (shared arrays).
    /// Where loop versioning proved `index` in range, a plain load.
    fn load_elem(&mut self, buf: Buf, index: &'a Expr, idx: IntValue<'ctx>, signed: bool) -> R<BasicValueEnum<'ctx>> {
        let Some(elem) = self.k.buf_elem(buf) else { return fail(format!("{buf:?} is not a buffer")) };
        let key = index as *const Expr;
        if let Some(&v) = self.hoisted.get(&key) {
            return Ok(v);
        }
        let (base, len, kind, id) = self.access(buf, false)?;
        let t = mem_ty(self.ir.cx, elem);
        if self.unchecked.contains(&key) {
            let p = unsafe { self.ir.b.build_in_bounds_gep(t, base, &[idx], "")? };
            return Ok(self.ir.b.build_load(t, p, "")?);
        }
        let ok = match self.silent.is_some() {
            // Versioning's preheader: the check without a record (`version`).
            true => self.ir.icmp(P::ULT, idx, len)?,
            false => {
                let code = self.fail_code(kind, id, signed)?;
                super::checks::call_in_range(&self.ir.b, &self.checks, idx, len, code)?
            }
        };
        if let Some(s) = self.silent.as_mut() {
            s.push(ok);
        }
        let zero = t.const_zero();
        let p = match buf {
            Buf::Param(_) => {
                let p = unsafe { self.ir.b.build_in_bounds_gep(t, base, &[idx], "")? };
                self.ir.b.build_select(ok, p, self.zero_global, "")?.into_pointer_value()
            }
            Buf::Shared(s) => {
                if self.k.shared[s.index()].len == 0 {
                    return Ok(zero);
                }
                let safe = self.ir.sel(ok, idx, self.ir.i64(0))?;
                unsafe { self.ir.b.build_in_bounds_gep(t, base, &[safe], "")? }
            }
        };
        let v = self.ir.b.build_load(t, p, "")?;
        let v = match buf {
            // `baro_zero` is a zeroed constant: a redirected load already reads +0 / 0.
            Buf::Param(_) => v,
            Buf::Shared(_) => self.ir.b.build_select(ok, v, zero, "")?,
        };
        if self.silent.is_some() {
            self.hoisted.insert(key, v);
        }
        Ok(v)
    }

    fn shuffle_xor(&mut self, _node: &'a Expr, value: &'a Expr, mask: u32) -> R<Val<'ctx>> {
        let v = self.expr(value)?;
        self.exchange(v, mask)
    }
}

/// True for a `&[T]` parameter: no thread of the kernel writes it.
fn read_only(k: &Kernel, buf: Buf) -> bool {
    match buf {
        Buf::Param(p) => {
            matches!(k.params.get(p.index()).map(|p| &p.kind), Some(ParamKind::Buffer { access: Access::Read, .. }))
        }
        Buf::Shared(_) => false,
    }
}
