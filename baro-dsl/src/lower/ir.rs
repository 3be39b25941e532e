//! A terse helper over inkwell's builder for the integer and float operations the lowerings
//! emit. It never adds flags to an instruction (no nsw/nuw, no fast-math).

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::types::{BasicTypeEnum, IntType};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

use super::{fail, R};

#[derive(Clone, Copy)]
pub(crate) struct Ir<'a, 'ctx> {
    pub cx: &'ctx Context,
    pub b: &'a Builder<'ctx>,
    pub m: &'a Module<'ctx>,
}

impl<'a, 'ctx> Ir<'a, 'ctx> {
    pub fn i32(&self, v: u32) -> IntValue<'ctx> {
        self.cx.i32_type().const_int(v as u64, false)
    }
    pub fn i64(&self, v: u64) -> IntValue<'ctx> {
        self.cx.i64_type().const_int(v, false)
    }
    pub fn and(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_and(a, b, "")?)
    }
    pub fn or(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_or(a, b, "")?)
    }
    pub fn xor(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_xor(a, b, "")?)
    }
    pub fn add(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_int_add(a, b, "")?)
    }
    pub fn sub(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_int_sub(a, b, "")?)
    }
    pub fn mul(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_int_mul(a, b, "")?)
    }
    pub fn shl(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_left_shift(a, b, "")?)
    }
    pub fn lshr(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_right_shift(a, b, false, "")?)
    }
    pub fn ashr(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_right_shift(a, b, true, "")?)
    }
    pub fn icmp(&self, p: IntPredicate, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_int_compare(p, a, b, "")?)
    }
    pub fn fcmp(&self, p: FloatPredicate, a: FloatValue<'ctx>, b: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_float_compare(p, a, b, "")?)
    }
    pub fn sel(&self, c: IntValue<'ctx>, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_select(c, a, b, "")?.into_int_value())
    }
    pub fn zext(&self, a: IntValue<'ctx>, ty: IntType<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_int_z_extend(a, ty, "")?)
    }
    pub fn trunc(&self, a: IntValue<'ctx>, ty: IntType<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_int_truncate(a, ty, "")?)
    }
    pub fn f32_bits(&self, a: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.b.build_bit_cast(a, self.cx.i32_type(), "")?.into_int_value())
    }
    pub fn bits_f32(&self, a: IntValue<'ctx>) -> R<FloatValue<'ctx>> {
        Ok(self.b.build_bit_cast(a, self.cx.f32_type(), "")?.into_float_value())
    }
    /// Calls the overloaded intrinsic `name` specialised on `types`.
    pub fn intrinsic(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> R<BasicValueEnum<'ctx>> {
        let Some(i) = Intrinsic::find(name) else { return fail(format!("llvm intrinsic `{name}` not found")) };
        let Some(f) = i.get_declaration(self.m, types) else {
            return fail(format!("llvm intrinsic `{name}` has no declaration for {types:?}"));
        };
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|&a| a.into()).collect();
        match self.b.build_call(f, &args, "")?.try_as_basic_value().basic() {
            Some(v) => Ok(v),
            None => fail(format!("llvm intrinsic `{name}` returned no value")),
        }
    }
}
