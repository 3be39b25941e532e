//! The mapping between Hugging Face tensor names and values and GGUF (`qwen35moe`, as llama.cpp's
//! converter writes it) tensor names and values, written down as data (`gguf_tensors`) and as
//! the two conversions. The engine's canonical form is the GGUF one:
//!
//! | HF (`model.` prefix) | GGUF | value |
//! |---|---|---|
//! | `embed_tokens.weight`, `lm_head.weight`, `norm.weight` | `token_embd.weight`, `output.weight`, `output_norm.weight` | norm: 1 + w |
//! | `layers.L.input_layernorm`, `.post_attention_layernorm` | `blk.L.attn_norm`, `.post_attention_norm` | 1 + w |
//! | `self_attn.{q,k,v,o}_proj`, `.{q,k}_norm` | `attn_q`, `attn_k`, `attn_v`, `attn_output`, `attn_{q,k}_norm` | norms 1 + w |
//! | `linear_attn.in_proj_qkv` | `attn_qkv` | V rows reordered |
//! | `linear_attn.in_proj_z`, `.in_proj_b`, `.in_proj_a` | `attn_gate`, `ssm_beta`, `ssm_alpha` | rows reordered |
//! | `linear_attn.A_log`, `.dt_bias` | `ssm_a`, `ssm_dt.bias` | ssm_a = −exp(A_log); reordered |
//! | `linear_attn.conv1d.weight` [C, 1, K] | `ssm_conv1d.weight` [C, K] | squeezed; V channels reordered |
//! | `linear_attn.norm` (gated) | `ssm_norm` | plain w (no offset) |
//! | `linear_attn.out_proj` | `ssm_out` | input columns reordered |
//! | `mlp.gate`, `mlp.shared_expert_gate` | `ffn_gate_inp`, `ffn_gate_inp_shexp` | `shexp` gate [1, H] → [H] |
//! | `mlp.experts.E.{gate,up,down}_proj` (or fused `experts.gate_up_proj` [E, 2I, H], `experts.down_proj`) | `ffn_{gate,up,down}_exps` [E, ·, ·] | stacked; fused gate_up split (gate first) |
//! | `mlp.shared_expert.{gate,up,down}_proj` | `ffn_{gate,up,down}_shexp` | |
//!
//! Value-head reordering: HF groups the value heads by key head (head `g·r + j` is the j-th of
//! key head g, r = value heads per key head); GGUF tiles them (position `j·n_key + g`), so that
//! value head h reads key head `h % n_key` after the reorder (before it: `h / r`).
//!
//! The value conversions are llama.cpp's converter's (`convert_hf_to_gguf.py`, which widens
//! bf16 to f32 first): `1 + w` is one f32 addition, and `ssm_a = −exp(A_log)` is correctly
//! rounded (`neg_exp`: f64 `exp`, rounded once to f32), so a GGUF converted from a checkpoint
//! and the checkpoint itself give the engine the same bits. The kernels keep baro's own `exp`;
//! only load-time conversions use the platform's f64 `exp`. This module must never read
//! files; it converts values handed to it.

use crate::model::config::{LayerKind, ModelConfig};

/// How a GGUF tensor's values are made from its HF source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    /// Same values, same layout.
    Plain,
    /// 1 + w (zero-centred RMSNorm weights).
    OnePlus,
    /// −exp(A_log), then value heads reordered.
    NegExpVHeads,
    /// Rows after the first `skip` are value heads of `head_len` rows each: reordered.
    VHeadRows { skip: usize, head_len: usize },
    /// Columns are value heads of `head_len` columns each: reordered.
    VHeadCols { head_len: usize },
}

/// Which part of the routed experts a stacked GGUF tensor holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpertPart {
    Gate,
    Up,
    Down,
}

impl ExpertPart {
    fn hf(self) -> &'static str {
        match self {
            ExpertPart::Gate => "gate_proj",
            ExpertPart::Up => "up_proj",
            ExpertPart::Down => "down_proj",
        }
    }
}

/// Where a GGUF tensor's values come from in an HF checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HfSource {
    /// One tensor (name without the `model.language_model.` prefix).
    One(String),
    /// The routed experts of a layer: `model.layers.L.mlp.experts.E.{part}.weight` for every
    /// E, or the fused `experts.gate_up_proj` / `experts.down_proj`.
    Experts { layer: usize, part: ExpertPart },
}

/// One tensor of the canonical (GGUF) model.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufTensorSpec {
    pub name: String,
    /// Outermost first.
    pub shape: Vec<usize>,
    pub source: HfSource,
    pub transform: Transform,
}

/// Every tensor of a `qwen35moe` model, in file order, with its shape and HF source.
pub fn gguf_tensors(cfg: &ModelConfig) -> Vec<GgufTensorSpec> {
    let h = cfg.hidden_dim;
    let mut out = Vec::new();
    let mut push = |name: String, shape: Vec<usize>, source: HfSource, transform: Transform| {
        out.push(GgufTensorSpec { name, shape, source, transform });
    };
    let one = |s: String| HfSource::One(s);
    push(
        "token_embd.weight".into(),
        vec![cfg.vocab_size, h],
        one("model.embed_tokens.weight".into()),
        Transform::Plain,
    );
    for (l, kind) in cfg.layer_kinds.iter().enumerate() {
        let b = |s: &str| format!("blk.{l}.{s}");
        let m = |s: &str| format!("model.layers.{l}.{s}");
        push(b("attn_norm.weight"), vec![h], one(m("input_layernorm.weight")), Transform::OnePlus);
        push(b("post_attention_norm.weight"), vec![h], one(m("post_attention_layernorm.weight")), Transform::OnePlus);
        match kind {
            LayerKind::Attention => {
                let (nh, nkv, hd) = (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
                push(b("attn_q.weight"), vec![2 * nh * hd, h], one(m("self_attn.q_proj.weight")), Transform::Plain);
                push(b("attn_k.weight"), vec![nkv * hd, h], one(m("self_attn.k_proj.weight")), Transform::Plain);
                push(b("attn_v.weight"), vec![nkv * hd, h], one(m("self_attn.v_proj.weight")), Transform::Plain);
                push(b("attn_output.weight"), vec![h, nh * hd], one(m("self_attn.o_proj.weight")), Transform::Plain);
                push(b("attn_q_norm.weight"), vec![hd], one(m("self_attn.q_norm.weight")), Transform::OnePlus);
                push(b("attn_k_norm.weight"), vec![hd], one(m("self_attn.k_norm.weight")), Transform::OnePlus);
            }
            LayerKind::Gdn => {
                let (nv, vd) = (cfg.gdn_n_value_heads, cfg.gdn_value_dim);
                let qk = 2 * cfg.gdn_n_key_heads * cfg.gdn_key_dim;
                let vhead = |skip, head_len| Transform::VHeadRows { skip, head_len };
                push(
                    b("attn_qkv.weight"),
                    vec![cfg.gdn_conv_dim(), h],
                    one(m("linear_attn.in_proj_qkv.weight")),
                    vhead(qk, vd),
                );
                push(b("attn_gate.weight"), vec![nv * vd, h], one(m("linear_attn.in_proj_z.weight")), vhead(0, vd));
                push(b("ssm_beta.weight"), vec![nv, h], one(m("linear_attn.in_proj_b.weight")), vhead(0, 1));
                push(b("ssm_alpha.weight"), vec![nv, h], one(m("linear_attn.in_proj_a.weight")), vhead(0, 1));
                push(b("ssm_a"), vec![nv], one(m("linear_attn.A_log")), Transform::NegExpVHeads);
                push(b("ssm_dt.bias"), vec![nv], one(m("linear_attn.dt_bias")), vhead(0, 1));
                push(
                    b("ssm_conv1d.weight"),
                    vec![cfg.gdn_conv_dim(), cfg.conv_kernel],
                    one(m("linear_attn.conv1d.weight")),
                    vhead(qk, vd),
                );
                push(b("ssm_norm.weight"), vec![vd], one(m("linear_attn.norm.weight")), Transform::Plain);
                push(
                    b("ssm_out.weight"),
                    vec![h, nv * vd],
                    one(m("linear_attn.out_proj.weight")),
                    Transform::VHeadCols { head_len: vd },
                );
            }
        }
        let (e, fi, fs) = (cfg.n_experts, cfg.expert_ffn_dim, cfg.shared_ffn_dim);
        push(b("ffn_gate_inp.weight"), vec![e, h], one(m("mlp.gate.weight")), Transform::Plain);
        push(b("ffn_gate_inp_shexp.weight"), vec![h], one(m("mlp.shared_expert_gate.weight")), Transform::Plain);
        let experts = |part| HfSource::Experts { layer: l, part };
        push(b("ffn_gate_exps.weight"), vec![e, fi, h], experts(ExpertPart::Gate), Transform::Plain);
        push(b("ffn_up_exps.weight"), vec![e, fi, h], experts(ExpertPart::Up), Transform::Plain);
        push(b("ffn_down_exps.weight"), vec![e, h, fi], experts(ExpertPart::Down), Transform::Plain);
        push(b("ffn_gate_shexp.weight"), vec![fs, h], one(m("mlp.shared_expert.gate_proj.weight")), Transform::Plain);
        push(b("ffn_up_shexp.weight"), vec![fs, h], one(m("mlp.shared_expert.up_proj.weight")), Transform::Plain);
        push(b("ffn_down_shexp.weight"), vec![h, fs], one(m("mlp.shared_expert.down_proj.weight")), Transform::Plain);
    }
    push("output_norm.weight".into(), vec![h], one("model.norm.weight".into()), Transform::OnePlus);
    if !cfg.tied_embeddings {
        push("output.weight".into(), vec![cfg.vocab_size, h], one("lm_head.weight".into()), Transform::Plain);
    }
    out
}

/// The HF name of a single-source GGUF tensor, by looking it up in the table.
pub fn gguf_to_hf_name(cfg: &ModelConfig, gguf: &str) -> Option<String> {
    gguf_tensors(cfg).into_iter().find(|s| s.name == gguf).and_then(|s| match s.source {
        HfSource::One(n) => Some(n),
        HfSource::Experts { .. } => None,
    })
}

/// The GGUF name an HF tensor ends up in (per-expert and fused expert tensors included).
pub fn hf_to_gguf_name(cfg: &ModelConfig, hf: &str) -> Option<String> {
    gguf_tensors(cfg)
        .into_iter()
        .find(|s| match &s.source {
            HfSource::One(n) => n == hf,
            HfSource::Experts { layer, part } => {
                let prefix = format!("model.layers.{layer}.mlp.experts.");
                hf.strip_prefix(&prefix).is_some_and(|rest| {
                    let per_expert = rest.split_once('.').is_some_and(|(e, tail)| {
                        e.parse::<usize>().is_ok_and(|e| e < cfg.n_experts) && tail == format!("{}.weight", part.hf())
                    });
                    let fused = match part {
                        ExpertPart::Gate | ExpertPart::Up => rest == "gate_up_proj",
                        ExpertPart::Down => rest == "down_proj",
                    };
                    per_expert || fused
                })
            }
        })
        .map(|s| s.name)
}

/// `−exp(x)` correctly rounded to f32, the value llama.cpp's converter stores for `A_log`.
///
/// `exp` is evaluated in f64 and rounded once. That is enough for every f32 input: with the
/// f64 result within 1 f64 ulp of the true value, it can round to the wrong f32 only when the
/// true value lies within 2⁻²⁹ f32 ulp of a midpoint between two f32s; an exhaustive scan of
/// every f32 in [−104, 89] (everything else rounds to 0 or ∞) found 1,086 inputs within 10⁻⁶
/// ulp of one and the f64 result on the right side for each (`tests/it/model_exp_rounding.rs`
/// checks them, a dense sample, the fixtures' values, and every input of the range: the 39,991
/// whose f64 result lies within 2 f64 ulps of a boundary, or rounds to 0 or ∞, against a
/// double-double reference, all correct).
///
/// The converter computes in the checkpoint's type after widening bf16 to f32; an F16
/// checkpoint's `A_log` and norm weights it would convert in f16 (`−exp`, `1 + w` rounded to
/// f16), which this function and `OnePlus` do not: for F16 checkpoints the safetensors path
/// keeps f32 (what transformers computes) and may differ from such a GGUF in the last bits.
pub fn neg_exp(x: f32) -> f32 {
    -((x as f64).exp() as f32)
}

/// The inverse of `neg_exp` (`ln(−a)` in f64, rounded once), exact up to rounding.
pub fn neg_exp_inverse(a: f32) -> f32 {
    ((-a) as f64).ln() as f32
}

/// For tiled position p, the grouped (HF) value head it holds.
pub fn v_head_order(n_key_heads: usize, n_value_heads: usize) -> Vec<usize> {
    let r = n_value_heads / n_key_heads;
    (0..n_value_heads).map(|p| (p % n_key_heads) * r + p / n_key_heads).collect()
}

fn invert(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (p, &h) in perm.iter().enumerate() {
        inv[h] = p;
    }
    inv
}

/// Reorders blocks of `block` consecutive elements after the first `skip` elements: output
/// block p is input block `order[p]`. Works on any element type (bytes included).
pub fn reorder_blocks<T: Copy>(data: &[T], skip: usize, block: usize, order: &[usize]) -> Vec<T> {
    let mut out = data[..skip].to_vec();
    for &src in order {
        out.extend_from_slice(&data[skip + src * block..skip + (src + 1) * block]);
    }
    out.extend_from_slice(&data[skip + order.len() * block..]);
    out
}

/// Applies `transform` (or its inverse) to row-major data of `shape` (GGUF shape).
fn apply(cfg: &ModelConfig, transform: Transform, shape: &[usize], data: &[f32], inverse: bool) -> Vec<f32> {
    let order = v_head_order(cfg.gdn_n_key_heads, cfg.gdn_n_value_heads);
    let order = if inverse { invert(&order) } else { order };
    let row_len: usize = shape[1..].iter().product();
    match transform {
        Transform::Plain => data.to_vec(),
        Transform::OnePlus if inverse => data.iter().map(|&x| x - 1.0).collect(),
        Transform::OnePlus => data.iter().map(|&w| 1.0 + w).collect(),
        Transform::NegExpVHeads if inverse => {
            reorder_blocks(data, 0, 1, &order).iter().map(|&a| neg_exp_inverse(a)).collect()
        }
        Transform::NegExpVHeads => {
            let a: Vec<f32> = data.iter().map(|&x| neg_exp(x)).collect();
            reorder_blocks(&a, 0, 1, &order)
        }
        Transform::VHeadRows { skip, head_len } => reorder_blocks(data, skip * row_len, head_len * row_len, &order),
        Transform::VHeadCols { head_len } => {
            data.chunks_exact(row_len).flat_map(|row| reorder_blocks(row, 0, head_len, &order)).collect()
        }
    }
}

/// A tensor as read from an HF checkpoint, converted to f32.
pub struct HfTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Errors converting between the conventions: the checkpoint's fault.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NameError {
    #[error("missing tensor {hf:?} (for {gguf})")]
    Missing { hf: String, gguf: String },
    #[error("tensor {hf:?} (for {gguf}): expected {expected} elements, found shape {found:?}")]
    Shape { hf: String, gguf: String, expected: usize, found: Vec<usize> },
}

/// Builds the GGUF tensor of `spec` (f32 values) from HF tensors fetched by `get`.
pub fn hf_to_gguf(
    cfg: &ModelConfig,
    spec: &GgufTensorSpec,
    get: &dyn Fn(&str) -> Option<HfTensor>,
) -> Result<Vec<f32>, NameError> {
    let n: usize = spec.shape.iter().product();
    let fetch = |hf: &str, expected: usize| -> Result<Vec<f32>, NameError> {
        let t = get(hf).ok_or_else(|| NameError::Missing { hf: hf.into(), gguf: spec.name.clone() })?;
        if t.data.len() != expected {
            return Err(NameError::Shape { hf: hf.into(), gguf: spec.name.clone(), expected, found: t.shape });
        }
        Ok(t.data)
    };
    match &spec.source {
        HfSource::One(hf) => Ok(apply(cfg, spec.transform, &spec.shape, &fetch(hf, n)?, false)),
        HfSource::Experts { layer, part } => {
            let per = n / cfg.n_experts;
            let per_expert = |e: usize| format!("model.layers.{layer}.mlp.experts.{e}.{}.weight", part.hf());
            if get(&per_expert(0)).is_some() {
                let mut out = Vec::with_capacity(n);
                for e in 0..cfg.n_experts {
                    out.extend(fetch(&per_expert(e), per)?);
                }
                return Ok(out);
            }
            let fused = format!(
                "model.layers.{layer}.mlp.experts.{}",
                if *part == ExpertPart::Down { "down_proj" } else { "gate_up_proj" }
            );
            if *part == ExpertPart::Down {
                return fetch(&fused, n);
            }
            let all = fetch(&fused, 2 * n)?;
            let half = if *part == ExpertPart::Gate { 0 } else { per };
            Ok(all.chunks_exact(2 * per).flat_map(|ex| ex[half..half + per].to_vec()).collect())
        }
    }
}

/// The inverse of `hf_to_gguf`: the HF tensors (per-expert form for experts) with their HF
/// shapes. Exact for every permutation; `OnePlus` and `NegExpVHeads` invert up to rounding.
pub fn gguf_to_hf(cfg: &ModelConfig, spec: &GgufTensorSpec, data: &[f32]) -> Vec<(String, HfTensor)> {
    match &spec.source {
        HfSource::One(hf) => {
            let shape = match (spec.name.as_str(), spec.shape.as_slice()) {
                (n, [c, k]) if n.ends_with("ssm_conv1d.weight") => vec![*c, 1, *k],
                (n, [h]) if n.ends_with("ffn_gate_inp_shexp.weight") => vec![1, *h],
                (_, s) => s.to_vec(),
            };
            vec![(hf.clone(), HfTensor { shape, data: apply(cfg, spec.transform, &spec.shape, data, true) })]
        }
        HfSource::Experts { layer, part } => {
            let per = data.len() / cfg.n_experts;
            data.chunks_exact(per)
                .enumerate()
                .map(|(e, chunk)| {
                    let name = format!("model.layers.{layer}.mlp.experts.{e}.{}.weight", part.hf());
                    (name, HfTensor { shape: spec.shape[1..].to_vec(), data: chunk.to_vec() })
                })
                .collect()
        }
    }
}
