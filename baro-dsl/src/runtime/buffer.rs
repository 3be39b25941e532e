//! Device buffers: a typed view (element type and length) over a backend's memory, and
//! pinned host memory for transfers. Neither knows which backend made it beyond its kind.
//!
//! The byte views here are only ever over sealed plain-old-data `Element` types; bytes read
//! back as `bool` are checked to be 0 or 1 before they become `bool`s.

use super::backend::{AnyHandle, PinnedHandle};
use super::device::{DeviceError, DeviceKind};
use super::Element;
use crate::ir::ScalarType;

/// `len` elements of `elem` in one device's memory.
pub struct Buffer {
    elem: ScalarType,
    len: usize,
    /// The backend's memory (`Backend::Mem`), at least `byte_len` bytes in whole 4-byte words.
    pub(crate) mem: AnyHandle,
}

impl Buffer {
    pub(crate) fn new(elem: ScalarType, len: usize, mem: AnyHandle) -> Buffer {
        Buffer { elem, len, mem }
    }
    pub fn elem(&self) -> ScalarType {
        self.elem
    }
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn byte_len(&self) -> usize {
        self.len * self.elem.size_bytes()
    }
    /// Which kind of device owns the memory.
    pub fn device_kind(&self) -> DeviceKind {
        self.mem.kind()
    }
    pub(crate) fn expect_elem(&self, t: ScalarType) -> Result<(), DeviceError> {
        if self.elem == t {
            Ok(())
        } else {
            Err(DeviceError::Mismatch {
                what: "buffer element type",
                expected: t.to_string(),
                found: self.elem.to_string(),
            })
        }
    }
}

/// Page-locked host memory (plain memory on the host device).
pub struct PinnedBuffer {
    pub(crate) mem: PinnedHandle,
}

impl PinnedBuffer {
    pub fn len(&self) -> usize {
        self.mem.memory().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn as_slice(&self) -> Result<&[u8], DeviceError> {
        self.mem.memory().as_slice()
    }
    /// The bytes, for writing. On CUDA this first waits for the device, so no queued copy
    /// (`Device::copy_from_pinned`) still reads them.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8], DeviceError> {
        self.mem.memory_mut().as_mut_slice()
    }
}

/// The bytes of a slice of plain-old-data elements.
pub(crate) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: `T` is one of the sealed plain-old-data element types (no padding, no
    // invalid bytes to read); the view borrows `s`.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The bytes of host memory kept as `u64` words (so every element type is aligned).
pub(crate) fn words_as_bytes(w: &[u64]) -> &[u8] {
    // SAFETY: every byte of a u64 is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), std::mem::size_of_val(w)) }
}

pub(crate) fn words_as_bytes_mut(w: &mut [u64]) -> &mut [u8] {
    // SAFETY: as above; any byte pattern is a valid u64.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(w)) }
}

/// Elements of `T` from their bytes (a whole number of them; bools must be 0 or 1).
pub(crate) fn from_bytes<T: Element>(bytes: &[u8]) -> Result<Vec<T>, DeviceError> {
    let size = std::mem::size_of::<T>();
    if size == 0 || bytes.len() % size != 0 {
        return Err(DeviceError::Mismatch {
            what: "read",
            expected: format!("a multiple of {size} bytes"),
            found: format!("{} bytes", bytes.len()),
        });
    }
    if T::TYPE == ScalarType::Bool {
        if let Some(b) = bytes.iter().find(|&&b| b > 1) {
            return Err(DeviceError::Mismatch {
                what: "bool buffer",
                expected: "bytes 0 or 1".into(),
                found: format!("byte {b}"),
            });
        }
    }
    let n = bytes.len() / size;
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: `v` has room for `n` elements; `T` is a sealed plain-old-data type for which
    // every byte pattern is valid (bools were checked above), so after copying `n * size`
    // bytes the first `n` elements are initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), n * size);
        v.set_len(n);
    }
    Ok(v)
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} x {} on {})", self.len, self.elem, self.mem.kind())
    }
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer({} bytes)", self.len())
    }
}
