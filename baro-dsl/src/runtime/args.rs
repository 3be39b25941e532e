//! Launch arguments: typed slices and scalars, checked against a kernel's parameters.
//!
//! `Element` is sealed: only plain-old-data types whose every bit pattern the kernel may
//! produce is valid (bool buffers are only ever written 0 or 1) can be viewed as bytes here.
//! This module never hands out a byte view of a type outside that list.

use half::{bf16, f16};

use super::check::ArgShape;
use crate::ir::{Const, ScalarType};

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that a kernel buffer can hold.
pub trait Element: Copy + 'static + sealed::Sealed {
    const TYPE: ScalarType;
}

macro_rules! element {
    ($($t:ty => $s:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const TYPE: ScalarType = ScalarType::$s; }
    )*};
}
element!(f32 => F32, f16 => F16, bf16 => BF16, i8 => I8, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, usize => U64, bool => Bool);

/// One launch argument, in the kernel's parameter order.
pub enum Arg<'a> {
    /// A read-only buffer (`&[T]`), viewed as bytes.
    Buf {
        elem: ScalarType,
        bytes: &'a [u8],
    },
    /// A writable buffer (`&mut [T]`), viewed as bytes.
    BufMut {
        elem: ScalarType,
        bytes: &'a mut [u8],
    },
    Scalar(Const),
}

impl<'a> Arg<'a> {
    pub fn buf<T: Element>(s: &'a [T]) -> Arg<'a> {
        // SAFETY: `T` is one of the sealed plain-old-data element types (no padding), so its
        // bytes may be read; the view borrows `s` for 'a.
        let bytes = unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) };
        Arg::Buf { elem: T::TYPE, bytes }
    }
    pub fn buf_mut<T: Element>(s: &'a mut [T]) -> Arg<'a> {
        // SAFETY: as in `buf`; writes through this view come only from `HostKernel::launch`,
        // which writes back bytes that were either copied from `s` or stored by the kernel as
        // a value of `T::TYPE` (bools as 0 or 1), so every `T` stays valid.
        let bytes = unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) };
        Arg::BufMut { elem: T::TYPE, bytes }
    }
    pub fn scalar(c: Const) -> Arg<'a> {
        Arg::Scalar(c)
    }
    /// How this argument reads in an error message (`&[f32]`, `&mut [bf16]`, `usize`).
    pub fn describe(&self) -> String {
        self.shape().describe()
    }
    pub(crate) fn shape(&self) -> ArgShape {
        match self {
            Arg::Buf { elem, .. } => ArgShape::Buf { elem: *elem, writable: false },
            Arg::BufMut { elem, .. } => ArgShape::Buf { elem: *elem, writable: true },
            Arg::Scalar(c) => ArgShape::Scalar(c.ty),
        }
    }
}

/// A Rust value that converts to a kernel scalar argument (its canonical `Const`).
pub trait ScalarArg: Copy {
    fn to_const(self) -> Const;
}

macro_rules! scalar_from {
    ($($t:ty => $e:expr),*) => {$(
        impl ScalarArg for $t {
            fn to_const(self) -> Const {
                let f: fn($t) -> Const = $e;
                f(self)
            }
        }
        impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                Arg::Scalar(v.to_const())
            }
        }
    )*};
}
scalar_from!(
    usize => |v| Const::index(v as u64),
    u64 => |v| Const::new(ScalarType::U64, v),
    i64 => |v| Const::new(ScalarType::I64, v as u64),
    u32 => |v| Const::new(ScalarType::U32, v as u64),
    i32 => |v| Const::new(ScalarType::I32, v as u32 as u64),
    u8 => |v| Const::new(ScalarType::U8, v as u64),
    i8 => |v| Const::new(ScalarType::I8, v as u8 as u64),
    bool => Const::bool,
    f32 => Const::f32,
    f16 => |v| Const::new(ScalarType::F16, v.to_bits() as u64),
    bf16 => |v| Const::new(ScalarType::BF16, v.to_bits() as u64),
    Const => |c| c
);
