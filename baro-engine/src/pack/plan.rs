//! The plan of a synthetic pack: its metadata (model, provenance, tokenizer) and its tensor
//! table (names and shapes from `names::gguf_tensors`, types from the mix, value kinds), with
//! the encoded header and every tensor's place in the file computed before any data is made.
//! Never writes a file.

use crate::model::config::ModelConfig;
use crate::model::gguf::{MetaValue, DEFAULT_ALIGNMENT};
use crate::model::gguf_write::{stream_header, StreamHeader, TensorEntry};
use crate::model::names::gguf_tensors;
use crate::model::tensor::TensorType;
use crate::pack::mix::{fitted_type, wanted_type, QuantMix};
use crate::pack::tokenizer_meta::{tokenizer_metadata, TokenizerSource};
use crate::pack::values::ValueKind;
use crate::pack::PackError;

/// One tensor of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedTensor {
    pub name: String,
    /// Outermost first.
    pub shape: Vec<usize>,
    pub ty: TensorType,
    /// What the mix asked for; differs from `ty` when the shape is not a whole number of
    /// its blocks.
    pub wanted: TensorType,
    pub kind: ValueKind,
}

/// Everything about a pack except its data.
#[derive(Clone, Debug)]
pub struct PackPlan {
    pub metadata: Vec<(String, MetaValue)>,
    pub tensors: Vec<PlannedTensor>,
    pub tokenizer: TokenizerSource,
    pub header: StreamHeader,
}

impl PackPlan {
    /// The file's size in bytes.
    pub fn file_len(&self) -> u64 {
        self.header.bytes.len() as u64 + self.header.data_len
    }

    /// Tensor count and data bytes per type, in `TensorType::ALL` order, types with no tensor
    /// left out.
    pub fn histogram(&self) -> Vec<(TensorType, usize, u64)> {
        TensorType::ALL
            .into_iter()
            .map(|ty| {
                let of_ty = self.tensors.iter().zip(&self.header.sizes).filter(|(t, _)| t.ty == ty);
                (ty, of_ty.clone().count(), of_ty.map(|(_, &n)| n).sum())
            })
            .filter(|&(_, n, _)| n > 0)
            .collect()
    }

    /// The tensors whose shape did not fit the type the mix asked for.
    pub fn fallbacks(&self) -> Vec<&PlannedTensor> {
        self.tensors.iter().filter(|t| t.ty != t.wanted).collect()
    }
}

/// `qwen35moe.rope.dimension_sections` for `rope_dim` rotated dims: the real model's
/// [11, 11, 10, 0] at 64, the same proportions otherwise (text uses plain 1-D RoPE).
fn rope_sections(rope_dim: usize) -> Vec<MetaValue> {
    let pairs = rope_dim / 2;
    let s = pairs * 11 / 32;
    [s, s, pairs - 2 * s, 0].iter().map(|&v| MetaValue::I32(v as i32)).collect()
}

/// Plans a pack of `cfg` in `mix`; `seed` is recorded in the metadata.
pub fn plan(cfg: &ModelConfig, mix: QuantMix, seed: u64) -> Result<PackPlan, PackError> {
    cfg.validate().map_err(PackError::Config)?;
    let mut metadata = cfg.to_gguf_metadata().map_err(PackError::Config)?;
    let general = [
        ("general.name", MetaValue::String("baro synthetic qwen35moe".into())),
        ("general.alignment", MetaValue::U32(DEFAULT_ALIGNMENT as u32)),
        ("general.file_type", MetaValue::U32(mix.file_type())),
        ("general.quantization_version", MetaValue::U32(2)),
        ("baro.synthetic.seed", MetaValue::U64(seed)),
        ("baro.synthetic.mix", MetaValue::String(mix.name().into())),
        ("qwen35moe.rope.dimension_sections", MetaValue::Array(rope_sections(cfg.rope_dim))),
    ];
    metadata.extend(general.into_iter().map(|(k, v)| (k.to_string(), v)));
    let (tokenizer_meta, tokenizer) = tokenizer_metadata(cfg.vocab_size)?;
    metadata.extend(tokenizer_meta);

    let tensors: Vec<PlannedTensor> = gguf_tensors(cfg)
        .into_iter()
        .map(|spec| {
            let wanted = wanted_type(mix, &spec.name, cfg.n_layers);
            let ty = fitted_type(wanted, &spec.shape);
            let kind = ValueKind::of(&spec.name);
            PlannedTensor { name: spec.name, shape: spec.shape, ty, wanted, kind }
        })
        .collect();
    let entries: Vec<TensorEntry> =
        tensors.iter().map(|t| TensorEntry { name: t.name.clone(), ty: t.ty, shape: t.shape.clone() }).collect();
    let header = stream_header(&metadata, &entries, DEFAULT_ALIGNMENT as usize)
        .map_err(|message| PackError::Header { message })?;
    Ok(PackPlan { metadata, tensors, tokenizer, header })
}
