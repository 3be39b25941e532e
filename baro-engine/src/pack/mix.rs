//! Which tensor type each tensor of a synthetic pack gets (the quant mix). Pure naming rules
//! on GGUF tensor names; never touches values.
//!
//! The community mix follows what the public Qwen3.5-35B-A3B UD-Q4_K_M packs carry
//! (`shared/reference/qwen35moe.md`): Q4_K routed gate/up experts; Q5_K routed down experts,
//! Q6_K in the first and last eighth of the layers (at least one layer at each end: llama.cpp's
//! edge layers that get more bits); Q6_K output head; Q8_0 embedding, projections and shared
//! experts; F32 norms, router, shared-expert gate, GDN alpha/beta, conv and small vectors.

use std::fmt;
use std::str::FromStr;

use crate::model::tensor::TensorType;

/// A quant mix: the rule that gives each tensor its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantMix {
    /// The community UD-Q4_K_M mix (see the module doc).
    Community,
    /// Every tensor F32.
    F32,
    /// Every tensor the community mix quantizes is Q8_0; the rest F32.
    Q8_0,
}

impl QuantMix {
    pub const ALL: [QuantMix; 3] = [QuantMix::Community, QuantMix::F32, QuantMix::Q8_0];

    pub fn name(self) -> &'static str {
        match self {
            QuantMix::Community => "community",
            QuantMix::F32 => "f32",
            QuantMix::Q8_0 => "q8_0",
        }
    }

    /// llama.cpp's `general.file_type` for a pack of this mix (Q4_K_M = 15, ALL_F32 = 0,
    /// Q8_0 = 7).
    pub fn file_type(self) -> u32 {
        match self {
            QuantMix::Community => 15,
            QuantMix::F32 => 0,
            QuantMix::Q8_0 => 7,
        }
    }
}

impl fmt::Display for QuantMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QuantMix {
    type Err = String;

    fn from_str(s: &str) -> Result<QuantMix, String> {
        QuantMix::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown quant mix: expected community, f32 or q8_0, found {s:?}"))
    }
}

/// The layer a `blk.L.*` name belongs to.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// Whether routed down experts of `layer` get Q6_K: the first and last eighth of the layers,
/// at least one at each end.
pub fn is_edge_layer(layer: usize, n_layers: usize) -> bool {
    let edge = (n_layers / 8).max(1);
    layer < edge || layer + edge >= n_layers
}

/// The type the mix asks for, before the shape is considered.
pub fn wanted_type(mix: QuantMix, name: &str, n_layers: usize) -> TensorType {
    let community = if name.ends_with("ffn_gate_exps.weight") || name.ends_with("ffn_up_exps.weight") {
        TensorType::Q4_K
    } else if name.ends_with("ffn_down_exps.weight") {
        if layer_of(name).is_some_and(|l| is_edge_layer(l, n_layers)) {
            TensorType::Q6_K
        } else {
            TensorType::Q5_K
        }
    } else if name == "output.weight" {
        TensorType::Q6_K
    } else if keeps_f32(name) {
        TensorType::F32
    } else {
        TensorType::Q8_0
    };
    match mix {
        QuantMix::Community => community,
        QuantMix::F32 => TensorType::F32,
        QuantMix::Q8_0 if community == TensorType::F32 => TensorType::F32,
        QuantMix::Q8_0 => TensorType::Q8_0,
    }
}

/// Tensors that packs keep in F32 whatever the mix: vectors, the router, GDN alpha/beta, conv.
fn keeps_f32(name: &str) -> bool {
    const F32_SUFFIXES: [&str; 8] = [
        "norm.weight",
        "ssm_a",
        "ssm_dt.bias",
        "ssm_conv1d.weight",
        "ssm_alpha.weight",
        "ssm_beta.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_inp_shexp.weight",
    ];
    F32_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// The type a tensor of `shape` (outermost first) actually gets: the wanted type when its
/// innermost dimension is a whole number of that type's blocks, else Q8_0 when it is a whole
/// number of Q8_0 blocks, else F32.
pub fn fitted_type(wanted: TensorType, shape: &[usize]) -> TensorType {
    let fallbacks: &[TensorType] = match wanted {
        TensorType::Q4_K | TensorType::Q5_K | TensorType::Q6_K => &[TensorType::Q8_0, TensorType::F32],
        TensorType::Q8_0 => &[TensorType::F32],
        TensorType::F32 | TensorType::F16 | TensorType::BF16 => &[],
    };
    std::iter::once(wanted)
        .chain(fallbacks.iter().copied())
        .find(|t| t.bytes_for(shape).is_some())
        .unwrap_or(TensorType::F32)
}
