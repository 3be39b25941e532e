//! A GGUF v3 writer, so tests and the synthetic pack (`pack::plan`) can write model files:
//! metadata of any value type, tensors of any supported type, aligned data. It writes what it
//! is given; it never quantizes or converts (see `quantize.rs` and `names.rs`).

use std::io;
use std::path::Path;

use crate::model::gguf::{MetaValue, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION};
use crate::model::tensor::TensorType;

/// Where the fields of one tensor info landed in the written file (for corruption tests).
#[derive(Clone, Debug)]
pub struct TensorFieldOffsets {
    pub name: String,
    pub n_dims_at: usize,
    pub dims_at: usize,
    pub type_at: usize,
    pub offset_at: usize,
}

/// The byte layout of a written file.
#[derive(Clone, Debug)]
pub struct Layout {
    pub tensor_count_at: usize,
    pub tensor_infos: Vec<TensorFieldOffsets>,
    pub data_offset: usize,
}

pub struct GgufWriter {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<(String, TensorType, Vec<usize>, Vec<u8>)>,
    alignment: usize,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter { metadata: Vec::new(), tensors: Vec::new(), alignment: DEFAULT_ALIGNMENT as usize }
    }

    /// Sets `general.alignment` (a power of two) and writes it into the metadata.
    pub fn set_alignment(&mut self, alignment: u32) {
        self.alignment = alignment as usize;
        self.metadata.retain(|(k, _)| k != "general.alignment");
        self.metadata.push(("general.alignment".into(), MetaValue::U32(alignment)));
    }

    pub fn add_meta(&mut self, key: &str, value: MetaValue) {
        self.metadata.push((key.to_string(), value));
    }

    /// Adds a tensor; `shape` is outermost first; `bytes` must be exactly its encoded size.
    pub fn add_tensor(&mut self, name: &str, ty: TensorType, shape: &[usize], bytes: Vec<u8>) -> Result<(), String> {
        match ty.bytes_for(shape) {
            Some(n) if n == bytes.len() => {}
            expected => {
                return Err(format!(
                    "tensor {name:?} of type {ty} and shape {shape:?}: expected {expected:?} bytes, found {}",
                    bytes.len()
                ))
            }
        }
        self.tensors.push((name.to_string(), ty, shape.to_vec(), bytes));
        Ok(())
    }

    pub fn to_bytes(&self) -> (Vec<u8>, Layout) {
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&GGUF_VERSION.to_le_bytes());
        let tensor_count_at = out.len();
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_string(&mut out, k);
            out.extend_from_slice(&v.type_id().to_le_bytes());
            put_value(&mut out, v);
        }
        let mut infos = Vec::new();
        let mut offset = 0usize;
        for (name, ty, shape, bytes) in &self.tensors {
            put_string(&mut out, name);
            let n_dims_at = out.len();
            out.extend_from_slice(&(shape.len() as u32).to_le_bytes());
            let dims_at = out.len();
            for &d in shape.iter().rev() {
                out.extend_from_slice(&(d as u64).to_le_bytes());
            }
            let type_at = out.len();
            out.extend_from_slice(&ty.ggml_id().to_le_bytes());
            let offset_at = out.len();
            out.extend_from_slice(&(offset as u64).to_le_bytes());
            infos.push(TensorFieldOffsets { name: name.clone(), n_dims_at, dims_at, type_at, offset_at });
            offset = (offset + bytes.len()).next_multiple_of(self.alignment);
        }
        out.resize(out.len().next_multiple_of(self.alignment), 0);
        let data_offset = out.len();
        for (_, _, _, bytes) in &self.tensors {
            out.extend_from_slice(bytes);
            out.resize(out.len().next_multiple_of(self.alignment), 0);
        }
        (out, Layout { tensor_count_at, tensor_infos: infos, data_offset })
    }

    pub fn write(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, self.to_bytes().0)
    }
}

/// One tensor of a file whose header is written before its data is made (streaming writers).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorEntry {
    pub name: String,
    pub ty: TensorType,
    /// Outermost first.
    pub shape: Vec<usize>,
}

/// The header of a file whose tensor data will be streamed after it.
#[derive(Clone, Debug)]
pub struct StreamHeader {
    /// Everything before the data section, padded to the alignment.
    pub bytes: Vec<u8>,
    /// Each tensor's data offset from the start of the data section (aligned), in table order.
    pub offsets: Vec<u64>,
    /// Each tensor's encoded size.
    pub sizes: Vec<u64>,
    /// The data section's size, padding after every tensor included; the file is
    /// `bytes.len() + data_len` bytes long.
    pub data_len: u64,
}

/// Encodes the header for `tensors` (laid out in order, each padded to `alignment`, as
/// `GgufWriter::to_bytes` lays them), so the data can be written after it piece by piece. A
/// non-default `alignment` must also be in `metadata` as `general.alignment`; a tensor whose
/// shape is not a whole number of blocks of its type is an error.
pub fn stream_header(
    metadata: &[(String, MetaValue)],
    tensors: &[TensorEntry],
    alignment: usize,
) -> Result<StreamHeader, String> {
    if !alignment.is_power_of_two() {
        return Err(format!("alignment: expected a power of two, found {alignment}"));
    }
    let mut out = Vec::new();
    out.extend_from_slice(&GGUF_MAGIC);
    out.extend_from_slice(&GGUF_VERSION.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        put_string(&mut out, k);
        out.extend_from_slice(&v.type_id().to_le_bytes());
        put_value(&mut out, v);
    }
    let (mut offsets, mut sizes) = (Vec::new(), Vec::new());
    let mut offset = 0u64;
    for t in tensors {
        let size = t.ty.bytes_for(&t.shape).ok_or_else(|| {
            format!("tensor {:?}: expected a whole number of {} blocks in shape {:?}", t.name, t.ty, t.shape)
        })? as u64;
        put_string(&mut out, &t.name);
        out.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
        for &d in t.shape.iter().rev() {
            out.extend_from_slice(&(d as u64).to_le_bytes());
        }
        out.extend_from_slice(&t.ty.ggml_id().to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        offsets.push(offset);
        sizes.push(size);
        offset = (offset + size).next_multiple_of(alignment as u64);
    }
    out.resize(out.len().next_multiple_of(alignment), 0);
    Ok(StreamHeader { bytes: out, offsets, sizes, data_len: offset })
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(u8::from(*x)),
        MetaValue::String(s) => put_string(out, s),
        MetaValue::Array(items) => {
            // An empty array is written with element type u8.
            let elem = items.first().map_or(0, MetaValue::type_id);
            out.extend_from_slice(&elem.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}
