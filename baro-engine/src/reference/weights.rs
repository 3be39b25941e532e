//! The canonical (GGUF-convention, see `model/names.rs`) weights the reference reads, from
//! either source: an HF checkpoint converted through `names::hf_to_gguf` (an f32 copy: fine for
//! fixture-sized models, not for a 35B one), or a GGUF file whose block-quantized tensors stay
//! borrowed from the map and are dequantized one row at a time when read (its F32/F16/BF16
//! tensors, small in real packs, are converted to f32 once). Never changes a weight's value except
//! by the documented conversions; never panics on file contents.

use std::collections::HashMap;

use crate::model::dequant;
use crate::model::names::{self, GgufTensorSpec, HfTensor, Transform};
use crate::model::{ConfigError, GgufFile, HfCheckpoint, ModelConfig, TensorType};
use crate::reference::real::Real;

/// Why a reference model could not be built or run: the weights' fault, or the caller's
/// (a token outside the vocabulary).
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("bad checkpoint: {0}")]
    Convert(String),
    #[error("missing tensor {name}")]
    Missing { name: String },
    #[error("tensor {name}: expected shape {expected:?}, found {found:?}")]
    Shape { name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tensor {name}: expected a matrix stored as it is applied, found one with a value transform")]
    NotAMatrix { name: String },
    #[error("decode state: expected one made by this model's new_state, found one for another configuration")]
    StateMismatch,
    #[error("token {token}: expected an id below the vocab size {vocab}")]
    TokenOutOfRange { token: u64, vocab: usize },
}

/// A weight matrix, rows outermost (a stacked expert tensor [E, R, C] is E·R rows of C).
pub struct Matrix<'a> {
    pub rows: usize,
    pub cols: usize,
    data: MatrixData<'a>,
}

enum MatrixData<'a> {
    F32(Vec<f32>),
    /// ggml-typed bytes, whole blocks per row (GGUF guarantees the row length is a multiple of
    /// the block length).
    View {
        ty: TensorType,
        bytes: &'a [u8],
    },
}

impl Matrix<'_> {
    /// Row `r` as f32: borrowed when stored as f32, otherwise dequantized into `buf`.
    pub fn row<'s>(&'s self, r: usize, buf: &'s mut Vec<f32>) -> &'s [f32] {
        match &self.data {
            MatrixData::F32(v) => &v[r * self.cols..(r + 1) * self.cols],
            MatrixData::View { ty, bytes } => {
                let row_bytes = self.cols / ty.block_len() * ty.block_bytes();
                *buf = dequant::to_f32(*ty, &bytes[r * row_bytes..(r + 1) * row_bytes]);
                buf
            }
        }
    }

    /// Every element as f32.
    fn all(&self) -> Vec<f32> {
        match &self.data {
            MatrixData::F32(v) => v.clone(),
            MatrixData::View { ty, bytes } => dequant::to_f32(*ty, bytes),
        }
    }
}

/// One canonical tensor as loaded.
enum Loaded<'a> {
    /// Stored as applied.
    Plain(Matrix<'a>),
    /// HF values in canonical order whose value transform the model applies in its own
    /// precision (`Real::one_plus`, `Real::neg_exp`), so an f64 model gets f64 values.
    OnePlus(Vec<f32>),
    NegExp(Vec<f32>),
}

/// Every canonical tensor of a model, by GGUF name.
pub struct Weights<'a> {
    pub config: ModelConfig,
    tensors: HashMap<String, Loaded<'a>>,
}

impl Weights<'static> {
    /// Converts an HF checkpoint to canonical tensors (an f32 copy).
    pub fn from_hf(ck: &HfCheckpoint) -> Result<Weights<'static>, RefError> {
        let cfg = ck.config.clone();
        let get = |name: &str| ck.tensor(name).map(|t| HfTensor { shape: t.shape.to_vec(), data: t.to_f32() });
        let mut tensors = HashMap::new();
        for spec in names::gguf_tensors(&cfg) {
            let convert = |spec: &GgufTensorSpec| {
                names::hf_to_gguf(&cfg, spec, &get).map_err(|e| RefError::Convert(e.to_string()))
            };
            let loaded = match spec.transform {
                Transform::OnePlus => {
                    Loaded::OnePlus(convert(&GgufTensorSpec { transform: Transform::Plain, ..spec.clone() })?)
                }
                Transform::NegExpVHeads => {
                    let reorder_only = Transform::VHeadRows { skip: 0, head_len: 1 };
                    Loaded::NegExp(convert(&GgufTensorSpec { transform: reorder_only, ..spec.clone() })?)
                }
                _ => Loaded::Plain(matrix(&spec.shape, MatrixData::F32(convert(&spec)?))),
            };
            tensors.insert(spec.name.clone(), loaded);
        }
        Ok(Weights { config: cfg, tensors })
    }
}

impl<'a> Weights<'a> {
    /// Borrows every canonical tensor of a GGUF file, checking each one's shape.
    pub fn from_gguf(file: &'a GgufFile) -> Result<Weights<'a>, RefError> {
        let cfg = ModelConfig::from_gguf(file)?;
        let mut tensors = HashMap::new();
        for spec in names::gguf_tensors(&cfg) {
            let t = file.tensor(&spec.name).ok_or_else(|| RefError::Missing { name: spec.name.clone() })?;
            if t.shape != spec.shape.as_slice() {
                return Err(RefError::Shape {
                    name: spec.name.clone(),
                    expected: spec.shape.clone(),
                    found: t.shape.to_vec(),
                });
            }
            // Float tensors are converted once (exactly); block-quantized ones stay in the map
            // and are dequantized a row at a time.
            let data = if t.ty.is_quantized() {
                MatrixData::View { ty: t.ty, bytes: t.bytes }
            } else {
                MatrixData::F32(t.to_f32())
            };
            let m = matrix(&spec.shape, data);
            tensors.insert(spec.name.clone(), Loaded::Plain(m));
        }
        Ok(Weights { config: cfg, tensors })
    }

    /// Takes a matrix (or stacked experts) out of the set.
    pub fn take_matrix(&mut self, name: &str) -> Result<Matrix<'a>, RefError> {
        match self.tensors.remove(name) {
            Some(Loaded::Plain(m)) => Ok(m),
            Some(_) => Err(RefError::NotAMatrix { name: name.to_string() }),
            None => Err(RefError::Missing { name: name.to_string() }),
        }
    }

    /// Takes a tensor out of the set as values of `T`, with any value transform applied in `T`.
    pub fn take_values<T: Real>(&mut self, name: &str) -> Result<Vec<T>, RefError> {
        match self.tensors.remove(name) {
            Some(Loaded::Plain(m)) => Ok(m.all().into_iter().map(T::from_f32).collect()),
            Some(Loaded::OnePlus(w)) => Ok(w.into_iter().map(T::one_plus).collect()),
            Some(Loaded::NegExp(a)) => Ok(a.into_iter().map(T::neg_exp).collect()),
            None => Err(RefError::Missing { name: name.to_string() }),
        }
    }
}

fn matrix<'a>(shape: &[usize], data: MatrixData<'a>) -> Matrix<'a> {
    let cols = shape.last().copied().unwrap_or(1);
    let rows = shape[..shape.len().saturating_sub(1)].iter().product();
    Matrix { rows, cols, data }
}
