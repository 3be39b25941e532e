//! Statements of the GPU lowering: private variable slots, loops, branches, bounds-checked
//! loads and stores that record the first failure and skip the access, and the expression
//! leaves the shared walk (`lower::expr`) needs.
//!
//! Loops never run forever and never overflow their counter: a bad step records
//! `ERR_FOR_STEP` and skips the loop, and an iteration whose next counter would overflow is
//! the last one. Nothing here returns early from the kernel (a barrier may follow).

use std::collections::HashMap;

use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{AtomicOrdering, IntPredicate as P};

use super::{intrinsics, Gpu, ParamVal};
use crate::ir::{Access, Buf, Expr, Kernel, ParamId, ParamKind, ScalarType, Stmt, Var};
use crate::lower::expr::{mem_ty, reg_ty, ExprLeaves, Val};
use crate::lower::host::{ERR_FOR_STEP, ERR_READ, ERR_READ_SHARED, ERR_WRITE, ERR_WRITE_SHARED};
use crate::lower::ir::Ir;
use crate::lower::{fail, R};

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
            Stmt::Store { buf, index, value } => {
                let (idx, signed) = self.index(index)?;
                let v = self.expr(value)?;
                let v = match v.ty {
                    ScalarType::Bool => self.ir.zext(v.v.into_int_value(), self.ir.cx.i8_type())?.into(),
                    _ => v.v,
                };
                self.checked_store(*buf, idx, signed, v)
            }
            Stmt::For { var, start, end, step, body } => {
                let ty = self.var_ty(*var)?;
                let (s, e, st) = (self.expr(start)?, self.expr(end)?, self.expr(step)?);
                self.for_loop(ty, s.v.into_int_value(), e.v.into_int_value(), st.v.into_int_value(), &mut |g, i| {
                    g.store_var(*var, i.into())?;
                    g.block(body)
                })
            }
            Stmt::ParFor { var, end, body } => {
                if self.region.is_some() {
                    return fail("a `ParFor` inside a `Lanes` region");
                }
                let ty = self.var_ty(*var)?;
                let e = self.expr(end)?.v.into_int_value();
                self.strided_loop(ty, e, &mut |g, i| {
                    g.store_var(*var, i.into())?;
                    g.block(body)
                })?;
                self.barrier()
            }
            Stmt::If { cond, then_body, else_body } => {
                let c = self.expr(cond)?.v.into_int_value();
                self.if_else(c, then_body, else_body)
            }
            Stmt::Lanes { lane, count, body, .. } => {
                if self.region.is_some() {
                    return fail("a `Lanes` region inside another `Lanes` region");
                }
                self.lanes_region(*lane, *count, body)
            }
            Stmt::Barrier => {
                if self.region.is_some() {
                    return fail("a barrier inside a `Lanes` region");
                }
                self.barrier()
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
    pub(super) fn branch(&mut self, c: IntValue<'ctx>, then: &mut dyn FnMut(&mut Self) -> R<()>, els: &mut dyn FnMut(&mut Self) -> R<()>) -> R<()> {
        let cx = self.ir.cx;
        let (t, e, done) = (cx.append_basic_block(self.f, "then"), cx.append_basic_block(self.f, "else"), cx.append_basic_block(self.f, "endif"));
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
    fn access(&self, buf: Buf, write: bool) -> R<(PointerValue<'ctx>, IntValue<'ctx>, u64, u64)> {
        match buf {
            Buf::Param(p) => match (self.params.get(p.index()), &self.k.params[p.index()].kind) {
                (Some(ParamVal::Buffer { .. }), ParamKind::Buffer { access: Access::Read, .. }) if write => {
                    fail(format!("store to read-only buffer `{}`", self.k.params[p.index()].name))
                }
                (Some(ParamVal::Buffer { ptr, len }), _) => Ok((*ptr, *len, if write { ERR_WRITE } else { ERR_READ }, p.index() as u64)),
                _ => fail(format!("parameter {p} is not a buffer")),
            },
            Buf::Shared(s) => {
                let Some(&ptr) = self.shared.get(s.index()) else { return fail(format!("shared array {s} does not exist")) };
                let len = self.ir.i64(self.k.shared[s.index()].len as u64);
                Ok((ptr, len, if write { ERR_WRITE_SHARED } else { ERR_READ_SHARED }, s.index() as u64))
            }
        }
    }

    fn checked_store(&mut self, buf: Buf, idx: IntValue<'ctx>, signed: bool, v: BasicValueEnum<'ctx>) -> R<()> {
        let Some(elem) = self.k.buf_elem(buf) else { return fail(format!("{buf:?} is not a buffer")) };
        let (base, len, kind, id) = self.access(buf, true)?;
        let ok = self.ir.icmp(P::ULT, idx, len)?;
        let t = mem_ty(self.ir.cx, elem);
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

    /// Records a failure unless an earlier one was recorded (the first failure wins).
    pub(super) fn record(&mut self, kind: u64, id: u64, index: IntValue<'ctx>, signed: bool) -> R<()> {
        let r = self.ir.b.build_cmpxchg(self.err, self.ir.i64(0), self.ir.i64(kind), AtomicOrdering::Monotonic, AtomicOrdering::Monotonic)?;
        let won = self.ir.b.build_extract_value(r, 1, "")?.into_int_value();
        let i64t = self.ir.cx.i64_type();
        let err = self.err;
        self.branch(
            won,
            &mut |g| {
                for (field, v) in [(1u64, g.ir.i64(id)), (2, index), (3, g.ir.i64(signed as u64))] {
                    let p = unsafe { g.ir.b.build_in_bounds_gep(i64t, err, &[g.ir.i64(field)], "")? };
                    g.ir.b.build_store(p, v)?;
                }
                Ok(())
            },
            &mut |_| Ok(()),
        )
    }

    /// `for i in (tid..end).step_by(block_dim)` over integer type `ty`.
    pub(super) fn strided_loop(&mut self, ty: ScalarType, end: IntValue<'ctx>, body: &mut Body<'_, 'a, 'ctx>) -> R<()> {
        if !ty.is_int() {
            return fail(format!("`ParFor` variable of type {ty}: expected an integer"));
        }
        let it = reg_ty(self.ir.cx, ty).into_int_type();
        let step = it.const_int(self.block_dim as u64, false);
        let tid = if it.get_bit_width() == 64 { self.tid } else { self.ir.trunc(self.tid, it)? };
        self.counted(ty, tid, end, step, body)
    }

    /// `for i in (start..end).step_by(step)` over integer type `ty`; a non-positive step
    /// records `ERR_FOR_STEP` and skips the loop.
    pub(super) fn for_loop(&mut self, ty: ScalarType, start: IntValue<'ctx>, end: IntValue<'ctx>, step: IntValue<'ctx>, body: &mut Body<'_, 'a, 'ctx>) -> R<()> {
        if !ty.is_int() {
            return fail(format!("loop variable of type {ty}: expected an integer"));
        }
        let signed = ty.is_signed();
        if step.get_zero_extended_constant().is_some_and(|c| c != 0 && !signed) {
            return self.counted(ty, start, end, step, body);
        }
        let cx = self.ir.cx;
        let it = step.get_type();
        let step_ok = if signed { self.ir.icmp(P::SGT, step, it.const_zero())? } else { self.ir.icmp(P::NE, step, it.const_zero())? };
        let step64 = if ty.bits() == 64 { step } else if signed { self.ir.b.build_int_s_extend(step, cx.i64_type(), "")? } else { self.ir.zext(step, cx.i64_type())? };
        let mut body = Some(body);
        self.branch(
            step_ok,
            &mut |g| match body.take() {
                Some(b) => g.counted(ty, start, end, step, b),
                None => fail("loop body lowered twice"),
            },
            &mut |g| g.record(ERR_FOR_STEP, 0, step64, signed),
        )
    }

    /// The loop itself, step known to be positive.
    fn counted(&mut self, ty: ScalarType, start: IntValue<'ctx>, end: IntValue<'ctx>, step: IntValue<'ctx>, body: &mut Body<'_, 'a, 'ctx>) -> R<()> {
        let cx = self.ir.cx;
        let it = reg_ty(cx, ty).into_int_type();
        let signed = ty.is_signed();
        let ctr = self.alloca_zeroed(it.into(), "i")?;
        self.ir.b.build_store(ctr, start)?;
        let (head, bb, exit) = (cx.append_basic_block(self.f, "head"), cx.append_basic_block(self.f, "body"), cx.append_basic_block(self.f, "exit"));
        self.ir.b.build_unconditional_branch(head)?;
        self.ir.b.position_at_end(head);
        let i = self.ir.b.build_load(it, ctr, "")?.into_int_value();
        let go = self.ir.icmp(if signed { P::SLT } else { P::ULT }, i, end)?;
        self.ir.b.build_conditional_branch(go, bb, exit)?;
        self.ir.b.position_at_end(bb);
        body(self, i)?;
        let name = if signed { "llvm.sadd.with.overflow" } else { "llvm.uadd.with.overflow" };
        let r = self.ir.intrinsic(name, &[it.into()], &[i.into(), step.into()])?.into_struct_value();
        let next = self.ir.b.build_extract_value(r, 0, "")?;
        let ovf = self.ir.b.build_extract_value(r, 1, "")?.into_int_value();
        self.ir.b.build_store(ctr, next)?;
        self.ir.b.build_conditional_branch(ovf, exit, head)?;
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

    fn scalar_param(&self, p: ParamId) -> R<BasicValueEnum<'ctx>> {
        match self.params.get(p.index()) {
            Some(ParamVal::Scalar(v)) => Ok(*v),
            _ => fail(format!("parameter {p} used as a scalar value")),
        }
    }

    fn group_id(&mut self, axis: u8) -> R<IntValue<'ctx>> {
        match self.group.get(axis as usize) {
            Some(&g) => Ok(g),
            None => fail(format!("group id axis {axis}: expected 0, 1 or 2")),
        }
    }

    /// A failed check yields 0 and records the failure.
    fn load_elem(&mut self, buf: Buf, idx: IntValue<'ctx>, signed: bool) -> R<BasicValueEnum<'ctx>> {
        let Some(elem) = self.k.buf_elem(buf) else { return fail(format!("{buf:?} is not a buffer")) };
        let (base, len, kind, id) = self.access(buf, false)?;
        let t = mem_ty(self.ir.cx, elem);
        let ok = self.ir.icmp(P::ULT, idx, len)?;
        let cx = self.ir.cx;
        let (good, bad, done) = (cx.append_basic_block(self.f, "load"), cx.append_basic_block(self.f, "load_oob"), cx.append_basic_block(self.f, "loaded"));
        self.ir.b.build_conditional_branch(ok, good, bad)?;
        self.ir.b.position_at_end(good);
        let p = unsafe { self.ir.b.build_in_bounds_gep(t, base, &[idx], "")? };
        let v = self.ir.b.build_load(t, p, "")?;
        let good_end = self.ir.b.get_insert_block().unwrap_or(good);
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(bad);
        self.record(kind, id, idx, signed)?;
        let bad_end = self.ir.b.get_insert_block().unwrap_or(bad);
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(done);
        let phi = self.ir.b.build_phi(t, "")?;
        let zero = t.const_zero();
        phi.add_incoming(&[(&v, good_end), (&zero, bad_end)]);
        Ok(phi.as_basic_value())
    }

    fn shuffle_xor(&mut self, _node: &'a Expr, value: &'a Expr, mask: u32) -> R<Val<'ctx>> {
        let v = self.expr(value)?;
        self.exchange(v, mask)
    }
}
