//! The bandwidth floor of one m = 1 decode step, from a GGUF pack's own tensor table: the bytes
//! of weights the step must read, as stored in the pack, tensor by tensor.
//!
//! What is counted (the rule each tensor gets is recorded beside it):
//! - `token_embd.weight`: one row (stored bytes / vocab rows), the gather of the fed token;
//!   when the head is tied to it, also the whole table once more (the head reads all of it);
//! - routed experts (`blk.N.ffn_{gate,up,down}_exps.weight`, shape [experts, rows, cols]):
//!   `top_k` experts' share, stored bytes / experts × top_k;
//! - every other tensor of the model's canonical table (`model::names::gguf_tensors`), the
//!   output head included: whole, once;
//! - tensors in the file that decode never reads (an MTP block, extras): not counted, listed.
//!
//! Not weights and not counted: activations, the GDN recurrent state and conv ring, the KV
//! cache (`state_bytes` gives their traffic separately). Pure arithmetic over tensor infos;
//! never reads tensor data, never touches a device.

use std::collections::HashSet;

use baro_engine::model::{names, GgufFile, ModelConfig, TensorType};

/// How a tensor's stored bytes enter the per-token count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Read whole, once per token.
    Whole,
    /// The embedding table: one row of `rows`.
    EmbeddingRow { rows: usize },
    /// The embedding table tied to the output head: one row, plus the whole table.
    EmbeddingRowAndTiedHead { rows: usize },
    /// Routed experts: `top_k` of `n_experts` equal slices.
    TopKExperts { top_k: usize, n_experts: usize },
    /// In the file, never read by decode.
    NotRead,
}

/// One tensor of the pack and what a decode step reads of it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorBytes {
    pub name: String,
    pub ty: TensorType,
    pub stored: u64,
    pub read: u64,
    pub rule: Rule,
}

/// The bytes of weights one decode step reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    /// Every tensor of the file, in file order.
    pub tensors: Vec<TensorBytes>,
    /// The sum of `read` over all tensors.
    pub per_token: u64,
    /// The parts of `per_token`: the embedding row, the output head (whole; with a tied head:
    /// the table), the routed experts' top-k share, and everything else (mixers, norms,
    /// routers, shared experts).
    pub embedding_row: u64,
    pub lm_head: u64,
    pub routed_experts: u64,
    pub other: u64,
    /// The sum of `stored` over all tensors (the file minus header and padding).
    pub stored_total: u64,
}

impl Floor {
    /// Tokens per second if a step moved exactly `per_token` bytes at `bytes_per_s`.
    pub fn tokens_per_s(&self, bytes_per_s: f64) -> f64 {
        bytes_per_s / self.per_token as f64
    }

    /// Names of the tensors decode never reads.
    pub fn not_read(&self) -> Vec<&str> {
        self.tensors.iter().filter(|t| t.rule == Rule::NotRead).map(|t| t.name.as_str()).collect()
    }

    /// One line per rule: what is counted and how many bytes it gives.
    pub fn explain(&self) -> String {
        let n_not_read = self.tensors.iter().filter(|t| t.rule == Rule::NotRead).count();
        let not_read_bytes: u64 = self.tensors.iter().filter(|t| t.rule == Rule::NotRead).map(|t| t.stored).sum();
        let n_experts = self.tensors.iter().filter(|t| matches!(t.rule, Rule::TopKExperts { .. })).count();
        let k = self.tensors.iter().find_map(|t| match t.rule {
            Rule::TopKExperts { top_k, n_experts } => Some(format!("{top_k} of {n_experts}")),
            _ => None,
        });
        format!(
            "counted per token (bytes as stored in the pack): embedding 1 row {}; output head whole {}; routed experts, top {} experts of each of {} expert tensors, {}; every other decode tensor whole (mixers, norms, routers, shared experts) {}; total {}. Not counted: {n_not_read} tensors decode never reads ({} bytes), activations, recurrent state, KV cache",
            self.embedding_row,
            self.lm_head,
            k.as_deref().unwrap_or("-"),
            n_experts,
            self.routed_experts,
            self.other,
            self.per_token,
            not_read_bytes,
        )
    }
}

/// The floor of `file`, whose config is `cfg` (`ModelConfig::from_gguf(file)`). A tensor decode
/// needs that is missing, or an expert tensor whose outer dimension is not the expert count,
/// is an error (the engine would refuse the file too).
pub fn floor(file: &GgufFile, cfg: &ModelConfig) -> Result<Floor, String> {
    let specs = names::gguf_tensors(cfg);
    for s in &specs {
        if file.tensor_info(&s.name).is_none() {
            return Err(format!("pack: expected tensor {} (decode reads it), found none", s.name));
        }
    }
    let read_set: HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let mut f = Floor {
        tensors: Vec::new(),
        per_token: 0,
        embedding_row: 0,
        lm_head: 0,
        routed_experts: 0,
        other: 0,
        stored_total: 0,
    };
    for t in &file.tensors {
        let stored = t.n_bytes;
        let (rule, read) = if !read_set.contains(t.name.as_str()) {
            (Rule::NotRead, 0)
        } else if t.name == "token_embd.weight" {
            let rows = t.shape.first().copied().unwrap_or(0);
            if rows == 0 || stored % rows as u64 != 0 {
                return Err(format!(
                    "pack: token_embd.weight: expected {stored} bytes to split into whole rows, found shape {:?}",
                    t.shape
                ));
            }
            let row = stored / rows as u64;
            f.embedding_row += row;
            if cfg.tied_embeddings {
                f.lm_head += stored;
                (Rule::EmbeddingRowAndTiedHead { rows }, row + stored)
            } else {
                (Rule::EmbeddingRow { rows }, row)
            }
        } else if t.name.ends_with("_exps.weight") {
            let e = cfg.n_experts;
            if t.shape.len() != 3 || t.shape[0] != e || stored % e as u64 != 0 {
                return Err(format!("pack: {}: expected shape [{e}, rows, cols] split into {e} equal experts, found shape {:?} of {stored} bytes", t.name, t.shape));
            }
            let read = stored / e as u64 * cfg.n_experts_used as u64;
            f.routed_experts += read;
            (Rule::TopKExperts { top_k: cfg.n_experts_used, n_experts: e }, read)
        } else {
            if t.name == "output.weight" {
                f.lm_head += stored;
            } else {
                f.other += stored;
            }
            (Rule::Whole, stored)
        };
        f.per_token += read;
        f.stored_total += stored;
        f.tensors.push(TensorBytes { name: t.name.clone(), ty: t.ty, stored, read, rule });
    }
    Ok(f)
}

/// Bytes of decode state one step at position `pos` moves (not weights, not in the floor):
/// each GDN layer reads and writes its f32 delta-rule state and conv ring; each attention
/// layer writes one K and V row and reads `pos + 1` of each (f32, as the engine stores them).
pub fn state_bytes(cfg: &ModelConfig, pos: usize) -> u64 {
    let f = 4u64;
    let ssm = (cfg.gdn_n_value_heads * cfg.gdn_key_dim * cfg.gdn_value_dim) as u64 * f;
    let conv = (cfg.gdn_conv_dim() * cfg.conv_kernel.saturating_sub(1)) as u64 * f;
    let kv_row = (cfg.n_kv_heads * cfg.head_dim) as u64 * f;
    cfg.layer_kinds
        .iter()
        .map(|k| match k {
            baro_engine::model::LayerKind::Gdn => 2 * (ssm + conv),
            baro_engine::model::LayerKind::Attention => 2 * kv_row * (pos as u64 + 2),
        })
        .sum()
}
