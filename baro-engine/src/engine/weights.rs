//! Uploads a `qwen35moe` model's weights to a `Device` in the layout the decode kernels read,
//! from a Hugging Face checkpoint or a GGUF file.
//!
//! The device form is the canonical (GGUF) one of `model::names`, whatever the source:
//! - RMSNorm weights hold 1 + w: a Hugging Face weight is offset once at load in f32
//!   (`names::hf_to_gguf`'s `OnePlus`, the rounding `rmsnorm_zc` would do), so the decode path
//!   runs the plain `rmsnorm` / `head_rmsnorm` for both sources and an F32 GGUF written from a
//!   checkpoint gives the same bits;
//! - `ssm_a` = −exp(A_log) correctly rounded (`names::neg_exp`, the converter's value);
//! - the conv weight is (channel, tap);
//! - value heads are in GGUF's tiled order (so `gdn_step` runs with `tiled = true`); a Hugging
//!   Face checkpoint's rows and columns are permuted at load, in its own element type. The
//!   permutation also fixes the summation order of `ssm_out`, which is why the safetensors
//!   path does not keep the grouped order and `tiled = false`.
//!
//! Matrices keep their stored element type (F32, F16, BF16, or the raw bytes of Q8_0 / Q4_K /
//! Q5_K / Q6_K) and are never widened: the matvec kernels dequantize inside the dot. Vectors
//! the kernels read as f32 (norms, `ssm_a`, `dt_bias`, the conv weight) are widened exactly
//! from F16/BF16. Routed experts are stacked per layer as (expert, row, column), the layout
//! the expert-capable matvecs index with `ids`; gate and up are kept (or made) one fused stack
//! per layer, a GGUF file's `ffn_gate_up_exps` as stored. `load_dense` leaves the routed experts out (`experts: None`) for
//! `staging` to place; `host_experts` and `expert_shapes` give them, or their shapes from the
//! tensor directory alone, on the host. Never reads a file itself and never panics on
//! a tensor's contents or shape.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use baro_dsl::runtime::{Buffer, Device, DeviceError};
use baro_dsl::ScalarType;

use crate::kernels::embed;
use crate::model::names::{self, ExpertPart, GgufTensorSpec, HfSource, HfTensor, Transform};
use crate::model::{
    dequant, ConfigError, GgufError, GgufFile, HfCheckpoint, HfError, LayerKind, ModelConfig, TensorType,
};

/// Where weights come from.
pub enum ModelSource {
    Hf(HfCheckpoint),
    Gguf(GgufFile),
}

impl ModelSource {
    /// A folder is a Hugging Face checkpoint; a file is GGUF.
    pub fn open(path: &Path) -> Result<ModelSource, WeightError> {
        if path.is_dir() {
            Ok(ModelSource::Hf(HfCheckpoint::open(path)?))
        } else {
            Ok(ModelSource::Gguf(GgufFile::open(path)?))
        }
    }

    pub fn config(&self) -> Result<ModelConfig, WeightError> {
        match self {
            ModelSource::Hf(ck) => Ok(ck.config.clone()),
            ModelSource::Gguf(g) => Ok(ModelConfig::from_gguf(g)?),
        }
    }
}

/// What went wrong loading weights: the file's fault, except `Device` (the driver's or a full
/// device).
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    #[error("missing tensor {name} (for {canonical})")]
    Missing { name: String, canonical: String },
    #[error("tensor {name}: expected shape {expected:?}, found {found:?}")]
    Shape { name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tensor {name}: expected element type {expected}, found {found}")]
    Type { name: String, expected: &'static str, found: TensorType },
    #[error(transparent)]
    Hf(Box<HfError>),
    #[error(transparent)]
    Gguf(Box<GgufError>),
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error("tensors {first} and {second}: expected one element type (baro runs these two projections of one input as one stacked matrix), found {first_ty} and {second_ty}")]
    PairType { first: String, second: String, first_ty: TensorType, second_ty: TensorType },
    #[error("uploading {name}: {source}")]
    Device { name: String, source: Box<DeviceError> },
}

impl From<HfError> for WeightError {
    fn from(e: HfError) -> WeightError {
        WeightError::Hf(Box::new(e))
    }
}

impl From<GgufError> for WeightError {
    fn from(e: GgufError) -> WeightError {
        WeightError::Gguf(Box::new(e))
    }
}

impl From<ConfigError> for WeightError {
    fn from(e: ConfigError) -> WeightError {
        WeightError::Config(Box::new(e))
    }
}

/// A stack of `n_mats` matrices of (rows, cols) on the device, in its stored element type.
pub struct Matrix {
    pub buf: Buffer, // (mat, row, col): f32 / f16 / bf16 elements, or raw quantized blocks as u8
    pub ty: TensorType,
    pub n_mats: usize,
    pub rows: usize,
    pub cols: usize,
}

/// The gated delta net's weights (value heads tiled).
pub struct GdnWeights {
    pub qkv: Matrix,    // (q | k | v channel, hidden)
    pub gate_z: Matrix, // (v_head · value_dim, hidden)
    /// `ssm_beta` and `ssm_alpha` as one matrix (beta rows, then alpha rows): one matvec.
    pub beta_alpha: Matrix, // (beta | alpha · v_head, hidden)
    pub ssm_a: Buffer,  // (v_head) f32, −exp(A_log)
    pub dt_bias: Buffer, // (v_head) f32
    pub conv: Buffer,   // (channel, tap) f32
    pub norm: Buffer,   // (value_dim) f32, plain w
    pub out: Matrix,    // (hidden, v_head · value_dim)
}

/// Full gated attention's weights.
pub struct AttentionWeights {
    pub q: Matrix,      // (head, query | gate, head_dim) rows × hidden
    pub k: Matrix,      // (kv_head · head_dim, hidden)
    pub v: Matrix,      // (kv_head · head_dim, hidden)
    pub o: Matrix,      // (hidden, head · head_dim)
    pub q_norm: Buffer, // (head_dim) f32, 1 + w
    pub k_norm: Buffer, // (head_dim) f32, 1 + w
}

pub enum MixerWeights {
    Gdn(GdnWeights),
    Attention(AttentionWeights),
}

/// One layer's routed experts on the device, stacked by expert id. Gate and up are one fused
/// matrix per expert (its first expert_ffn rows the gate's, the last the up's, the layout of
/// a GGUF `ffn_gate_up_exps`), so one matvec launch projects both for all k experts.
pub struct ExpertMatrices {
    pub gate_up: Matrix, // (expert, gate | up · expert_ffn, hidden)
    pub down: Matrix,    // (expert, hidden, expert_ffn)
}

/// The MoE block: router, routed experts stacked by expert id, shared expert and its gate.
pub struct MoeWeights {
    pub router: Matrix,      // (expert, hidden)
    pub shared_gate: Matrix, // (1, hidden)
    /// `None` when the experts are staged (they live in pinned host memory, `engine::staging`).
    pub experts: Option<ExpertMatrices>,
    /// The shared expert's gate and up projections as one matrix (gate rows, then up rows).
    pub gate_up_shexp: Matrix, // (gate | up · shared_ffn, hidden)
    pub down_shexp: Matrix, // (hidden, shared_ffn)
}

/// The shape and element type of a stack of matrices, without its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixShape {
    pub ty: TensorType,
    pub n_mats: usize,
    pub rows: usize,
    pub cols: usize,
}

impl MatrixShape {
    /// Bytes of one matrix of the stack (rows are whole blocks).
    pub fn mat_bytes(&self) -> usize {
        self.rows * (self.cols / self.ty.block_len()) * self.ty.block_bytes()
    }
    pub fn bytes(&self) -> usize {
        self.n_mats * self.mat_bytes()
    }
}

/// A stack of matrices on the host, before upload or staging; bytes borrowed from the file
/// when no conversion was needed.
pub struct HostMatrix<'a> {
    pub shape: MatrixShape,
    pub bytes: Cow<'a, [u8]>, // (mat, row, col) in the stored element type
}

/// One layer's routed experts on the host: the fused gate-and-up stack, down.
pub type HostExperts<'a> = [HostMatrix<'a>; 2];

pub struct LayerWeights {
    pub attn_norm: Buffer,           // (hidden) f32, 1 + w
    pub post_attention_norm: Buffer, // (hidden) f32, 1 + w
    pub mixer: MixerWeights,
    pub moe: MoeWeights,
}

/// Every weight of the text model on one device.
pub struct Weights {
    pub config: ModelConfig,
    pub token_embd: Matrix, // (vocab, hidden): F32, BF16, Q8_0, Q4_K, Q5_K or Q6_K (F16 is widened to F32)
    pub output_norm: Buffer, // (hidden) f32, 1 + w
    pub output: Option<Matrix>, // (vocab, hidden); None when tied to `token_embd`
    pub layers: Vec<LayerWeights>,
}

impl Matrix {
    pub fn shape(&self) -> MatrixShape {
        MatrixShape { ty: self.ty, n_mats: self.n_mats, rows: self.rows, cols: self.cols }
    }
}

impl Weights {
    /// The output head: `output`, or the token embedding when tied.
    pub fn lm_head(&self) -> &Matrix {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Uploads every tensor of `cfg`'s model from `source` to `device`.
    pub fn load(device: &Device, source: &ModelSource, cfg: &ModelConfig) -> Result<Weights, WeightError> {
        let mut w = Weights::load_dense(device, source, cfg)?;
        for (i, layer) in w.layers.iter_mut().enumerate() {
            layer.moe.experts = Some(upload_experts(device, host_experts(source, cfg, i)?)?);
        }
        Ok(w)
    }

    /// Uploads every tensor but the routed experts (`experts` is `None` in every layer).
    pub fn load_dense(device: &Device, source: &ModelSource, cfg: &ModelConfig) -> Result<Weights, WeightError> {
        let l = Loader::new(device, source, cfg);
        let mut token_embd = l.matrix("token_embd.weight")?;
        if token_embd.ty == TensorType::F16 {
            let t = l.fetch("token_embd.weight")?;
            token_embd.buf = l.upload(
                "token_embd.weight",
                TensorType::F32,
                &f32_bytes(&dequant::to_f32(TensorType::F16, &t.bytes)),
            )?;
            token_embd.ty = TensorType::F32;
        }
        if embed::kernel_name(token_embd.ty).is_none() {
            return Err(WeightError::Type {
                name: "token_embd.weight".into(),
                expected: "F32, F16, BF16, Q8_0, Q4_K, Q5_K or Q6_K (an embedding kernel's table)",
                found: token_embd.ty,
            });
        }
        let output = if cfg.tied_embeddings { None } else { Some(l.matrix("output.weight")?) };
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for (i, kind) in cfg.layer_kinds.iter().enumerate() {
            let b = |s: &str| format!("blk.{i}.{s}");
            let mixer = match kind {
                LayerKind::Gdn => MixerWeights::Gdn(GdnWeights {
                    qkv: l.matrix(&b("attn_qkv.weight"))?,
                    gate_z: l.matrix(&b("attn_gate.weight"))?,
                    beta_alpha: l.stacked_matrix(&b("ssm_beta.weight"), &b("ssm_alpha.weight"))?,
                    ssm_a: l.vector(&b("ssm_a"))?,
                    dt_bias: l.vector(&b("ssm_dt.bias"))?,
                    conv: l.vector(&b("ssm_conv1d.weight"))?,
                    norm: l.vector(&b("ssm_norm.weight"))?,
                    out: l.matrix(&b("ssm_out.weight"))?,
                }),
                LayerKind::Attention => MixerWeights::Attention(AttentionWeights {
                    q: l.matrix(&b("attn_q.weight"))?,
                    k: l.matrix(&b("attn_k.weight"))?,
                    v: l.matrix(&b("attn_v.weight"))?,
                    o: l.matrix(&b("attn_output.weight"))?,
                    q_norm: l.vector(&b("attn_q_norm.weight"))?,
                    k_norm: l.vector(&b("attn_k_norm.weight"))?,
                }),
            };
            let moe = MoeWeights {
                router: l.matrix(&b("ffn_gate_inp.weight"))?,
                shared_gate: l.matrix(&b("ffn_gate_inp_shexp.weight"))?,
                experts: None,
                gate_up_shexp: l.stacked_matrix(&b("ffn_gate_shexp.weight"), &b("ffn_up_shexp.weight"))?,
                down_shexp: l.matrix(&b("ffn_down_shexp.weight"))?,
            };
            layers.push(LayerWeights {
                attn_norm: l.vector(&b("attn_norm.weight"))?,
                post_attention_norm: l.vector(&b("post_attention_norm.weight"))?,
                mixer,
                moe,
            });
        }
        Ok(Weights { config: cfg.clone(), token_embd, output_norm: l.vector("output_norm.weight")?, output, layers })
    }
}

/// One canonical tensor on the host before upload; bytes borrowed from the file when no
/// conversion is needed.
struct HostTensor<'a> {
    ty: TensorType,
    bytes: Cow<'a, [u8]>,
}

/// Layer `layer`'s routed experts (fused gate and up, down) on the host, in their stored
/// element types: borrowed from a GGUF file, or assembled from a checkpoint's per-expert or
/// fused tensors. Reads no device.
pub fn host_experts<'a>(
    source: &'a ModelSource,
    cfg: &'a ModelConfig,
    layer: usize,
) -> Result<HostExperts<'a>, WeightError> {
    let l = HostLoader::new(source, cfg);
    Ok([l.gate_up_exps(layer)?, l.host_matrix(&format!("blk.{layer}.ffn_down_exps.weight"))?])
}

/// The shapes and element types of every layer's routed experts (fused gate and up, down),
/// from the file's tensor directory: nothing is read or converted.
pub fn expert_shapes(source: &ModelSource, cfg: &ModelConfig) -> Result<Vec<[MatrixShape; 2]>, WeightError> {
    let l = HostLoader::new(source, cfg);
    (0..cfg.n_layers).map(|i| l.expert_shapes(i)).collect()
}

/// Uploads one layer's host experts.
pub fn upload_experts(device: &Device, [gate_up, down]: HostExperts<'_>) -> Result<ExpertMatrices, WeightError> {
    let up_one = |m: HostMatrix<'_>, what: &str| -> Result<Matrix, WeightError> {
        let buf = upload(device, what, m.shape.ty, &m.bytes)?;
        Ok(Matrix { buf, ty: m.shape.ty, n_mats: m.shape.n_mats, rows: m.shape.rows, cols: m.shape.cols })
    };
    Ok(ExpertMatrices {
        gate_up: up_one(gate_up, "routed gate and up experts")?,
        down: up_one(down, "routed down experts")?,
    })
}

/// The device element type a matrix of `ty` is stored as: its float type, or raw bytes.
pub fn storage_elem(ty: TensorType) -> ScalarType {
    match ty {
        TensorType::F32 => ScalarType::F32,
        TensorType::F16 => ScalarType::F16,
        TensorType::BF16 => ScalarType::BF16,
        _ => ScalarType::U8,
    }
}

/// A zeroed stack of `shape` on `device`.
pub fn alloc_matrix(device: &Device, shape: MatrixShape) -> Result<Matrix, DeviceError> {
    let elem = storage_elem(shape.ty);
    let buf = device.alloc(elem, shape.bytes() / elem.size_bytes())?;
    Ok(Matrix { buf, ty: shape.ty, n_mats: shape.n_mats, rows: shape.rows, cols: shape.cols })
}

/// Stacks `first` and `second` (the same number of matrices, columns and element type) into
/// one stack whose matrix i is first i's rows followed by second i's: two projections of one
/// input as one matrix (gate then up: the fused gate-and-up layout).
fn stack_rows<'a>(
    first_name: &str,
    first: HostMatrix<'a>,
    second_name: &str,
    second: HostMatrix<'a>,
) -> Result<HostMatrix<'a>, WeightError> {
    let (g, u) = (first.shape, second.shape);
    if g.ty != u.ty {
        return Err(WeightError::PairType {
            first: first_name.into(),
            second: second_name.into(),
            first_ty: g.ty,
            second_ty: u.ty,
        });
    }
    if (u.n_mats, u.cols) != (g.n_mats, g.cols) {
        return Err(WeightError::Shape {
            name: second_name.into(),
            expected: vec![g.n_mats, u.rows, g.cols],
            found: vec![u.n_mats, u.rows, u.cols],
        });
    }
    for (name, m) in [(first_name, &first), (second_name, &second)] {
        if m.bytes.len() != m.shape.bytes() {
            return Err(WeightError::Shape {
                name: name.into(),
                expected: vec![m.shape.n_mats, m.shape.rows, m.shape.cols],
                found: vec![m.bytes.len()],
            });
        }
    }
    let (gb, ub) = (g.mat_bytes(), u.mat_bytes());
    let mut bytes = Vec::with_capacity(first.bytes.len() + second.bytes.len());
    for i in 0..g.n_mats {
        bytes.extend_from_slice(&first.bytes[i * gb..(i + 1) * gb]);
        bytes.extend_from_slice(&second.bytes[i * ub..(i + 1) * ub]);
    }
    Ok(HostMatrix { shape: MatrixShape { rows: g.rows + u.rows, ..g }, bytes: Cow::Owned(bytes) })
}

fn upload(device: &Device, name: &str, ty: TensorType, bytes: &[u8]) -> Result<Buffer, WeightError> {
    device
        .upload_bytes(storage_elem(ty), bytes)
        .map_err(|source| WeightError::Device { name: name.into(), source: Box::new(source) })
}

/// Reads canonical tensors from the source on the host.
struct HostLoader<'a> {
    source: &'a ModelSource,
    cfg: &'a ModelConfig,
    specs: HashMap<String, GgufTensorSpec>,
}

/// A `HostLoader` that uploads.
struct Loader<'a> {
    device: &'a Device,
    host: HostLoader<'a>,
}

impl<'a> std::ops::Deref for Loader<'a> {
    type Target = HostLoader<'a>;
    fn deref(&self) -> &HostLoader<'a> {
        &self.host
    }
}

impl<'a> Loader<'a> {
    fn new(device: &'a Device, source: &'a ModelSource, cfg: &'a ModelConfig) -> Loader<'a> {
        Loader { device, host: HostLoader::new(source, cfg) }
    }

    /// A (stack of) matrices of the spec's shape; 1-D specs are one row.
    fn matrix(&self, name: &str) -> Result<Matrix, WeightError> {
        let m = self.host_matrix(name)?;
        let buf = self.upload(name, m.shape.ty, &m.bytes)?;
        Ok(Matrix { buf, ty: m.shape.ty, n_mats: m.shape.n_mats, rows: m.shape.rows, cols: m.shape.cols })
    }

    /// Matrices `first` and `second` (one each, same columns and element type) as one matrix:
    /// the first's rows, then the second's (two projections of one input, one launch).
    fn stacked_matrix(&self, first: &str, second: &str) -> Result<Matrix, WeightError> {
        let m = stack_rows(first, self.host_matrix(first)?, second, self.host_matrix(second)?)?;
        let buf = self.upload(first, m.shape.ty, &m.bytes)?;
        Ok(Matrix { buf, ty: m.shape.ty, n_mats: m.shape.n_mats, rows: m.shape.rows, cols: m.shape.cols })
    }

    /// An f32 vector (any shape, flattened), widened exactly from F16/BF16.
    fn vector(&self, name: &str) -> Result<Buffer, WeightError> {
        let t = self.fetch(name)?;
        match t.ty {
            TensorType::F32 => self.upload(name, TensorType::F32, &t.bytes),
            TensorType::F16 | TensorType::BF16 => {
                self.upload(name, TensorType::F32, &f32_bytes(&dequant::to_f32(t.ty, &t.bytes)))
            }
            found => Err(WeightError::Type { name: name.into(), expected: "F32, F16 or BF16", found }),
        }
    }

    fn upload(&self, name: &str, ty: TensorType, bytes: &[u8]) -> Result<Buffer, WeightError> {
        upload(self.device, name, ty, bytes)
    }
}

impl<'a> HostLoader<'a> {
    fn new(source: &'a ModelSource, cfg: &'a ModelConfig) -> HostLoader<'a> {
        let specs = names::gguf_tensors(cfg).into_iter().map(|s| (s.name.clone(), s)).collect();
        HostLoader { source, cfg, specs }
    }

    fn spec(&self, name: &str) -> Result<&GgufTensorSpec, WeightError> {
        // Every name asked for comes from the same table: a miss is a bug in this file.
        self.specs.get(name).ok_or_else(|| WeightError::Missing {
            name: name.into(),
            canonical: "the qwen35moe tensor table (a bug in baro)".into(),
        })
    }

    /// (n_mats, rows, cols) of a matrix spec; 1-D specs are one row.
    fn spec_dims(&self, name: &str) -> Result<(usize, usize, usize), WeightError> {
        match self.spec(name)?.shape.as_slice() {
            [k] => Ok((1, 1, *k)),
            [n, k] => Ok((1, *n, *k)),
            [e, n, k] => Ok((*e, *n, *k)),
            other => Err(WeightError::Shape { name: name.into(), expected: vec![0, 0], found: other.to_vec() }),
        }
    }

    /// The shape of matrix `name` stored as `ty`, checked to be whole blocks per row.
    fn matrix_shape(&self, name: &str, ty: TensorType) -> Result<MatrixShape, WeightError> {
        let (n_mats, rows, cols) = self.spec_dims(name)?;
        if ty.is_quantized() && cols % ty.block_len() != 0 {
            return Err(WeightError::Shape {
                name: name.into(),
                expected: vec![rows, cols.next_multiple_of(ty.block_len())],
                found: self.spec(name)?.shape.clone(),
            });
        }
        Ok(MatrixShape { ty, n_mats, rows, cols })
    }

    /// A (stack of) matrices of the spec's shape on the host; 1-D specs are one row.
    fn host_matrix(&self, name: &str) -> Result<HostMatrix<'a>, WeightError> {
        let t = self.fetch(name)?;
        Ok(HostMatrix { shape: self.matrix_shape(name, t.ty)?, bytes: t.bytes })
    }

    /// The GGUF file's fused `ffn_gate_up_exps` of `layer` when it has neither separate tensor.
    fn fused_gate_up(&self, layer: usize) -> Option<(String, crate::model::TensorView<'a>)> {
        let ModelSource::Gguf(g) = self.source else { return None };
        let fused = format!("blk.{layer}.ffn_gate_up_exps.weight");
        let separate = g.tensor(&format!("blk.{layer}.ffn_gate_exps.weight")).is_some()
            || g.tensor(&format!("blk.{layer}.ffn_up_exps.weight")).is_some();
        g.tensor(&fused).filter(|_| !separate).map(|t| (fused, t))
    }

    /// Layer `layer`'s routed gate and up experts as one fused stack (E, 2·I, H), each expert's
    /// gate rows then its up rows: a GGUF file's `ffn_gate_up_exps` as stored (borrowed) when
    /// it has neither separate tensor, else `ffn_gate_exps` and `ffn_up_exps` interleaved per
    /// expert in their (one) stored element type. Rows are whole blocks, so this moves bytes;
    /// nothing is widened.
    fn gate_up_exps(&self, layer: usize) -> Result<HostMatrix<'a>, WeightError> {
        let (gate, up) = (format!("blk.{layer}.ffn_gate_exps.weight"), format!("blk.{layer}.ffn_up_exps.weight"));
        let Some((fused, t)) = self.fused_gate_up(layer) else {
            return stack_rows(&gate, self.host_matrix(&gate)?, &up, self.host_matrix(&up)?);
        };
        let (e, n, k) = match self.spec(&gate)?.shape.as_slice() {
            &[e, n, k] => (e, n, k),
            other => {
                return Err(WeightError::Shape { name: gate.clone(), expected: vec![0, 0, 0], found: other.to_vec() })
            }
        };
        let expected = vec![e, 2 * n, k];
        expect_shape(&fused, &expected, t.shape)?;
        let per = n * (k / t.ty.block_len()) * t.ty.block_bytes();
        if k % t.ty.block_len() != 0 || t.bytes.len() != e * 2 * per {
            return Err(WeightError::Shape {
                name: fused,
                expected: vec![e, 2 * n, k.next_multiple_of(t.ty.block_len())],
                found: t.shape.to_vec(),
            });
        }
        Ok(HostMatrix {
            shape: MatrixShape { ty: t.ty, n_mats: e, rows: 2 * n, cols: k },
            bytes: Cow::Borrowed(t.bytes),
        })
    }

    /// The stored element type of routed-expert tensor `name` (`part` of `layer`) without
    /// reading its bytes.
    fn expert_type(&self, name: &str, layer: usize, part: ExpertPart) -> Result<TensorType, WeightError> {
        let missing = |n: String| WeightError::Missing { name: n, canonical: name.into() };
        match self.source {
            ModelSource::Gguf(g) => {
                if part != ExpertPart::Down {
                    if let Some((_, t)) = self.fused_gate_up(layer) {
                        return Ok(t.ty);
                    }
                }
                g.tensor(name).map(|t| t.ty).ok_or_else(|| missing(name.into()))
            }
            ModelSource::Hf(ck) => {
                let one = format!("model.layers.{layer}.mlp.experts.0.{}.weight", part_name(part));
                let fused = format!(
                    "model.layers.{layer}.mlp.experts.{}",
                    if part == ExpertPart::Down { "down_proj" } else { "gate_up_proj" }
                );
                ck.tensor(&one).or_else(|| ck.tensor(&fused)).map(|t| t.ty).ok_or_else(|| missing(one))
            }
        }
    }

    fn expert_shapes(&self, layer: usize) -> Result<[MatrixShape; 2], WeightError> {
        let shape = |part: ExpertPart, suffix: &str| -> Result<(String, MatrixShape), WeightError> {
            let name = format!("blk.{layer}.{suffix}");
            let shape = self.matrix_shape(&name, self.expert_type(&name, layer, part)?)?;
            Ok((name, shape))
        };
        let ((gate, g), (up, u)) =
            (shape(ExpertPart::Gate, "ffn_gate_exps.weight")?, shape(ExpertPart::Up, "ffn_up_exps.weight")?);
        if g.ty != u.ty {
            return Err(WeightError::PairType { first: gate, second: up, first_ty: g.ty, second_ty: u.ty });
        }
        Ok([MatrixShape { rows: g.rows + u.rows, ..g }, shape(ExpertPart::Down, "ffn_down_exps.weight")?.1])
    }

    /// The canonical tensor `name` in its stored element type.
    fn fetch(&self, name: &str) -> Result<HostTensor<'a>, WeightError> {
        let spec = self.spec(name)?;
        match self.source {
            ModelSource::Gguf(g) => {
                let t =
                    g.tensor(name).ok_or_else(|| WeightError::Missing { name: name.into(), canonical: name.into() })?;
                expect_shape(name, &spec.shape, t.shape)?;
                Ok(HostTensor { ty: t.ty, bytes: Cow::Borrowed(t.bytes) })
            }
            ModelSource::Hf(ck) => self.fetch_hf(ck, spec),
        }
    }

    fn fetch_hf(&self, ck: &'a HfCheckpoint, spec: &GgufTensorSpec) -> Result<HostTensor<'a>, WeightError> {
        let missing = |hf: &str| WeightError::Missing { name: hf.into(), canonical: spec.name.clone() };
        match &spec.source {
            HfSource::One(hf) => {
                let t = ck.tensor(hf).ok_or_else(|| missing(hf))?;
                expect_shape(hf, &spec.shape, t.shape)?;
                let es = t.ty.block_bytes();
                let order = names::v_head_order(self.cfg.gdn_n_key_heads, self.cfg.gdn_n_value_heads);
                let row_bytes = spec.shape[1..].iter().product::<usize>() * es;
                let bytes = match spec.transform {
                    Transform::Plain => Cow::Borrowed(t.bytes),
                    Transform::VHeadRows { skip, head_len } => {
                        Cow::Owned(names::reorder_blocks(t.bytes, skip * row_bytes, head_len * row_bytes, &order))
                    }
                    Transform::VHeadCols { head_len } => Cow::Owned(
                        t.bytes
                            .chunks_exact(row_bytes)
                            .flat_map(|row| names::reorder_blocks(row, 0, head_len * es, &order))
                            .collect(),
                    ),
                    Transform::OnePlus | Transform::NegExpVHeads => {
                        let get =
                            |n: &str| ck.tensor(n).map(|v| HfTensor { shape: v.shape.to_vec(), data: v.to_f32() });
                        let data = names::hf_to_gguf(self.cfg, spec, &get).map_err(|e| WeightError::Shape {
                            name: format!("{hf} ({e})"),
                            expected: spec.shape.clone(),
                            found: t.shape.to_vec(),
                        })?;
                        return Ok(HostTensor { ty: TensorType::F32, bytes: Cow::Owned(f32_bytes(&data)) });
                    }
                };
                Ok(HostTensor { ty: t.ty, bytes })
            }
            HfSource::Experts { layer, part } => {
                let per_expert = |e: usize| format!("model.layers.{layer}.mlp.experts.{e}.{}.weight", part_name(*part));
                let one_shape = &spec.shape[1..];
                if ck.tensor(&per_expert(0)).is_some() {
                    let mut ty = None;
                    let mut bytes = Vec::new();
                    for e in 0..self.cfg.n_experts {
                        let name = per_expert(e);
                        let t = ck.tensor(&name).ok_or_else(|| missing(&name))?;
                        expect_shape(&name, one_shape, t.shape)?;
                        match ty {
                            Some(first) if first != t.ty => {
                                return Err(WeightError::Type { name, expected: type_name(first), found: t.ty })
                            }
                            _ => ty = Some(t.ty),
                        }
                        bytes.extend_from_slice(t.bytes);
                    }
                    return Ok(HostTensor { ty: ty.unwrap_or(TensorType::F32), bytes: Cow::Owned(bytes) });
                }
                let fused = format!(
                    "model.layers.{layer}.mlp.experts.{}",
                    if *part == ExpertPart::Down { "down_proj" } else { "gate_up_proj" }
                );
                let t = ck.tensor(&fused).ok_or_else(|| missing(&per_expert(0)))?;
                if *part == ExpertPart::Down {
                    expect_shape(&fused, &spec.shape, t.shape)?;
                    return Ok(HostTensor { ty: t.ty, bytes: Cow::Borrowed(t.bytes) });
                }
                let (e, n, k) = (spec.shape[0], spec.shape[1], spec.shape[2]);
                expect_shape(&fused, &[e, 2 * n, k], t.shape)?;
                let per = n * k * t.ty.block_bytes();
                let half = if *part == ExpertPart::Gate { 0 } else { per };
                let bytes = t.bytes.chunks_exact(2 * per).flat_map(|ex| ex[half..half + per].to_vec()).collect();
                Ok(HostTensor { ty: t.ty, bytes: Cow::Owned(bytes) })
            }
        }
    }
}

fn part_name(p: ExpertPart) -> &'static str {
    match p {
        ExpertPart::Gate => "gate_proj",
        ExpertPart::Up => "up_proj",
        ExpertPart::Down => "down_proj",
    }
}

fn type_name(t: TensorType) -> &'static str {
    match t {
        TensorType::F32 => "F32 (as the other experts)",
        TensorType::F16 => "F16 (as the other experts)",
        TensorType::BF16 => "BF16 (as the other experts)",
        _ => "the other experts' type",
    }
}

/// Shapes match when equal after dropping dimensions of 1 (HF's conv [C, 1, K] and shared
/// gate [1, H] against GGUF's [C, K] and [H]).
fn expect_shape(name: &str, expected: &[usize], found: &[usize]) -> Result<(), WeightError> {
    let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    if squeeze(expected) == squeeze(found) {
        Ok(())
    } else {
        Err(WeightError::Shape { name: name.into(), expected: expected.to_vec(), found: found.to_vec() })
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
