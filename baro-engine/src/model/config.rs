//! The model configuration of a `qwen35moe` model, read from a Hugging Face `config.json` or
//! from GGUF metadata, and validated: a value that is missing, of the wrong type or
//! inconsistent with another gives a `ConfigError` naming the key, what was expected and what
//! was found. Holds numbers only; never touches weights.

use serde_json::Value;

use crate::model::gguf::{GgufFile, MetaValue};

/// The GGUF architecture name.
pub const GGUF_ARCH: &str = "qwen35moe";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerKind {
    /// Gated delta net (linear attention).
    Gdn,
    /// Full gated attention.
    Attention,
}

/// Errors in a model configuration: the file's fault.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("bad config json: {0}")]
    Json(String),
    #[error("unknown architecture: expected {expected}, found {found:?}")]
    UnknownArchitecture { expected: &'static str, found: String },
    #[error("bad config: {key} is missing")]
    Missing { key: String },
    #[error("bad config: {key}: expected {expected}, found {found}")]
    WrongType { key: String, expected: &'static str, found: String },
    #[error("inconsistent config: {what}: expected {expected}, found {found}")]
    Invalid { what: String, expected: String, found: String },
}

/// Everything the engine needs to know about a model's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub vocab_size: usize,
    pub hidden_dim: usize,
    pub n_layers: usize,
    pub layer_kinds: Vec<LayerKind>,
    pub rms_eps: f32,
    pub context_length: usize,
    /// Full attention: query heads, kv heads, head dim; the first `rope_dim` dims of each head
    /// rotate with base `rope_theta`; `q_proj` gives query and output gate per head.
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub rope_dim: usize,
    pub rope_theta: f64,
    /// Gated delta net: key heads × key dim, value heads × value dim, conv kernel length.
    pub gdn_n_key_heads: usize,
    pub gdn_n_value_heads: usize,
    pub gdn_key_dim: usize,
    pub gdn_value_dim: usize,
    pub conv_kernel: usize,
    /// Mixture of experts: routed experts, experts per token, their intermediate size, the
    /// shared expert's intermediate size.
    pub n_experts: usize,
    pub n_experts_used: usize,
    pub expert_ffn_dim: usize,
    pub shared_ffn_dim: usize,
    /// The output head is the token embedding (no `lm_head` / `output.weight` tensor).
    pub tied_embeddings: bool,
}

impl ModelConfig {
    /// Channels of the GDN input projection and conv: q | k | v.
    pub fn gdn_conv_dim(&self) -> usize {
        2 * self.gdn_n_key_heads * self.gdn_key_dim + self.gdn_n_value_heads * self.gdn_value_dim
    }

    /// The delta rule's query scale, 1/√dk rounded once to f32: the decode step and the
    /// batched scan must pass the same bits.
    pub fn gdn_q_scale(&self) -> f32 {
        (1.0 / (self.gdn_key_dim as f64).sqrt()) as f32
    }

    /// Layer kinds from an interval: layer i is attention iff (i + 1) % interval == 0.
    pub fn kinds_from_interval(n_layers: usize, interval: usize) -> Vec<LayerKind> {
        (0..n_layers)
            .map(|i| if interval > 0 && (i + 1) % interval == 0 { LayerKind::Attention } else { LayerKind::Gdn })
            .collect()
    }

    /// The interval that reproduces `layer_kinds`, if one does.
    pub fn full_attention_interval(&self) -> Option<usize> {
        (1..=self.n_layers).find(|&k| ModelConfig::kinds_from_interval(self.n_layers, k) == self.layer_kinds)
    }

    /// Reads a Hugging Face `config.json` (a text config, or a multimodal one with `text_config`).
    pub fn from_hf_json(text: &str) -> Result<ModelConfig, ConfigError> {
        let root: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
        let arch_ok = |v: &Value| {
            let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
            let archs = v.get("architectures").and_then(Value::as_array).cloned().unwrap_or_default();
            model_type.starts_with("qwen3_5_moe")
                || archs.iter().any(|a| a.as_str().is_some_and(|s| s.starts_with("Qwen3_5Moe")))
        };
        if !arch_ok(&root) {
            let found = root.get("model_type").map(|v| v.to_string()).unwrap_or_else(|| "no model_type".into());
            return Err(ConfigError::UnknownArchitecture {
                expected: "model_type qwen3_5_moe_text or qwen3_5_moe",
                found,
            });
        }
        let c = root.get("text_config").unwrap_or(&root);
        let j = Json(c);
        let n_layers = j.usize("num_hidden_layers")?;
        let layer_kinds = match c.get("layer_types") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v.as_str() {
                    Some("linear_attention") => Ok(LayerKind::Gdn),
                    Some("full_attention") => Ok(LayerKind::Attention),
                    _ => Err(ConfigError::WrongType {
                        key: format!("layer_types[{i}]"),
                        expected: "\"linear_attention\" or \"full_attention\"",
                        found: v.to_string(),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(other) => {
                return Err(ConfigError::WrongType {
                    key: "layer_types".into(),
                    expected: "an array",
                    found: other.to_string(),
                })
            }
            None => ModelConfig::kinds_from_interval(n_layers, j.usize_or("full_attention_interval", 4)?),
        };
        let rope = c.get("rope_parameters").filter(|v| v.is_object());
        let rope_j = rope.map(Json);
        let theta = match rope_j.as_ref().map(|r| r.f64_opt("rope_theta")).transpose()?.flatten() {
            Some(t) => t,
            None => j.f64("rope_theta")?,
        };
        let factor = match rope_j.as_ref().map(|r| r.f64_opt("partial_rotary_factor")).transpose()?.flatten() {
            Some(f) => f,
            None => j.f64_opt("partial_rotary_factor")?.unwrap_or(0.25),
        };
        let head_dim = j.usize("head_dim")?;
        let rope_dim_f = head_dim as f64 * factor;
        if rope_dim_f.fract() != 0.0 || rope_dim_f < 0.0 {
            return Err(ConfigError::Invalid {
                what: "head_dim × partial_rotary_factor".into(),
                expected: "a whole number of rotated dims".into(),
                found: format!("{head_dim} × {factor} = {rope_dim_f}"),
            });
        }
        let cfg = ModelConfig {
            vocab_size: j.usize("vocab_size")?,
            hidden_dim: j.usize("hidden_size")?,
            n_layers,
            layer_kinds,
            rms_eps: j.f64("rms_norm_eps")? as f32,
            context_length: j.usize_or("max_position_embeddings", 0)?,
            n_heads: j.usize("num_attention_heads")?,
            n_kv_heads: j.usize("num_key_value_heads")?,
            head_dim,
            rope_dim: rope_dim_f as usize,
            rope_theta: theta,
            gdn_n_key_heads: j.usize("linear_num_key_heads")?,
            gdn_n_value_heads: j.usize("linear_num_value_heads")?,
            gdn_key_dim: j.usize("linear_key_head_dim")?,
            gdn_value_dim: j.usize("linear_value_head_dim")?,
            conv_kernel: j.usize("linear_conv_kernel_dim")?,
            n_experts: j.usize("num_experts")?,
            n_experts_used: j.usize("num_experts_per_tok")?,
            expert_ffn_dim: j.usize("moe_intermediate_size")?,
            shared_ffn_dim: j.usize("shared_expert_intermediate_size")?,
            tied_embeddings: c
                .get("tie_word_embeddings")
                .or_else(|| root.get("tie_word_embeddings"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads GGUF metadata (`qwen35moe.*` keys). Tied embeddings: no `output.weight` tensor.
    pub fn from_gguf(file: &GgufFile) -> Result<ModelConfig, ConfigError> {
        let arch = match file.meta("general.architecture") {
            Some(MetaValue::String(s)) => s.clone(),
            Some(v) => {
                return Err(ConfigError::WrongType {
                    key: "general.architecture".into(),
                    expected: "a string",
                    found: format!("{v:?}"),
                })
            }
            None => return Err(ConfigError::Missing { key: "general.architecture".into() }),
        };
        if arch != GGUF_ARCH {
            return Err(ConfigError::UnknownArchitecture { expected: "general.architecture qwen35moe", found: arch });
        }
        let m = Meta(file);
        let n_layers = m.usize("block_count")?;
        let interval = m.usize("full_attention_interval")?;
        let inner = m.usize("ssm.inner_size")?;
        let n_value_heads = m.usize("ssm.time_step_rank")?;
        if n_value_heads == 0 || inner % n_value_heads != 0 {
            return Err(ConfigError::Invalid {
                what: "qwen35moe.ssm.inner_size / qwen35moe.ssm.time_step_rank".into(),
                expected: "a whole value-head dim".into(),
                found: format!("{inner} / {n_value_heads}"),
            });
        }
        let key_length = m.usize("attention.key_length")?;
        let value_length = m.usize("attention.value_length")?;
        if key_length != value_length {
            return Err(ConfigError::Invalid {
                what: "qwen35moe.attention.key_length vs value_length".into(),
                expected: "equal".into(),
                found: format!("{key_length} vs {value_length}"),
            });
        }
        let vocab_size = match file.tensor_info("token_embd.weight") {
            Some(t) if t.shape.len() == 2 => t.shape[0],
            Some(t) => {
                return Err(ConfigError::Invalid {
                    what: "token_embd.weight shape".into(),
                    expected: "2 dims".into(),
                    found: format!("{:?}", t.shape),
                })
            }
            None => return Err(ConfigError::Missing { key: "tensor token_embd.weight (the vocab size)".into() }),
        };
        let cfg = ModelConfig {
            vocab_size,
            hidden_dim: m.usize("embedding_length")?,
            n_layers,
            layer_kinds: ModelConfig::kinds_from_interval(n_layers, interval),
            rms_eps: m.f64("attention.layer_norm_rms_epsilon")? as f32,
            context_length: m.usize("context_length")?,
            n_heads: m.usize("attention.head_count")?,
            n_kv_heads: m.usize("attention.head_count_kv")?,
            head_dim: key_length,
            rope_dim: m.usize("rope.dimension_count")?,
            rope_theta: m.f64("rope.freq_base")?,
            gdn_n_key_heads: m.usize("ssm.group_count")?,
            gdn_n_value_heads: n_value_heads,
            gdn_key_dim: m.usize("ssm.state_size")?,
            gdn_value_dim: inner / n_value_heads,
            conv_kernel: m.usize("ssm.conv_kernel")?,
            n_experts: m.usize("expert_count")?,
            n_experts_used: m.usize("expert_used_count")?,
            expert_ffn_dim: m.usize("expert_feed_forward_length")?,
            shared_ffn_dim: m.usize("expert_shared_feed_forward_length")?,
            tied_embeddings: file.tensor_info("output.weight").is_none(),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// The `qwen35moe.*` and `general.architecture` metadata that `from_gguf` reads back.
    /// Fails when the layer pattern is not a plain interval (GGUF stores only the interval).
    pub fn to_gguf_metadata(&self) -> Result<Vec<(String, MetaValue)>, ConfigError> {
        let interval = self.full_attention_interval().ok_or_else(|| ConfigError::Invalid {
            what: "layer kinds".into(),
            expected: "attention exactly at layers i with (i + 1) % interval == 0".into(),
            found: format!("{:?}", self.layer_kinds),
        })?;
        let u = |v: usize| MetaValue::U32(v as u32);
        let k = |s: &str| format!("{GGUF_ARCH}.{s}");
        Ok(vec![
            ("general.architecture".into(), MetaValue::String(GGUF_ARCH.into())),
            (k("context_length"), u(self.context_length)),
            (k("embedding_length"), u(self.hidden_dim)),
            (k("block_count"), u(self.n_layers)),
            (k("attention.layer_norm_rms_epsilon"), MetaValue::F32(self.rms_eps)),
            (k("attention.head_count"), u(self.n_heads)),
            (k("attention.head_count_kv"), u(self.n_kv_heads)),
            (k("attention.key_length"), u(self.head_dim)),
            (k("attention.value_length"), u(self.head_dim)),
            (k("rope.dimension_count"), u(self.rope_dim)),
            (k("rope.freq_base"), MetaValue::F32(self.rope_theta as f32)),
            (k("ssm.conv_kernel"), u(self.conv_kernel)),
            (k("ssm.inner_size"), u(self.gdn_n_value_heads * self.gdn_value_dim)),
            (k("ssm.state_size"), u(self.gdn_key_dim)),
            (k("ssm.time_step_rank"), u(self.gdn_n_value_heads)),
            (k("ssm.group_count"), u(self.gdn_n_key_heads)),
            (k("expert_count"), u(self.n_experts)),
            (k("expert_used_count"), u(self.n_experts_used)),
            (k("expert_feed_forward_length"), u(self.expert_ffn_dim)),
            (k("expert_shared_feed_forward_length"), u(self.shared_ffn_dim)),
            (k("full_attention_interval"), u(interval)),
        ])
    }

    /// Checks the relations between fields.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_dim", self.hidden_dim),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("head_dim", self.head_dim),
            ("gdn_n_key_heads", self.gdn_n_key_heads),
            ("gdn_n_value_heads", self.gdn_n_value_heads),
            ("gdn_key_dim", self.gdn_key_dim),
            ("gdn_value_dim", self.gdn_value_dim),
            ("conv_kernel", self.conv_kernel),
            ("n_experts", self.n_experts),
            ("n_experts_used", self.n_experts_used),
            ("expert_ffn_dim", self.expert_ffn_dim),
            ("shared_ffn_dim", self.shared_ffn_dim),
        ];
        for (what, v) in positive {
            if v == 0 {
                return Err(invalid(what, "a positive number", v));
            }
        }
        if self.layer_kinds.len() != self.n_layers {
            return Err(invalid(
                "number of layer kinds",
                format!("n_layers = {}", self.n_layers),
                self.layer_kinds.len(),
            ));
        }
        if self.n_heads % self.n_kv_heads != 0 {
            return Err(invalid("n_heads % n_kv_heads", "0", format!("{} % {}", self.n_heads, self.n_kv_heads)));
        }
        if self.gdn_n_value_heads % self.gdn_n_key_heads != 0 {
            return Err(invalid(
                "gdn_n_value_heads % gdn_n_key_heads",
                "0",
                format!("{} % {}", self.gdn_n_value_heads, self.gdn_n_key_heads),
            ));
        }
        if self.rope_dim > self.head_dim || self.rope_dim % 2 != 0 {
            return Err(invalid("rope_dim", format!("even and at most head_dim = {}", self.head_dim), self.rope_dim));
        }
        if self.hidden_dim > crate::kernels::norm::NORM_MAX_DIM {
            return Err(invalid(
                "hidden_dim",
                format!("at most {} (the norms keep a row in workgroup memory)", crate::kernels::norm::NORM_MAX_DIM),
                self.hidden_dim,
            ));
        }
        if self.n_experts > crate::kernels::moe::ROUTER_MAX_EXPERTS {
            return Err(invalid(
                "n_experts",
                format!("at most {} (the router kernel's workgroup scratch)", crate::kernels::moe::ROUTER_MAX_EXPERTS),
                self.n_experts,
            ));
        }
        if self.head_dim > crate::kernels::attention::ATTENTION_ROWS_MAX_HEAD_DIM {
            return Err(invalid(
                "head_dim",
                format!(
                    "at most {} (batched attention keeps 8 query rows and 32 key positions of head_dim floats in workgroup memory)",
                    crate::kernels::attention::ATTENTION_ROWS_MAX_HEAD_DIM
                ),
                self.head_dim,
            ));
        }
        if self.gdn_key_dim > crate::kernels::gdn::GDN_MAX_DK {
            return Err(invalid(
                "gdn_key_dim",
                format!(
                    "at most {} (the delta-rule kernels keep dk × 32 state floats in workgroup memory)",
                    crate::kernels::gdn::GDN_MAX_DK
                ),
                self.gdn_key_dim,
            ));
        }
        if self.n_experts_used > self.n_experts {
            return Err(invalid(
                "n_experts_used",
                format!("at most n_experts = {}", self.n_experts),
                self.n_experts_used,
            ));
        }
        if !(self.rms_eps.is_finite() && self.rms_eps > 0.0) {
            return Err(invalid("rms_eps", "a positive finite number", self.rms_eps));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return Err(invalid("rope_theta", "a positive finite number", self.rope_theta));
        }
        Ok(())
    }
}

fn invalid(what: &str, expected: impl ToString, found: impl ToString) -> ConfigError {
    ConfigError::Invalid { what: what.to_string(), expected: expected.to_string(), found: found.to_string() }
}

struct Json<'a>(&'a Value);

impl Json<'_> {
    fn usize_opt(&self, key: &str) -> Result<Option<usize>, ConfigError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().and_then(|n| usize::try_from(n).ok()).map(Some).ok_or_else(|| {
                ConfigError::WrongType { key: key.into(), expected: "a non-negative integer", found: v.to_string() }
            }),
        }
    }
    fn usize(&self, key: &str) -> Result<usize, ConfigError> {
        self.usize_opt(key)?.ok_or_else(|| ConfigError::Missing { key: key.into() })
    }
    fn usize_or(&self, key: &str, default: usize) -> Result<usize, ConfigError> {
        Ok(self.usize_opt(key)?.unwrap_or(default))
    }
    fn f64_opt(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| ConfigError::WrongType {
                key: key.into(),
                expected: "a number",
                found: v.to_string(),
            }),
        }
    }
    fn f64(&self, key: &str) -> Result<f64, ConfigError> {
        self.f64_opt(key)?.ok_or_else(|| ConfigError::Missing { key: key.into() })
    }
}

struct Meta<'a>(&'a GgufFile);

impl Meta<'_> {
    fn get(&self, key: &str) -> Result<(String, &MetaValue), ConfigError> {
        let full = format!("{GGUF_ARCH}.{key}");
        match self.0.meta(&full) {
            Some(v) => Ok((full, v)),
            None => Err(ConfigError::Missing { key: full }),
        }
    }
    fn usize(&self, key: &str) -> Result<usize, ConfigError> {
        let (full, v) = self.get(key)?;
        v.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or(ConfigError::WrongType {
            key: full,
            expected: "a non-negative integer",
            found: format!("{} {:?}", v.kind(), v),
        })
    }
    fn f64(&self, key: &str) -> Result<f64, ConfigError> {
        let (full, v) = self.get(key)?;
        v.as_f64().ok_or(ConfigError::WrongType {
            key: full,
            expected: "a number",
            found: format!("{} {:?}", v.kind(), v),
        })
    }
}
