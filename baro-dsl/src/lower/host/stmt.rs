//! Statements, loops, variable slots and bounds checks of the host lowering.
//!
//! Loops never run forever and never overflow their counter: a step of 0 is a launch error
//! and an iteration whose next counter would overflow is the last one.

use inkwell::types::BasicType;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate as P;

use super::{mem_ty, reg_ty, Cg, ERR_FOR_STEP, ERR_WRITE, ERR_WRITE_SHARED};
use crate::ir::{Buf, ScalarType, Stmt, Var};
use crate::lower::expr::ExprLeaves;
use crate::lower::{fail, R};

pub(super) type Body<'b, 'a, 'ctx> = dyn FnMut(&mut Cg<'a, 'ctx>, IntValue<'ctx>) -> R<()> + 'b;

impl<'a, 'ctx> Cg<'a, 'ctx> {
    pub(super) fn block(&mut self, stmts: &'a [Stmt]) -> R<()> {
        for s in stmts {
            if self.region.is_some() && self.cur_lane.is_none() {
                self.region_stmt(s)?;
            } else {
                self.stmt(s)?;
            }
        }
        Ok(())
    }

    pub(super) fn stmt(&mut self, s: &'a Stmt) -> R<()> {
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
                let p = self.element_ptr(*buf, idx, signed, true)?;
                let v = match v.ty {
                    ScalarType::Bool => self.ir.zext(v.v.into_int_value(), self.ir.cx.i8_type())?.into(),
                    _ => v.v,
                };
                self.ir.b.build_store(p, v)?;
                Ok(())
            }
            Stmt::For { var, start, end, step, body } => {
                let ty = self.var_ty(*var)?;
                let (s, e, st) = (self.expr(start)?, self.expr(end)?, self.expr(step)?);
                self.for_loop(ty, s.v.into_int_value(), e.v.into_int_value(), st.v.into_int_value(), &mut |cg, i| {
                    cg.store_var(*var, i.into())?;
                    cg.block(body)
                })
            }
            Stmt::ParFor { var, end, body, .. } => {
                let ty = self.var_ty(*var)?;
                let e = self.expr(end)?.v.into_int_value();
                let it = reg_ty(self.ir.cx, ty).into_int_type();
                self.for_loop(ty, it.const_zero(), e, it.const_int(1, false), &mut |cg, i| {
                    let i = cg.permute(i, e)?;
                    cg.store_var(*var, i.into())?;
                    cg.block(body)
                })
            }
            Stmt::If { cond, then_body, else_body } => {
                let c = self.expr(cond)?.v.into_int_value();
                self.if_else(c, then_body, else_body)
            }
            Stmt::Lanes { lane, count, body, .. } => {
                if self.region.is_some() {
                    return fail("a `Lanes` region inside another `Lanes` region");
                }
                self.region(*lane, *count, body)
            }
            Stmt::Barrier => Ok(()),
            Stmt::MmaI8(_) => fail("a matrix step the host did not write out as loops (`host::mma::expand`)"),
            Stmt::Check { id, cond } => {
                let ok = self.expr(cond)?.v.into_int_value();
                let zero = self.ir.i64(0);
                self.check(ok, super::ERR_CHECK, u64::from(*id), zero, false)
            }
        }
    }

    pub(super) fn if_else(&mut self, c: IntValue<'ctx>, then_body: &'a [Stmt], else_body: &'a [Stmt]) -> R<()> {
        let cx = self.ir.cx;
        let (t, e, done) = (
            cx.append_basic_block(self.f, "then"),
            cx.append_basic_block(self.f, "else"),
            cx.append_basic_block(self.f, "endif"),
        );
        self.ir.b.build_conditional_branch(c, t, e)?;
        self.ir.b.position_at_end(t);
        self.block(then_body)?;
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(e);
        self.block(else_body)?;
        self.ir.b.build_unconditional_branch(done)?;
        self.ir.b.position_at_end(done);
        Ok(())
    }

    /// Stores to a variable: to the current lane's element of a per-lane variable, to every
    /// lane's element when outside a lane loop, or to the plain slot.
    pub(super) fn store_var(&mut self, v: Var, val: BasicValueEnum<'ctx>) -> R<()> {
        let Some(&slot) = self.slots.get(&v) else { return fail(format!("variable {v} has no slot")) };
        let t = reg_ty(self.ir.cx, self.var_ty(v)?);
        match (slot.lanes, self.cur_lane) {
            (None, _) => {
                self.ir.b.build_store(slot.ptr, val)?;
            }
            (Some(_), Some(l)) => {
                let p = self.lane_ptr(slot.ptr, t, slot.lanes.unwrap_or(1), l)?;
                self.ir.b.build_store(p, val)?;
            }
            (Some(n), None) => {
                self.count_loop(self.ir.i64(n as u64), &mut |cg, l| {
                    let p = cg.lane_ptr(slot.ptr, t, n, l)?;
                    cg.ir.b.build_store(p, val)?;
                    Ok(())
                })?;
            }
        }
        Ok(())
    }

    pub(super) fn load_var(&mut self, v: Var) -> R<BasicValueEnum<'ctx>> {
        if let Some(&val) = self.lets.get(&v) {
            return Ok(val);
        }
        let Some(&slot) = self.slots.get(&v) else { return fail(format!("variable {v} is read but never defined")) };
        let t = reg_ty(self.ir.cx, self.var_ty(v)?);
        let p = match (slot.lanes, self.cur_lane) {
            (None, _) => slot.ptr,
            (Some(n), Some(l)) => self.lane_ptr(slot.ptr, t, n, l)?,
            (Some(_), None) => return fail(format!("per-lane variable {v} read in uniform code")),
        };
        Ok(self.ir.b.build_load(t, p, "")?)
    }

    pub(super) fn lane_ptr(
        &self,
        arr: PointerValue<'ctx>,
        t: inkwell::types::BasicTypeEnum<'ctx>,
        n: u32,
        lane: IntValue<'ctx>,
    ) -> R<PointerValue<'ctx>> {
        Ok(unsafe { self.ir.b.build_in_bounds_gep(t.array_type(n), arr, &[self.ir.i64(0), lane], "")? })
    }

    /// The address of `buf[idx]` after checking `idx < len` (else: error record and return).
    pub(super) fn element_ptr(
        &mut self,
        buf: Buf,
        idx: IntValue<'ctx>,
        signed: bool,
        write: bool,
    ) -> R<PointerValue<'ctx>> {
        let Some(elem) = self.k.buf_elem(buf) else { return fail(format!("{buf:?} is not a buffer")) };
        let (base, len, kind, id) = match buf {
            Buf::Param(p) => match self.params.get(p.index()) {
                Some(crate::lower::expr::ParamVal::Buffer { .. })
                    if write
                        && matches!(
                            self.k.params[p.index()].kind,
                            crate::ir::ParamKind::Buffer { access: crate::ir::Access::Read, .. }
                        ) =>
                {
                    return fail(format!("store to read-only buffer `{}`", self.k.params[p.index()].name))
                }
                Some(crate::lower::expr::ParamVal::Buffer { ptr, len }) => {
                    (*ptr, *len, if write { ERR_WRITE } else { super::ERR_READ }, p.index())
                }
                _ => return fail(format!("parameter {p} is not a buffer")),
            },
            Buf::Shared(s) => {
                let Some(&ptr) = self.shared.get(s.index()) else {
                    return fail(format!("shared array {s} does not exist"));
                };
                let len = self.ir.i64(self.k.shared[s.index()].len as u64);
                (ptr, len, if write { ERR_WRITE_SHARED } else { super::ERR_READ_SHARED }, s.index())
            }
        };
        let ok = self.ir.icmp(P::ULT, idx, len)?;
        self.check(ok, kind, id as u64, idx, signed)?;
        Ok(unsafe { self.ir.b.build_in_bounds_gep(mem_ty(self.ir.cx, elem), base, &[idx], "")? })
    }

    /// Continues if `ok`; otherwise fills the error record and returns from the kernel.
    pub(super) fn check(
        &mut self,
        ok: IntValue<'ctx>,
        kind: u64,
        id: u64,
        index: IntValue<'ctx>,
        signed: bool,
    ) -> R<()> {
        let cx = self.ir.cx;
        let (bad, cont) = (cx.append_basic_block(self.f, "oob"), cx.append_basic_block(self.f, "ok"));
        self.ir.b.build_conditional_branch(ok, cont, bad)?;
        self.ir.b.position_at_end(bad);
        let i64t = cx.i64_type();
        for (field, v) in [(0u64, self.ir.i64(kind)), (1, self.ir.i64(id)), (2, index), (3, self.ir.i64(signed as u64))]
        {
            let p = unsafe { self.ir.b.build_in_bounds_gep(i64t, self.err, &[self.ir.i64(field)], "")? };
            self.ir.b.build_store(p, v)?;
        }
        self.ir.b.build_return(None)?;
        self.ir.b.position_at_end(cont);
        Ok(())
    }

    /// `for i in 0..n` over an i64 count.
    /// Iteration `i` of `0..n` (inside the loop: 0 ≤ i < n) in the shuffled order, if any:
    /// (a·i + b) mod n, computed in 64 bits (a mod n and b mod n first, so nothing
    /// overflows below n = 2^31; longer loops keep their order).
    pub(super) fn permute(&mut self, i: IntValue<'ctx>, n: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        let Some((a, b)) = self.order else { return Ok(i) };
        let i64t = self.ir.cx.i64_type();
        let it = i.get_type();
        let wide = |cg: &Self, x: IntValue<'ctx>| if it.get_bit_width() == 64 { Ok(x) } else { cg.ir.zext(x, i64t) };
        let (i64v, n64) = (wide(self, i)?, wide(self, n)?);
        let small = self.ir.icmp(P::ULT, n64, self.ir.i64(1 << 31))?;
        // n = 0 never reaches the body; the select keeps the division defined anyway.
        let safe_n = self.ir.sel(small, n64, self.ir.i64(1))?;
        let b_ = &self.ir.b;
        let am = b_.build_int_unsigned_rem(self.ir.i64(a), safe_n, "")?;
        let bm = b_.build_int_unsigned_rem(self.ir.i64(b), safe_n, "")?;
        let x = b_.build_int_add(b_.build_int_mul(am, i64v, "")?, bm, "")?;
        let x = b_.build_int_unsigned_rem(x, safe_n, "")?;
        let r = self.ir.sel(small, x, i64v)?;
        Ok(if it.get_bit_width() == 64 { r } else { self.ir.b.build_int_truncate(r, it, "")? })
    }

    pub(super) fn count_loop(&mut self, n: IntValue<'ctx>, body: &mut Body<'_, 'a, 'ctx>) -> R<()> {
        let i64t = self.ir.cx.i64_type();
        self.for_loop(ScalarType::U64, i64t.const_zero(), n, i64t.const_int(1, false), body)
    }

    /// `for i in (start..end).step_by(step)` over integer type `ty`.
    pub(super) fn for_loop(
        &mut self,
        ty: ScalarType,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        step: IntValue<'ctx>,
        body: &mut Body<'_, 'a, 'ctx>,
    ) -> R<()> {
        if !ty.is_int() {
            return fail(format!("loop variable of type {ty}: expected an integer"));
        }
        let cx = self.ir.cx;
        let it = reg_ty(cx, ty).into_int_type();
        let signed = ty.is_signed();
        let step_ok = if signed {
            self.ir.icmp(P::SGT, step, it.const_zero())?
        } else {
            self.ir.icmp(P::NE, step, it.const_zero())?
        };
        if step.get_zero_extended_constant().is_none_or(|c| c == 0 || signed) {
            let step64 = if ty.bits() == 64 {
                step
            } else if signed {
                self.ir.b.build_int_s_extend(step, cx.i64_type(), "")?
            } else {
                self.ir.zext(step, cx.i64_type())?
            };
            self.check(step_ok, ERR_FOR_STEP, 0, step64, signed)?;
        }
        let ctr = self.alloca_zeroed(it.into(), "i")?;
        self.ir.b.build_store(ctr, start)?;
        let (head, bb, exit) = (
            cx.append_basic_block(self.f, "head"),
            cx.append_basic_block(self.f, "body"),
            cx.append_basic_block(self.f, "exit"),
        );
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
