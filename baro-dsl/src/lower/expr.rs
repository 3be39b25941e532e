//! The expression walk every LLVM lowering shares. A target supplies only the leaves
//! (`ExprLeaves`: variables, parameters, group ids, memory loads, shuffles); the arithmetic is
//! `ops` and is identical everywhere. This module never decides where a value lives.

use std::collections::HashMap;

use inkwell::context::Context;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate as P;

use super::ir::Ir;
use super::{fail, Fail, R};
use crate::ir::{BinOp, Buf, Dot4Kind, Expr, Kernel, ParamId, ScalarType, Var};

/// A lowered value and its IR type.
#[derive(Clone, Copy)]
pub(crate) struct Val<'ctx> {
    pub v: BasicValueEnum<'ctx>,
    pub ty: ScalarType,
}

/// The register type of a scalar type (f16/bf16 travel as their i16 bits, bool as i1).
pub(crate) fn reg_ty<'ctx>(cx: &'ctx Context, t: ScalarType) -> BasicTypeEnum<'ctx> {
    match t {
        ScalarType::Bool => cx.bool_type().into(),
        ScalarType::I8 | ScalarType::U8 => cx.i8_type().into(),
        ScalarType::F16 | ScalarType::BF16 => cx.i16_type().into(),
        ScalarType::I32 | ScalarType::U32 => cx.i32_type().into(),
        ScalarType::I64 | ScalarType::U64 => cx.i64_type().into(),
        ScalarType::F32 => cx.f32_type().into(),
    }
}

/// The in-memory type (bool is one byte).
pub(crate) fn mem_ty<'ctx>(cx: &'ctx Context, t: ScalarType) -> BasicTypeEnum<'ctx> {
    match t {
        ScalarType::Bool => cx.i8_type().into(),
        t => reg_ty(cx, t),
    }
}

/// A kernel parameter as a lowering sees it: a buffer's element pointer and element count, or
/// a scalar's value.
pub(crate) enum ParamVal<'ctx> {
    Buffer { ptr: PointerValue<'ctx>, len: IntValue<'ctx> },
    Scalar(BasicValueEnum<'ctx>),
}

/// What a target lowering provides so that `ExprLeaves::expr` can lower any expression.
pub(crate) trait ExprLeaves<'a, 'ctx: 'a> {
    fn ir(&self) -> &Ir<'a, 'ctx>;
    fn kernel(&self) -> &'a Kernel;
    /// Values bound by `Expr::Let` in the expression being lowered.
    fn lets(&mut self) -> &mut HashMap<Var, BasicValueEnum<'ctx>>;
    /// The current value of a variable (a `let` binding first, then its slot).
    fn var_value(&mut self, v: Var) -> R<BasicValueEnum<'ctx>>;
    /// A scalar parameter's register value.
    /// The kernel's parameters as lowered, in the IR's order.
    fn params(&self) -> &[ParamVal<'ctx>];
    fn scalar_param(&self, p: ParamId) -> R<BasicValueEnum<'ctx>> {
        match self.params().get(p.index()) {
            Some(ParamVal::Scalar(v)) => Ok(*v),
            _ => fail(format!("parameter {p} used as a scalar value")),
        }
    }
    /// The workgroup index on `axis`, as i64.
    fn group_id(&mut self, axis: u8) -> R<IntValue<'ctx>>;
    /// Loads `buf[idx]` (bounds-checked the target's way) as its in-memory type; `index` is
    /// the index expression `idx` was lowered from.
    fn load_elem(&mut self, buf: Buf, index: &'a Expr, idx: IntValue<'ctx>, signed: bool) -> R<BasicValueEnum<'ctx>>;
    /// `value` as lane `lane ^ mask` holds it; `node` is the `ShuffleXor` itself.
    fn shuffle_xor(&mut self, node: &'a Expr, value: &'a Expr, mask: u32) -> R<Val<'ctx>>;

    /// A 4-way byte dot of the i32 registers `a`, `b`, `c`; the exact integer operations
    /// unless the target has an instruction computing the same integer.
    fn dot4(&mut self, kind: Dot4Kind, a: IntValue<'ctx>, b: IntValue<'ctx>, c: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        self.ir().dot4_exact(kind, a, b, c)
    }

    fn expr_ty(&self, e: &Expr) -> R<ScalarType> {
        self.kernel().type_of(e).map_err(|e| Fail(e.0))
    }

    fn var_ty(&self, v: Var) -> R<ScalarType> {
        match self.kernel().vars.get(v.index()) {
            Some(d) => Ok(d.ty),
            None => fail(format!("variable {v} is not declared")),
        }
    }

    fn expr(&mut self, e: &'a Expr) -> R<Val<'ctx>> {
        let cx = self.ir().cx;
        match e {
            Expr::Const(c) => {
                // NaN constants keep their payload: build them from bits.
                if c.ty == ScalarType::F32 && f32::from_bits(c.bits as u32).is_nan() {
                    let b = self.ir().i32(c.bits as u32);
                    return Ok(Val { v: self.ir().bits_f32(b)?.into(), ty: c.ty });
                }
                Ok(Val { v: self.ir().konst(*c), ty: c.ty })
            }
            Expr::Var(v) => Ok(Val { v: self.var_value(*v)?, ty: self.var_ty(*v)? }),
            Expr::Param(p) => match self.kernel().params.get(p.index()).map(|d| &d.kind) {
                Some(crate::ir::ParamKind::Scalar(ty)) => Ok(Val { v: self.scalar_param(*p)?, ty: *ty }),
                _ => fail(format!("parameter {p} used as a scalar value")),
            },
            Expr::GroupId(a) => {
                if *a > 2 {
                    return fail(format!("group id axis {a}: expected 0, 1 or 2"));
                }
                Ok(Val { v: self.group_id(*a)?.into(), ty: ScalarType::INDEX })
            }
            Expr::Load { buf, index } => {
                let (idx, signed) = self.index(index)?;
                let Some(ty) = self.kernel().buf_elem(*buf) else { return fail(format!("{buf:?} is not a buffer")) };
                let v = self.load_elem(*buf, index, idx, signed)?;
                let v = match ty {
                    ScalarType::Bool => self.ir().icmp(P::NE, v.into_int_value(), cx.i8_type().const_zero())?.into(),
                    _ => v,
                };
                Ok(Val { v, ty })
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg)?;
                self.ir().unary(*op, a)
            }
            Expr::Binary { op: BinOp::Add, lhs, rhs } if dot4_of_zero(rhs).is_some() || dot4_of_zero(lhs).is_some() => {
                // `x + dot4(a, b, 0)` is `dot4(a, b, x)`: both add modulo 2^32 (the dot
                // instructions accumulate without saturation), so the accumulate form is the
                // same integer in one instruction, where the dot is an instruction.
                // Operands in source order, so a failing load is reported as without the fold.
                let (acc_first, acc, (kind, a, b)) = match (dot4_of_zero(rhs), dot4_of_zero(lhs)) {
                    (Some(d), _) => (true, lhs, d),
                    (None, Some(d)) => (false, rhs, d),
                    (None, None) => return fail("`add` of a 4-way dot: no dot operand (a bug in baro)"),
                };
                let z = if acc_first { Some(self.expr(acc)?) } else { None };
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                let z = match z {
                    Some(z) => z,
                    None => self.expr(acc)?,
                };
                if [x.ty, y.ty, z.ty] != [ScalarType::U32, ScalarType::U32, ScalarType::I32] {
                    return fail(format!(
                        "`add` of {} and `{}` of {} and {}: expected i32, u32 and u32",
                        z.ty,
                        kind.name(),
                        x.ty,
                        y.ty
                    ));
                }
                let v = self.dot4(kind, x.v.into_int_value(), y.v.into_int_value(), z.v.into_int_value())?;
                Ok(Val { v: v.into(), ty: ScalarType::I32 })
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs)?;
                let b = self.expr(rhs)?;
                if a.ty != b.ty {
                    return fail(format!("`{}` of {} and {}: expected one type", op.name(), a.ty, b.ty));
                }
                self.ir().binary(*op, a, b)
            }
            Expr::Select { cond, then, els } => {
                let c = self.expr(cond)?;
                let t = self.expr(then)?;
                let f = self.expr(els)?;
                Ok(Val { v: self.ir().b.build_select(c.v.into_int_value(), t.v, f.v, "")?, ty: t.ty })
            }
            Expr::Fma { a, b, c } => {
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                let z = self.expr(c)?;
                self.ir().fma(x, y, z)
            }
            Expr::Dot4 { kind, a, b, c } => {
                let x = self.expr(a)?;
                let y = self.expr(b)?;
                let z = self.expr(c)?;
                if [x.ty, y.ty, z.ty] != [ScalarType::U32, ScalarType::U32, ScalarType::I32] {
                    return fail(format!(
                        "`{}` of {}, {} and {}: expected u32, u32 and i32",
                        kind.name(),
                        x.ty,
                        y.ty,
                        z.ty
                    ));
                }
                let v = self.dot4(*kind, x.v.into_int_value(), y.v.into_int_value(), z.v.into_int_value())?;
                Ok(Val { v: v.into(), ty: ScalarType::I32 })
            }
            Expr::Cast { to, arg } => {
                let a = self.expr(arg)?;
                self.ir().cast(a, *to)
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg)?;
                let v = match (a.ty, *to) {
                    (ScalarType::F32, t) if t != ScalarType::F32 => self.ir().f32_bits(a.v.into_float_value())?.into(),
                    (t, ScalarType::F32) if t != ScalarType::F32 => self.ir().bits_f32(a.v.into_int_value())?.into(),
                    _ => a.v,
                };
                Ok(Val { v, ty: *to })
            }
            Expr::Let { var, value, body } => {
                let v = self.expr(value)?;
                let old = self.lets().insert(*var, v.v);
                let r = self.expr(body);
                match old {
                    Some(o) => self.lets().insert(*var, o),
                    None => self.lets().remove(var),
                };
                r
            }
            Expr::ShuffleXor { value, mask } => self.shuffle_xor(e, value, *mask),
            Expr::Call { func, .. } => {
                fail(format!("call to `{}` not expanded (run mathlib::expand_calls first)", func.name()))
            }
            Expr::Reduce(_) => fail("reduction not expanded (run lanes::expand first)"),
        }
    }

    /// An index expression as i64 (sign-extended when its type is signed), and whether it was signed.
    fn index(&mut self, e: &'a Expr) -> R<(IntValue<'ctx>, bool)> {
        let v = self.expr(e)?;
        if !v.ty.is_int() {
            return fail(format!("index of type {}: expected an integer", v.ty));
        }
        let i = v.v.into_int_value();
        let i64t = self.ir().cx.i64_type();
        let signed = v.ty.is_signed();
        let i = match (v.ty.bits(), signed) {
            (64, _) => i,
            (_, true) => self.ir().b.build_int_s_extend(i, i64t, "")?,
            (_, false) => self.ir().zext(i, i64t)?,
        };
        Ok((i, signed))
    }
}

/// The kind and operands of `e` when it is `dot4(a, b, 0)` (the accumulator the integer zero).
fn dot4_of_zero(e: &Expr) -> Option<(Dot4Kind, &Expr, &Expr)> {
    match e {
        Expr::Dot4 { kind, a, b, c } if matches!(&**c, Expr::Const(k) if k.ty == ScalarType::I32 && k.bits == 0) => {
            Some((*kind, a, b))
        }
        _ => None,
    }
}
