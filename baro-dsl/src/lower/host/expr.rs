//! Expressions of the host lowering: every value is computed with the plain IEEE or wrapping
//! integer instruction its IR operation names. f16/bf16 arithmetic converts to f32, operates
//! and rounds back. Never emits fast-math flags, fma or `llvm.fmuladd`.

use inkwell::values::{BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate as F, IntPredicate as P};

use super::{reg_ty, Cg, ParamVal};
use crate::ir::{BinOp, Const, Expr, ScalarType, UnOp};
use crate::lower::convert;
use crate::lower::{fail, R};

/// A lowered value and its IR type.
#[derive(Clone, Copy)]
pub(super) struct Val<'ctx> {
    pub v: BasicValueEnum<'ctx>,
    pub ty: ScalarType,
}

impl<'a, 'ctx> Cg<'a, 'ctx> {
    pub(super) fn expr_ty(&self, e: &Expr) -> R<ScalarType> {
        self.k.type_of(e).map_err(|e| crate::lower::Fail(e.0))
    }

    fn konst(&self, c: Const) -> BasicValueEnum<'ctx> {
        let cx = self.ir.cx;
        match c.ty {
            ScalarType::F32 => cx.f32_type().const_float(f32::from_bits(c.bits as u32) as f64).into(),
            t => reg_ty(cx, t).into_int_type().const_int(c.bits, false).into(),
        }
    }

    pub(super) fn expr(&mut self, e: &'a Expr) -> R<Val<'ctx>> {
        let cx = self.ir.cx;
        match e {
            Expr::Const(c) => {
                // NaN constants keep their payload: build them from bits.
                if c.ty == ScalarType::F32 && f32::from_bits(c.bits as u32).is_nan() {
                    let b = self.ir.i32(c.bits as u32);
                    return Ok(Val { v: self.ir.bits_f32(b)?.into(), ty: c.ty });
                }
                Ok(Val { v: self.konst(*c), ty: c.ty })
            }
            Expr::Var(v) => Ok(Val { v: self.load_var(*v)?, ty: self.var_ty(*v)? }),
            Expr::Param(p) => match (self.params.get(p.index()), self.k.params.get(p.index())) {
                (Some(ParamVal::Scalar(v)), Some(decl)) => {
                    let crate::ir::ParamKind::Scalar(ty) = decl.kind else { return fail(format!("parameter {p} is not a scalar")) };
                    Ok(Val { v: *v, ty })
                }
                _ => fail(format!("parameter {p} used as a scalar value")),
            },
            Expr::GroupId(a) => {
                let Some(&p) = self.group.get(*a as usize) else { return fail(format!("group id axis {a}: expected 0, 1 or 2")) };
                Ok(Val { v: self.ir.b.build_load(cx.i64_type(), p, "gid")?, ty: ScalarType::INDEX })
            }
            Expr::Load { buf, index } => {
                let (idx, signed) = self.index(index)?;
                let Some(ty) = self.k.buf_elem(*buf) else { return fail(format!("{buf:?} is not a buffer")) };
                let p = self.element_ptr(*buf, idx, signed, false)?;
                let v = self.ir.b.build_load(super::mem_ty(cx, ty), p, "")?;
                let v = match ty {
                    ScalarType::Bool => self.ir.icmp(P::NE, v.into_int_value(), cx.i8_type().const_zero())?.into(),
                    _ => v,
                };
                Ok(Val { v, ty })
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg)?;
                self.unary(*op, a)
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                if a.ty != b.ty {
                    return fail(format!("`{}` of {} and {}: expected one type", op.name(), a.ty, b.ty));
                }
                self.binary(*op, a, b)
            }
            Expr::Select { cond, then, els } => {
                let c = self.expr(cond)?;
                let t = self.expr(then)?;
                let f = self.expr(els)?;
                Ok(Val { v: self.ir.b.build_select(c.v.into_int_value(), t.v, f.v, "")?, ty: t.ty })
            }
            Expr::Cast { to, arg } => {
                let a = self.expr(arg)?;
                self.cast(a, *to)
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg)?;
                let v = match (a.ty, *to) {
                    (ScalarType::F32, t) if t != ScalarType::F32 => self.ir.f32_bits(a.v.into_float_value())?.into(),
                    (t, ScalarType::F32) if t != ScalarType::F32 => self.ir.bits_f32(a.v.into_int_value())?.into(),
                    _ => a.v,
                };
                Ok(Val { v, ty: *to })
            }
            Expr::Let { var, value, body } => {
                let v = self.expr(value)?;
                let old = self.lets.insert(*var, v.v);
                let r = self.expr(body);
                match old {
                    Some(o) => self.lets.insert(*var, o),
                    None => self.lets.remove(var),
                };
                r
            }
            Expr::ShuffleXor { mask, .. } => {
                let (Some(&tmp), Some(lane), Some(count)) = (self.shuffles.get(&(e as *const Expr)), self.cur_lane, self.region) else {
                    return fail("a shuffle outside a `Let`, `Assign` or `Store` of a `Lanes` region");
                };
                let ty = self.expr_ty(e)?;
                let t = reg_ty(cx, ty);
                let partner = self.ir.xor(lane, self.ir.i64(*mask as u64))?;
                let inside = self.ir.icmp(P::ULT, partner, self.ir.i64(count as u64))?;
                let partner = self.ir.sel(inside, partner, lane)?;
                let p = self.lane_ptr(tmp, t, count, partner)?;
                Ok(Val { v: self.ir.b.build_load(t, p, "")?, ty })
            }
            Expr::Call { func, .. } => fail(format!("call to `{}` not expanded (run mathlib::expand_calls first)", func.name())),
            Expr::Reduce(_) => fail("reduction not expanded (run lanes::expand first)"),
        }
    }

    /// A float value as f32 (f16/bf16 bits are converted exactly).
    pub(super) fn to_f32(&self, v: Val<'ctx>) -> R<FloatValue<'ctx>> {
        match v.ty {
            ScalarType::F32 => Ok(v.v.into_float_value()),
            ScalarType::F16 => convert::f16_to_f32(&self.ir, v.v.into_int_value()),
            ScalarType::BF16 => convert::bf16_to_f32(&self.ir, v.v.into_int_value()),
            t => fail(format!("{t} is not a float type")),
        }
    }

    /// An f32 rounded to `ty` (f32, f16 or bf16).
    pub(super) fn round_from_f32(&self, f: FloatValue<'ctx>, ty: ScalarType) -> R<Val<'ctx>> {
        let v = match ty {
            ScalarType::F32 => f.into(),
            ScalarType::F16 => convert::f32_to_f16(&self.ir, f)?.into(),
            ScalarType::BF16 => convert::f32_to_bf16(&self.ir, f)?.into(),
            t => return fail(format!("{t} is not a float type")),
        };
        Ok(Val { v, ty })
    }

    fn f32_intrinsic(&self, name: &str, f: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        let t = self.ir.cx.f32_type();
        Ok(self.ir.intrinsic(name, &[t.into()], &[f.into()])?.into_float_value())
    }

    fn unary(&mut self, op: UnOp, a: Val<'ctx>) -> R<Val<'ctx>> {
        let b = self.ir.b;
        let ty = a.ty;
        if ty.is_float() {
            // Sign operations act on the bits directly (exact, NaN payloads kept).
            let sign_op = |mask_xor: bool| -> R<Val<'ctx>> {
                let (bits, width) = match ty {
                    ScalarType::F32 => (self.ir.f32_bits(a.v.into_float_value())?, 32),
                    _ => (a.v.into_int_value(), 16),
                };
                let sign = bits.get_type().const_int(1u64 << (width - 1), false);
                let r = if mask_xor { self.ir.xor(bits, sign)? } else { self.ir.and(bits, bits.get_type().const_int((1u64 << (width - 1)) - 1, false))? };
                let v = if ty == ScalarType::F32 { self.ir.bits_f32(r)?.into() } else { r.into() };
                Ok(Val { v, ty })
            };
            return match op {
                UnOp::Neg => sign_op(true),
                UnOp::Abs => sign_op(false),
                UnOp::Sqrt => self.round_from_f32(self.f32_intrinsic("llvm.sqrt", self.to_f32(a)?)?, ty),
                UnOp::Floor => self.round_from_f32(self.f32_intrinsic("llvm.floor", self.to_f32(a)?)?, ty),
                UnOp::Not => fail(format!("`not` does not apply to {ty}")),
            };
        }
        let x = a.v.into_int_value();
        let it = x.get_type();
        let v = match op {
            UnOp::Neg => b.build_int_sub(it.const_zero(), x, "")?,
            UnOp::Not => self.ir.xor(x, it.const_all_ones())?,
            UnOp::Abs => {
                let neg = self.ir.icmp(P::SLT, x, it.const_zero())?;
                self.ir.sel(neg, b.build_int_sub(it.const_zero(), x, "")?, x)?
            }
            UnOp::Sqrt | UnOp::Floor => return fail(format!("`{}` does not apply to {ty}", op.name())),
        };
        Ok(Val { v: v.into(), ty })
    }

    fn binary(&mut self, op: BinOp, a: Val<'ctx>, bv: Val<'ctx>) -> R<Val<'ctx>> {
        let ty = a.ty;
        if ty.is_float() {
            return self.float_binary(op, a, bv);
        }
        let b = self.ir.b;
        let (x, y) = (a.v.into_int_value(), bv.v.into_int_value());
        let it = x.get_type();
        let signed = ty.is_signed();
        let bool_ty = |v: IntValue<'ctx>| Ok(Val { v: v.into(), ty: ScalarType::Bool });
        let v = match op {
            BinOp::Add => self.ir.add(x, y)?,
            BinOp::Sub => self.ir.sub(x, y)?,
            BinOp::Mul => self.ir.mul(x, y)?,
            BinOp::Div | BinOp::Rem => {
                // x / 0 = 0, x % 0 = 0, MIN / -1 = MIN (wrapping), MIN % -1 = 0.
                let zero = it.const_zero();
                let one = it.const_int(1, false);
                let by_zero = self.ir.icmp(P::EQ, y, zero)?;
                let mut safe = self.ir.sel(by_zero, one, y)?;
                if signed {
                    let min = it.const_int(1u64 << (ty.bits() - 1), false);
                    let ovf = self.ir.and(self.ir.icmp(P::EQ, x, min)?, self.ir.icmp(P::EQ, y, it.const_all_ones())?)?;
                    safe = self.ir.sel(ovf, one, safe)?;
                    let q = if op == BinOp::Div { b.build_int_signed_div(x, safe, "")? } else { b.build_int_signed_rem(x, safe, "")? };
                    let q = if op == BinOp::Rem { self.ir.sel(ovf, zero, q)? } else { q };
                    self.ir.sel(by_zero, zero, q)?
                } else {
                    let q = if op == BinOp::Div { b.build_int_unsigned_div(x, safe, "")? } else { b.build_int_unsigned_rem(x, safe, "")? };
                    self.ir.sel(by_zero, zero, q)?
                }
            }
            BinOp::Min | BinOp::Max => {
                let lt = self.ir.icmp(if signed { P::SLT } else { P::ULT }, x, y)?;
                if op == BinOp::Min {
                    self.ir.sel(lt, x, y)?
                } else {
                    self.ir.sel(lt, y, x)?
                }
            }
            BinOp::And => self.ir.and(x, y)?,
            BinOp::Or => self.ir.or(x, y)?,
            BinOp::Xor => self.ir.xor(x, y)?,
            BinOp::Shl | BinOp::Shr => {
                let amt = self.ir.and(y, it.const_int(ty.bits() as u64 - 1, false))?;
                match (op, signed) {
                    (BinOp::Shl, _) => self.ir.shl(x, amt)?,
                    (_, true) => self.ir.ashr(x, amt)?,
                    (_, false) => self.ir.lshr(x, amt)?,
                }
            }
            BinOp::Eq => return bool_ty(self.ir.icmp(P::EQ, x, y)?),
            BinOp::Ne => return bool_ty(self.ir.icmp(P::NE, x, y)?),
            BinOp::Lt => return bool_ty(self.ir.icmp(if signed { P::SLT } else { P::ULT }, x, y)?),
            BinOp::Le => return bool_ty(self.ir.icmp(if signed { P::SLE } else { P::ULE }, x, y)?),
            BinOp::Gt => return bool_ty(self.ir.icmp(if signed { P::SGT } else { P::UGT }, x, y)?),
            BinOp::Ge => return bool_ty(self.ir.icmp(if signed { P::SGE } else { P::UGE }, x, y)?),
        };
        Ok(Val { v: v.into(), ty })
    }

    fn float_binary(&mut self, op: BinOp, a: Val<'ctx>, bv: Val<'ctx>) -> R<Val<'ctx>> {
        let ty = a.ty;
        let b = self.ir.b;
        let (x, y) = (self.to_f32(a)?, self.to_f32(bv)?);
        let cmp = |p: F| -> R<Val<'ctx>> { Ok(Val { v: self.ir.fcmp(p, x, y)?.into(), ty: ScalarType::Bool }) };
        let f = match op {
            BinOp::Add => b.build_float_add(x, y, "")?,
            BinOp::Sub => b.build_float_sub(x, y, "")?,
            BinOp::Mul => b.build_float_mul(x, y, "")?,
            BinOp::Div => b.build_float_div(x, y, "")?,
            BinOp::Min | BinOp::Max => return self.float_min_max(op == BinOp::Max, a, bv, x, y),
            BinOp::Eq => return cmp(F::OEQ),
            BinOp::Ne => return cmp(F::UNE),
            BinOp::Lt => return cmp(F::OLT),
            BinOp::Le => return cmp(F::OLE),
            BinOp::Gt => return cmp(F::OGT),
            BinOp::Ge => return cmp(F::OGE),
            _ => return fail(format!("`{}` does not apply to {ty}", op.name())),
        };
        self.round_from_f32(f, ty)
    }

    /// max/min: a NaN operand is returned as is (the first one if both are), `max(-0, +0)`
    /// is +0 and `min(-0, +0)` is -0. Selects between the original values, so no rounding.
    fn float_min_max(&mut self, max: bool, a: Val<'ctx>, bv: Val<'ctx>, x: FloatValue<'ctx>, y: FloatValue<'ctx>) -> R<Val<'ctx>> {
        let ir = &self.ir;
        let (ab, bb) = if a.ty == ScalarType::F32 {
            (ir.f32_bits(x)?, ir.f32_bits(y)?)
        } else {
            (a.v.into_int_value(), bv.v.into_int_value())
        };
        let equal_bits = if max { ir.and(ab, bb)? } else { ir.or(ab, bb)? };
        let (first, second) = if max { (F::OGT, F::OLT) } else { (F::OLT, F::OGT) };
        let r = ir.sel(ir.fcmp(second, x, y)?, bb, equal_bits)?;
        let r = ir.sel(ir.fcmp(first, x, y)?, ab, r)?;
        let r = ir.sel(ir.fcmp(F::UNO, y, y)?, bb, r)?;
        let r = ir.sel(ir.fcmp(F::UNO, x, x)?, ab, r)?;
        let v = if a.ty == ScalarType::F32 { ir.bits_f32(r)?.into() } else { r.into() };
        Ok(Val { v, ty: a.ty })
    }

    /// Numeric conversion (see `Expr::Cast`): float→float and int→float round to nearest
    /// even (once), float→int truncates and saturates (NaN → 0), int↔int wraps, →bool is
    /// `!= 0` (NaN → false), bool→number is 0 or 1.
    fn cast(&mut self, a: Val<'ctx>, to: ScalarType) -> R<Val<'ctx>> {
        let cx = self.ir.cx;
        let b = self.ir.b;
        let from = a.ty;
        if from == to {
            return Ok(a);
        }
        if to == ScalarType::Bool {
            let v = if from.is_float() {
                self.ir.fcmp(F::ONE, self.to_f32(a)?, cx.f32_type().const_zero())?
            } else {
                let x = a.v.into_int_value();
                self.ir.icmp(P::NE, x, x.get_type().const_zero())?
            };
            return Ok(Val { v: v.into(), ty: to });
        }
        if from.is_float() && to.is_float() {
            return self.round_from_f32(self.to_f32(a)?, to);
        }
        if from.is_float() {
            let f = self.to_f32(a)?;
            let it = reg_ty(cx, to).into_int_type();
            let name = if to.is_signed() { "llvm.fptosi.sat" } else { "llvm.fptoui.sat" };
            let v = self.ir.intrinsic(name, &[it.into(), cx.f32_type().into()], &[f.into()])?;
            return Ok(Val { v, ty: to });
        }
        // from is an integer or bool
        let x = a.v.into_int_value();
        let signed = from.is_signed();
        if to.is_float() {
            if to == ScalarType::F32 {
                let f = if signed { b.build_signed_int_to_float(x, cx.f32_type(), "")? } else { b.build_unsigned_int_to_float(x, cx.f32_type(), "")? };
                return Ok(Val { v: f.into(), ty: to });
            }
            let x64 = if from.bits() == 64 {
                x
            } else if signed {
                b.build_int_s_extend(x, cx.i64_type(), "")?
            } else {
                self.ir.zext(x, cx.i64_type())?
            };
            let h = convert::int_to_half(&self.ir, x64, signed, to == ScalarType::BF16)?;
            return Ok(Val { v: h.into(), ty: to });
        }
        let it = reg_ty(cx, to).into_int_type();
        let (fw, tw) = (x.get_type().get_bit_width(), it.get_bit_width());
        let v = if fw == tw {
            x
        } else if fw > tw {
            self.ir.trunc(x, it)?
        } else if signed {
            b.build_int_s_extend(x, it, "")?
        } else {
            self.ir.zext(x, it)?
        };
        Ok(Val { v: v.into(), ty: to })
    }
}
