//! The host's leaves of the shared expression walk (`lower::expr`): variables in lane-indexed
//! slots, parameters from the entry's arrays, group ids from the workgroup loop, bounds-checked
//! loads that return from the entry on failure, and shuffles read from per-lane temporaries.

use std::collections::HashMap;

use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate as P;

use super::{reg_ty, Cg};
use crate::ir::{Buf, Expr, Kernel, Var};
use crate::lower::expr::ParamVal;
use crate::lower::expr::{mem_ty, ExprLeaves, Val};
use crate::lower::ir::Ir;
use crate::lower::{fail, R};

impl<'a, 'ctx> ExprLeaves<'a, 'ctx> for Cg<'a, 'ctx> {
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

    fn group_id(&mut self, axis: u8) -> R<IntValue<'ctx>> {
        let Some(&p) = self.group.get(axis as usize) else {
            return fail(format!("group id axis {axis}: expected 0, 1 or 2"));
        };
        Ok(self.ir.b.build_load(self.ir.cx.i64_type(), p, "gid")?.into_int_value())
    }

    fn load_elem(&mut self, buf: Buf, _index: &'a Expr, idx: IntValue<'ctx>, signed: bool) -> R<BasicValueEnum<'ctx>> {
        let Some(ty) = self.k.buf_elem(buf) else { return fail(format!("{buf:?} is not a buffer")) };
        let p = self.element_ptr(buf, idx, signed, false)?;
        Ok(self.ir.b.build_load(mem_ty(self.ir.cx, ty), p, "")?)
    }

    fn shuffle_xor(&mut self, node: &'a Expr, _value: &'a Expr, mask: u32) -> R<Val<'ctx>> {
        let (Some(&tmp), Some(lane), Some(count)) =
            (self.shuffles.get(&(node as *const Expr)), self.cur_lane, self.region)
        else {
            return fail("a shuffle outside a `Let`, `Assign` or `Store` of a `Lanes` region");
        };
        let ty = self.expr_ty(node)?;
        let t = reg_ty(self.ir.cx, ty);
        let partner = self.ir.xor(lane, self.ir.i64(mask as u64))?;
        let inside = self.ir.icmp(P::ULT, partner, self.ir.i64(count as u64))?;
        let partner = self.ir.sel(inside, partner, lane)?;
        let p = self.lane_ptr(tmp, t, count, partner)?;
        Ok(Val { v: self.ir.b.build_load(t, p, "")?, ty })
    }
}
