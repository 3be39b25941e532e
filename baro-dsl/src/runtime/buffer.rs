//! Device buffers: a typed view (element type and length) over backend memory, and pinned
//! host memory for transfers. Host memory is kept as `u64` words so every element type is
//! aligned.
//!
//! The byte views here are only ever over sealed plain-old-data `Element` types; bytes read
//! back as `bool` are checked to be 0 or 1 before they become `bool`s.

use super::device::{DeviceError, DeviceKind};
use super::Element;
use crate::ir::ScalarType;

/// `len` elements of `elem` in one device's memory.
pub struct Buffer {
    elem: ScalarType,
    len: usize,
    pub(crate) mem: Mem,
}

/// Backend memory. Host memory is exactly `byte_len.div_ceil(8)` words.
pub(crate) enum Mem {
    Host(Vec<u64>),
    #[cfg(feature = "cuda")]
    Cuda(super::cuda::CudaMem),
    #[cfg(feature = "hip")]
    Hip(super::hip::HipMem),
}

impl Mem {
    pub(crate) fn host_zeroed(bytes: usize) -> Mem {
        Mem::Host(vec![0u64; bytes.div_ceil(8)])
    }
    pub(crate) fn kind(&self) -> DeviceKind {
        match self {
            Mem::Host(_) => DeviceKind::Host,
            #[cfg(feature = "cuda")]
            Mem::Cuda(_) => DeviceKind::Cuda,
            #[cfg(feature = "hip")]
            Mem::Hip(_) => DeviceKind::Hip,
        }
    }
}

impl Buffer {
    pub(crate) fn new(elem: ScalarType, len: usize, mem: Mem) -> Buffer {
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
    /// The host bytes of a host buffer.
    pub(crate) fn host_bytes(&self) -> Option<&[u8]> {
        match &self.mem {
            Mem::Host(w) => Some(&words_as_bytes(w)[..self.byte_len()]),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
    /// The host bytes of a host buffer rounded up to whole 4-byte words (the padding reads 0:
    /// host memory is whole zeroed u64 words), for a `DeviceArg::Words` view.
    pub(crate) fn host_word_bytes(&self) -> Option<&[u8]> {
        match &self.mem {
            Mem::Host(w) => Some(&words_as_bytes(w)[..self.byte_len().div_ceil(4) * 4]),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
    /// The address of a host buffer's words (`Vec::as_ptr`: no reference to them is made),
    /// for a recorded launch.
    pub(crate) fn host_addr(&self) -> Option<*const u8> {
        match &self.mem {
            Mem::Host(w) => Some(w.as_ptr().cast()),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
    /// `host_addr` for writing (`Vec::as_mut_ptr`).
    pub(crate) fn host_addr_mut(&mut self) -> Option<*mut u8> {
        match &mut self.mem {
            Mem::Host(w) => Some(w.as_mut_ptr().cast()),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
    pub(crate) fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        let n = self.byte_len();
        match &mut self.mem {
            Mem::Host(w) => Some(&mut words_as_bytes_mut(w)[..n]),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

/// Page-locked host memory (plain memory on the host device).
pub struct PinnedBuffer {
    pub(crate) mem: PinnedMem,
}

pub(crate) enum PinnedMem {
    Host(Vec<u8>),
    #[cfg(feature = "cuda")]
    Cuda(super::cuda::CudaPinned),
}

impl PinnedBuffer {
    pub(crate) fn host(bytes: usize) -> PinnedBuffer {
        PinnedBuffer { mem: PinnedMem::Host(vec![0u8; bytes]) }
    }
    pub fn len(&self) -> usize {
        match &self.mem {
            PinnedMem::Host(v) => v.len(),
            #[cfg(feature = "cuda")]
            PinnedMem::Cuda(p) => p.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn as_slice(&self) -> Result<&[u8], DeviceError> {
        match &self.mem {
            PinnedMem::Host(v) => Ok(v),
            #[cfg(feature = "cuda")]
            PinnedMem::Cuda(p) => p.as_slice(),
        }
    }
    /// The bytes, for writing. On CUDA this first waits for the device, so no queued copy
    /// (`Device::copy_from_pinned`) still reads them.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8], DeviceError> {
        match &mut self.mem {
            PinnedMem::Host(v) => Ok(v),
            #[cfg(feature = "cuda")]
            PinnedMem::Cuda(p) => p.as_mut_slice(),
        }
    }
}

/// The bytes of a slice of plain-old-data elements.
pub(crate) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: `T` is one of the sealed plain-old-data element types (no padding, no
    // invalid bytes to read); the view borrows `s`.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

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
