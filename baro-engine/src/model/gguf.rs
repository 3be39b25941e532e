//! GGUF v3 reader, written against the GGUF specification: header, metadata key/values of every
//! value type, tensor infos, alignment, and tensor data borrowed from a memory map.
//!
//! Every read is bounds-checked against the file length before it happens, every size is
//! computed with checked arithmetic, and an allocation driven by a count in the file is only
//! made once the bytes that count promises are known to exist. A malformed file gives a
//! `GgufError` naming what was expected and what was found; this module must never panic on
//! file contents and never read outside the file.

use std::collections::HashMap;
use std::path::Path;

use crate::model::source::Bytes;
use crate::model::tensor::{TensorType, TensorView};

pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
pub const GGUF_VERSION: u32 = 3;
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's limit on a tensor's rank.
pub const MAX_DIMS: u32 = 4;
/// Nested metadata arrays deeper than this are rejected (the spec allows nesting; no model
/// needs more than one level).
const MAX_ARRAY_DEPTH: u32 = 4;

/// What went wrong reading a GGUF file. Every variant is the file's fault except `Io`.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GgufError {
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    #[error("not a gguf file: expected magic \"GGUF\", found {found:02x?}")]
    BadMagic { found: Vec<u8> },
    #[error("unsupported gguf version: expected 3, found {found}")]
    BadVersion { found: u32 },
    #[error("truncated gguf file: {what} needs bytes {start}..{end}, the file has {len}")]
    Truncated { what: String, start: u64, end: u64, len: u64 },
    #[error("bad gguf metadata: key {key:?}: unknown value type {found}")]
    UnknownValueType { key: String, found: u32 },
    #[error("bad gguf metadata: key {key:?}: expected a bool (0 or 1), found byte {found}")]
    BadBool { key: String, found: u8 },
    #[error("bad gguf metadata: key {key:?}: arrays nested deeper than {MAX_ARRAY_DEPTH}")]
    ArrayTooDeep { key: String },
    #[error("bad gguf string at byte {at}: not utf-8")]
    BadUtf8 { at: u64 },
    #[error("bad gguf metadata: key {key:?} appears twice")]
    DuplicateKey { key: String },
    #[error("bad gguf metadata: general.alignment: expected a power-of-two u32, found {found}")]
    BadAlignment { found: String },
    #[error("bad gguf tensor {tensor:?}: expected 1..={MAX_DIMS} dimensions, found {found}")]
    BadRank { tensor: String, found: u32 },
    #[error("bad gguf tensor {tensor:?}: dimensions {dims:?} overflow")]
    DimsOverflow { tensor: String, dims: Vec<u64> },
    #[error("unsupported tensor type for {tensor:?}: {name} (ggml type {found}); supported: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K")]
    UnsupportedType { tensor: String, found: u32, name: &'static str },
    #[error(
        "bad gguf tensor {tensor:?}: innermost dimension {ne0} is not a multiple of the {ty} block length {block}"
    )]
    PartialBlock { tensor: String, ne0: u64, ty: TensorType, block: usize },
    #[error("bad gguf tensor {tensor:?}: offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned { tensor: String, offset: u64, alignment: u64 },
    #[error("bad gguf tensor {tensor:?}: data bytes {start}..{end} lie outside the data section of {len} bytes")]
    OutOfBounds { tensor: String, start: u64, end: u64, len: u64 },
    #[error("bad gguf tensors: {a:?} and {b:?} overlap")]
    Overlap { a: String, b: String },
    #[error("bad gguf tensors: {tensor:?} appears twice")]
    DuplicateTensor { tensor: String },
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetaValue {
    /// The GGUF value type number.
    pub fn type_id(&self) -> u32 {
        match self {
            MetaValue::U8(_) => 0,
            MetaValue::I8(_) => 1,
            MetaValue::U16(_) => 2,
            MetaValue::I16(_) => 3,
            MetaValue::U32(_) => 4,
            MetaValue::I32(_) => 5,
            MetaValue::F32(_) => 6,
            MetaValue::Bool(_) => 7,
            MetaValue::String(_) => 8,
            MetaValue::Array(_) => 9,
            MetaValue::U64(_) => 10,
            MetaValue::I64(_) => 11,
            MetaValue::F64(_) => 12,
        }
    }

    /// An integer value of any width and sign, when it is one and fits.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// A short description of the kind of value, for error messages.
    pub fn kind(&self) -> &'static str {
        const KINDS: [&str; 13] =
            ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"];
        KINDS[self.type_id() as usize]
    }
}

/// One tensor's entry in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub ty: TensorType,
    /// Outermost first (the reverse of GGUF's innermost-first `ne`).
    pub shape: Vec<usize>,
    /// From the start of the data section.
    pub offset: u64,
    pub n_bytes: u64,
}

/// A parsed GGUF file whose tensor bytes stay in the (memory-mapped) file.
pub struct GgufFile {
    bytes: Bytes,
    pub version: u32,
    /// In file order.
    pub metadata: Vec<(String, MetaValue)>,
    /// In file order.
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_offset: u64,
    by_name: HashMap<String, usize>,
}

impl GgufFile {
    /// Memory-maps and parses `path`.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let bytes =
            Bytes::map(path).map_err(|e| GgufError::Io { path: path.display().to_string(), message: e.to_string() })?;
        GgufFile::parse(bytes)
    }

    /// Parses bytes already in memory (tests, or a file read some other way).
    pub fn from_vec(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        GgufFile::parse(Bytes::Owned(bytes))
    }

    fn parse(bytes: Bytes) -> Result<GgufFile, GgufError> {
        let mut r = Reader { buf: &bytes, at: 0 };
        let magic = r.take(4, "the magic")?;
        if magic != GGUF_MAGIC {
            return Err(GgufError::BadMagic { found: magic.to_vec() });
        }
        let version = r.u32("the version")?;
        if version != GGUF_VERSION {
            return Err(GgufError::BadVersion { found: version });
        }
        let n_tensors = r.u64("the tensor count")?;
        let n_kv = r.u64("the metadata count")?;
        let mut metadata: Vec<(String, MetaValue)> = Vec::new();
        let mut keys = HashMap::new();
        for i in 0..n_kv {
            let key = r.string(&format!("metadata key {i}"))?;
            let ty = r.u32(&format!("the value type of {key:?}"))?;
            let value = r.value(&key, ty, 0)?;
            if keys.insert(key.clone(), metadata.len()).is_some() {
                return Err(GgufError::DuplicateKey { key });
            }
            metadata.push((key, value));
        }
        let alignment = match keys.get("general.alignment").map(|&i| &metadata[i].1) {
            None => DEFAULT_ALIGNMENT,
            Some(MetaValue::U32(a)) if a.is_power_of_two() => u64::from(*a),
            Some(other) => return Err(GgufError::BadAlignment { found: format!("{} {:?}", other.kind(), other) }),
        };
        let mut tensors = Vec::new();
        let mut by_name = HashMap::new();
        for i in 0..n_tensors {
            let info = r.tensor_info(i)?;
            if by_name.insert(info.name.clone(), tensors.len()).is_some() {
                return Err(GgufError::DuplicateTensor { tensor: info.name });
            }
            tensors.push(info);
        }
        let data_offset = align_up(r.at, alignment).ok_or_else(|| r.truncated("the data section", u64::MAX))?;
        let len = bytes.len() as u64;
        let data_len = len.saturating_sub(data_offset);
        for t in &tensors {
            if t.offset % alignment != 0 {
                return Err(GgufError::Misaligned { tensor: t.name.clone(), offset: t.offset, alignment });
            }
            let end = t.offset.checked_add(t.n_bytes);
            if data_offset > len || end.is_none_or(|e| e > data_len) {
                return Err(GgufError::OutOfBounds {
                    tensor: t.name.clone(),
                    start: t.offset,
                    end: end.unwrap_or(u64::MAX),
                    len: data_len,
                });
            }
        }
        let mut order: Vec<&TensorInfo> = tensors.iter().filter(|t| t.n_bytes > 0).collect();
        order.sort_by_key(|t| t.offset);
        for w in order.windows(2) {
            if w[0].offset + w[0].n_bytes > w[1].offset {
                return Err(GgufError::Overlap { a: w[0].name.clone(), b: w[1].name.clone() });
            }
        }
        Ok(GgufFile { bytes, version, metadata, tensors, alignment, data_offset, by_name })
    }

    pub fn meta(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor's bytes, borrowed from the file.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        let t = self.tensor_info(name)?;
        // Checked at parse time: the range lies inside the file.
        let start = (self.data_offset + t.offset) as usize;
        Some(TensorView { ty: t.ty, shape: &t.shape, bytes: &self.bytes[start..start + t.n_bytes as usize] })
    }
}

fn align_up(x: u64, alignment: u64) -> Option<u64> {
    Some(x.checked_add(alignment - 1)? / alignment * alignment)
}

struct Reader<'a> {
    buf: &'a [u8],
    at: u64,
}

impl<'a> Reader<'a> {
    fn truncated(&self, what: &str, n: u64) -> GgufError {
        GgufError::Truncated {
            what: what.to_string(),
            start: self.at,
            end: self.at.saturating_add(n),
            len: self.buf.len() as u64,
        }
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], GgufError> {
        let end =
            self.at.checked_add(n).filter(|&e| e <= self.buf.len() as u64).ok_or_else(|| self.truncated(what, n))?;
        let s = &self.buf[self.at as usize..end as usize];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let n = self.u64(what)?;
        let start = self.at;
        let s = self.take(n, what)?;
        String::from_utf8(s.to_vec()).map_err(|_| GgufError::BadUtf8 { at: start })
    }

    /// Fails before allocating when `count` elements of at least `min_size` bytes cannot fit.
    fn check_count(&self, count: u64, min_size: u64, what: &str) -> Result<(), GgufError> {
        let need = count.saturating_mul(min_size);
        if self.at.checked_add(need).is_none_or(|e| e > self.buf.len() as u64) {
            return Err(self.truncated(what, need));
        }
        Ok(())
    }

    fn value(&mut self, key: &str, ty: u32, depth: u32) -> Result<MetaValue, GgufError> {
        let what = format!("the value of {key:?}");
        Ok(match ty {
            0 => MetaValue::U8(self.array::<1>(&what)?[0]),
            1 => MetaValue::I8(self.array::<1>(&what)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array(&what)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array(&what)?)),
            4 => MetaValue::U32(self.u32(&what)?),
            5 => MetaValue::I32(i32::from_le_bytes(self.array(&what)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array(&what)?)),
            7 => match self.array::<1>(&what)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(GgufError::BadBool { key: key.to_string(), found: b }),
            },
            8 => MetaValue::String(self.string(&what)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(GgufError::ArrayTooDeep { key: key.to_string() });
                }
                let elem = self.u32(&format!("the array type of {key:?}"))?;
                let count = self.u64(&format!("the array length of {key:?}"))?;
                let min_size = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4 | 5 | 6 | 9 => 4,
                    8 | 10..=12 => 8,
                    found => return Err(GgufError::UnknownValueType { key: key.to_string(), found }),
                };
                self.check_count(count, min_size, &what)?;
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(key, elem, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(self.u64(&what)?),
            11 => MetaValue::I64(i64::from_le_bytes(self.array(&what)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array(&what)?)),
            found => return Err(GgufError::UnknownValueType { key: key.to_string(), found }),
        })
    }

    fn tensor_info(&mut self, i: u64) -> Result<TensorInfo, GgufError> {
        let name = self.string(&format!("the name of tensor {i}"))?;
        let n_dims = self.u32(&format!("the rank of {name:?}"))?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(GgufError::BadRank { tensor: name, found: n_dims });
        }
        let mut ne = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            ne.push(self.u64(&format!("the dimensions of {name:?}"))?);
        }
        let type_id = self.u32(&format!("the type of {name:?}"))?;
        let offset = self.u64(&format!("the offset of {name:?}"))?;
        let ty = TensorType::from_ggml_id(type_id).ok_or_else(|| GgufError::UnsupportedType {
            tensor: name.clone(),
            found: type_id,
            name: TensorType::ggml_name(type_id),
        })?;
        let overflow = || GgufError::DimsOverflow { tensor: name.clone(), dims: ne.clone() };
        // The product of the nonzero dimensions must fit too: a zero-element tensor whose other
        // dimensions overflow would make a product taken in another order (the shape's, outer
        // first) overflow where this one stops at the zero.
        let nonzero = ne
            .iter()
            .filter(|&&d| d != 0)
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(overflow)?;
        let n_elements = if ne.contains(&0) { 0 } else { nonzero };
        let shape: Vec<usize> =
            ne.iter().rev().map(|&d| usize::try_from(d)).collect::<Result<_, _>>().map_err(|_| overflow())?;
        if ne[0] % ty.block_len() as u64 != 0 {
            return Err(GgufError::PartialBlock { tensor: name, ne0: ne[0], ty, block: ty.block_len() });
        }
        let n_bytes = (n_elements / ty.block_len() as u64).checked_mul(ty.block_bytes() as u64).ok_or_else(overflow)?;
        Ok(TensorInfo { name, ty, shape, offset, n_bytes })
    }
}
