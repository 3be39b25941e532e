//! Helpers shared by the model-loading tests: fixture paths, a seeded generator, and building a
//! GGUF file from an HF fixture through `names.rs`.
#![allow(dead_code)]

pub mod exact_exp;

use std::path::PathBuf;

use baro_dsl::runtime::Device;

use baro_engine::engine::ModelSource;
use baro_engine::model::names::{self, HfTensor};
use baro_engine::model::{GgufFile, GgufWriter, HfCheckpoint, ModelConfig, TensorType};

/// The host, or with `BARO_TEST_DEVICE=cuda` (or `hip`) a GPU: the references are plain Rust,
/// so the same test proves a GPU computes the host's bits.
pub fn dev() -> Device {
    match std::env::var("BARO_TEST_DEVICE").as_deref() {
        Ok("cuda") => Device::cuda(0),
        Ok("hip") => Device::hip(0),
        _ => Device::host(),
    }
    .expect("test device")
}

/// One in-memory compile cache for the tests that lower kernels for the GPU targets offline
/// (`kernels_gpu_compile`, `kernels_q8`): they lower many of the same kernels with the same
/// options, and a kernel two tests ask for at once is compiled once (`CompileCache`'s
/// in-flight lock), so each lowering runs once per test run.
pub fn gpu_cache() -> &'static baro_dsl::cache::CompileCache {
    static CACHE: std::sync::OnceLock<baro_dsl::cache::CompileCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| baro_dsl::cache::CompileCache::new(None))
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// xorshift64*: deterministic test data without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

pub fn hf_get(ck: &HfCheckpoint) -> impl Fn(&str) -> Option<HfTensor> + '_ {
    move |name| ck.tensor(name).map(|t| HfTensor { shape: t.shape.to_vec(), data: t.to_f32() })
}

/// Every canonical tensor of the checkpoint as f32, in `gguf_tensors` order.
pub fn canonical_f32(ck: &HfCheckpoint) -> Vec<(names::GgufTensorSpec, Vec<f32>)> {
    let get = hf_get(ck);
    names::gguf_tensors(&ck.config)
        .into_iter()
        .map(|spec| {
            let data = names::hf_to_gguf(&ck.config, &spec, &get).unwrap_or_else(|e| panic!("{e}"));
            (spec, data)
        })
        .collect()
}

/// How `converter_f32` computes `ssm_a` from `A_log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NegExp {
    /// Correctly rounded (`exact_exp`): the value llama.cpp's converter stores.
    CorrectlyRounded,
    /// With baro's own `mathlib::exp` (what the engine did before; a negative control).
    BaroExp,
}

/// Every canonical tensor of the checkpoint as llama.cpp's `convert_hf_to_gguf.py` writes it
/// for `qwen35moe` with `--outtype f32`, computed here rather than through `names::hf_to_gguf`'s
/// value conversions: bf16/f16 widened to f32 first; norm weights (every `*norm.weight` but
/// `linear_attn.norm.weight`) `w + 1` as one f32 addition; `A_log` → `−exp(A_log)` by `neg_exp`.
/// Layout changes (the value-head reorder, the conv squeeze, the expert stacking) are exact
/// permutations and come from `names::hf_to_gguf`.
pub fn converter_f32(ck: &HfCheckpoint, neg_exp: NegExp) -> Vec<(names::GgufTensorSpec, Vec<f32>)> {
    let get = hf_get(ck);
    let cfg = &ck.config;
    names::gguf_tensors(cfg)
        .into_iter()
        .map(|spec| {
            let raw = |spec: &names::GgufTensorSpec| match &spec.source {
                names::HfSource::One(hf) => get(hf).unwrap_or_else(|| panic!("missing {hf}")).data,
                names::HfSource::Experts { .. } => unreachable!("experts carry no value conversion"),
            };
            let data = match spec.transform {
                names::Transform::OnePlus => raw(&spec).iter().map(|&w| w + 1.0f32).collect(),
                names::Transform::NegExpVHeads => {
                    let a: Vec<f32> = raw(&spec)
                        .iter()
                        .map(|&x| match neg_exp {
                            NegExp::CorrectlyRounded => -exact_exp::exp_f32(x),
                            NegExp::BaroExp => -baro_dsl::mathlib::exp(x),
                        })
                        .collect();
                    let order = names::v_head_order(cfg.gdn_n_key_heads, cfg.gdn_n_value_heads);
                    names::reorder_blocks(&a, 0, 1, &order)
                }
                _ => names::hf_to_gguf(cfg, &spec, &get).unwrap_or_else(|e| panic!("{e}")),
            };
            (spec, data)
        })
        .collect()
}

/// The type a tensor gets in a quantized variant: `want` for matrices whose rows are whole
/// blocks, Q8_0 where only that fits, F32 otherwise (vectors, norms, the conv weights).
pub fn pick_type(want: TensorType, shape: &[usize]) -> TensorType {
    let inner = *shape.last().unwrap();
    if shape.len() < 2 {
        return TensorType::F32;
    }
    if inner % want.block_len() == 0 {
        want
    } else if inner % TensorType::Q8_0.block_len() == 0 {
        TensorType::Q8_0
    } else {
        TensorType::F32
    }
}

/// Writes the checkpoint as GGUF with every tensor of type `ty_for(shape)`.
pub fn gguf_from(
    cfg: &ModelConfig,
    tensors: &[(names::GgufTensorSpec, Vec<f32>)],
    ty_for: &dyn Fn(&[usize]) -> TensorType,
) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (k, v) in cfg.to_gguf_metadata().expect("interval layer pattern") {
        w.add_meta(&k, v);
    }
    for (spec, data) in tensors {
        let ty = ty_for(&spec.shape);
        let bytes = baro_engine::model::quantize::quantize(ty, data).expect("whole blocks");
        w.add_tensor(&spec.name, ty, &spec.shape, bytes).expect("consistent tensor");
    }
    w.to_bytes().0
}

/// The tiny fixture from safetensors (F32).
pub fn tiny_f32() -> ModelSource {
    ModelSource::Hf(HfCheckpoint::open(&fixture("tiny")).expect("the tiny fixture"))
}

/// The tiny fixture as a GGUF in memory, every matrix Q8_0 (`pick_type`).
pub fn tiny_q8_0() -> ModelSource {
    let ck = HfCheckpoint::open(&fixture("tiny")).expect("the tiny fixture");
    let bytes = gguf_from(&ck.config, &canonical_f32(&ck), &|shape| pick_type(TensorType::Q8_0, shape));
    ModelSource::Gguf(GgufFile::from_vec(bytes).expect("the GGUF reads back"))
}
