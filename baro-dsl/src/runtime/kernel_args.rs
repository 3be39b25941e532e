//! Typed launch arguments: `#[kernel]` writes, next to each kernel `foo_bar`, a struct
//! `FooBarArgs<'a>` with one public field per parameter, named as the parameter, and
//! implements `KernelArgs` for it: the fields in declaration order, as the positional list
//! `Device::launch` takes. A `&[T]` parameter is a `&dyn ReadArg` field (a `Buffer`, or its
//! `Words` view), a `&mut [T]` parameter a `&mut Buffer` field, a scalar its Rust type; so a
//! buffer the caller only reads, where the kernel writes, or a scalar of another type, is a
//! compile error, and a launch names its arguments.
//!
//! `Buffer` is not generic over its element type (the launch checks it against the kernel),
//! so neither are the fields: a struct fixes the kinds, order and scalar types only. This
//! file never launches anything.

use super::buffer::Buffer;
use super::device::DeviceArg;

/// The arguments of one kernel, by name, convertible to its positional argument list.
/// Written by `#[kernel]` (the struct `<Kernel>Args`); `Rows` appends a rows sibling's row
/// count to an m = 1 kernel's arguments.
pub trait KernelArgs<'a> {
    /// The kernel the struct was written for (its IR name).
    const KERNEL: &'static str;
    /// Its parameters' names, in declaration order: the struct's fields.
    const PARAMS: &'static [&'static str];
    /// Whether a row count follows the fields (`Rows`): the kernel launched is a rows
    /// sibling, whose parameters are `PARAMS` and one more.
    const ROW_COUNT: bool = false;
    /// The arguments in the kernel's parameter order, as `Device::launch` takes them.
    fn into_args(self) -> Vec<DeviceArg<'a>>;
}

/// An m = 1 kernel's arguments `.0` plus the row count `.1` after them: the arguments of its
/// rows sibling, whose parameters are the m = 1 kernel's plus a trailing row count.
pub struct Rows<A>(pub A, pub usize);

impl<'a, A: KernelArgs<'a>> KernelArgs<'a> for Rows<A> {
    const KERNEL: &'static str = A::KERNEL;
    const PARAMS: &'static [&'static str] = A::PARAMS;
    const ROW_COUNT: bool = true;
    fn into_args(self) -> Vec<DeviceArg<'a>> {
        let mut args = self.0.into_args();
        args.push(DeviceArg::from(self.1));
        args
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Buffer {}
    impl Sealed for super::Words {}
}

/// What a read-only (`&[T]`) parameter takes: a `Buffer`, or a byte buffer's `Words`.
pub trait ReadArg: sealed::Sealed {
    fn arg(&self) -> DeviceArg<'_>;
}

impl ReadArg for Buffer {
    fn arg(&self) -> DeviceArg<'_> {
        DeviceArg::Buf(self)
    }
}

/// A `u8` buffer seen by a `&[u32]` parameter as little-endian words (`DeviceArg::Words`):
/// `Buffer::words`.
#[repr(transparent)]
pub struct Words(Buffer);

impl ReadArg for Words {
    fn arg(&self) -> DeviceArg<'_> {
        DeviceArg::Words(&self.0)
    }
}

impl Buffer {
    /// This buffer's bytes as little-endian `u32` words, for a `&[u32]` parameter (see
    /// `DeviceArg::Words`; a buffer of anything but bytes is refused at launch).
    pub fn words(&self) -> &Words {
        // SAFETY: `Words` is `repr(transparent)` over `Buffer`, so the two references have the
        // same layout and the borrow keeps `self`'s lifetime.
        unsafe { &*(self as *const Buffer).cast::<Words>() }
    }
}

/// Whether `A` fits `kernel`: its parameter names are `A::PARAMS` (and one more, the row
/// count, for `Rows`). A struct launches the kernel it was written for, or one with the same
/// parameters (the members of a kernel family, which differ in element types only).
pub(crate) fn fits<'a, A: KernelArgs<'a>>(kernel: &crate::ir::Kernel) -> Result<(), super::DeviceError> {
    let names = kernel.params.iter().map(|p| p.name.as_str());
    let extra = usize::from(A::ROW_COUNT);
    if kernel.params.len() == A::PARAMS.len() + extra && names.clone().zip(A::PARAMS).all(|(a, b)| a == *b) {
        return Ok(());
    }
    let rows = if A::ROW_COUNT { " and a row count" } else { "" };
    let params: Vec<&str> = names.collect();
    Err(super::DeviceError::Mismatch {
        what: "launch arguments",
        expected: format!("the parameters of `{}` ({})", kernel.name, params.join(", ")),
        found: format!("the arguments of `{}` ({}){rows}", A::KERNEL, A::PARAMS.join(", ")),
    })
}
