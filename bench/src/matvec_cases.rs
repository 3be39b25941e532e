//! The matvecs one m = 1 decode step launches, as shapes: read from the model's own tensor
//! table (`model::names::gguf_tensors`) with the types a synthetic pack of a quant mix gives
//! them (`pack::mix`), grouped by (type, stack, rows, columns, input stride), each with how many
//! launches per token it stands for. Pure data; never touches a device or a kernel body.
//!
//! What decode launches as a matvec (`engine::weights::Weights::load_dense` and `engine::decode`):
//! every projection of the mixers, the router, the shared expert and its gate, the routed
//! experts (gate and up on one input, down on one input per slot, `n_experts_used` slots by
//! `ids`) and the output head. Gate and up (routed and shared) are one fused matrix of twice
//! the rows, one launch (`engine::weights::ExpertMatrices`): a case `ffn_gate_up_exps` /
//! `ffn_gate_up_shexp` from the gate's tensor, the up's counted in it. The embedding is a gather, the conv weight and the vectors are
//! not matrices.

use baro_engine::model::{names, ModelConfig, TensorType};
use baro_engine::pack::mix::{fitted_type, wanted_type};
use baro_engine::pack::QuantMix;

/// GGUF name suffixes of the tensors decode reads as matvec weights (per layer, and the head).
pub const MATVEC_TENSORS: [&str; 18] = [
    "attn_qkv.weight",
    "attn_gate.weight",
    "ssm_beta.weight",
    "ssm_alpha.weight",
    "ssm_out.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_inp_shexp.weight",
    "ffn_gate_exps.weight",
    "ffn_up_exps.weight",
    "ffn_down_exps.weight",
    "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
    "output.weight",
];

/// One matvec shape of a decode step, launched as decode launches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatvecCase {
    /// The tensors of this shape (GGUF names without `blk.N.` and `.weight`), in model order.
    pub tensors: Vec<String>,
    pub ty: TensorType,
    /// Matrices in the model's stack: the routed expert count, 1 for a projection.
    pub n_mats: usize,
    /// n: outputs per slot.
    pub rows: usize,
    /// k: the dot length.
    pub cols: usize,
    /// Slots per launch (the top-k for routed experts, else 1), each matrix `ids[slot]`.
    pub n_slots: usize,
    /// Input stride between slots: 0 (one input) or `cols` (routed down: one per slot).
    pub x_stride: usize,
    /// Launches of this shape per decoded token.
    pub per_token: usize,
}

impl MatvecCase {
    /// Bytes of one matrix (whole blocks per row, checked when the case was made).
    pub fn mat_bytes(&self) -> usize {
        self.ty.bytes_for(&[self.rows, self.cols]).unwrap_or(0)
    }

    /// x's length in floats.
    pub fn x_len(&self) -> usize {
        if self.x_stride == 0 {
            self.cols
        } else {
            self.n_slots * self.x_stride
        }
    }

    /// Bytes one launch must move: the selected matrices read once, x and the ids read, y
    /// written.
    pub fn bytes(&self) -> u64 {
        (self.n_slots * self.mat_bytes() + 4 * self.x_len() + 4 * self.n_slots + 4 * self.n_slots * self.rows) as u64
    }

    /// The tensors as one label.
    pub fn label(&self) -> String {
        self.tensors.join(",")
    }

    /// The shape of a host check of the same kernel: at most `max_rows` rows and a stack of
    /// 2 × `n_slots` matrices, so `check_ids` (all ≠ 0) exercise the indexing by ids; k, slots
    /// and the input stride are the case's.
    pub fn check_case(&self, max_rows: usize) -> MatvecCase {
        MatvecCase { rows: self.rows.min(max_rows), n_mats: 2 * self.n_slots, ..self.clone() }
    }

    /// Distinct ids, none 0, for `check_case`: 2·n_slots − 1, 2·n_slots − 3, …, 1.
    pub fn check_ids(&self) -> Vec<u32> {
        (0..self.n_slots).map(|s| (2 * (self.n_slots - s) - 1) as u32).collect()
    }
}

/// The rows and columns decode's matrix of `shape` (outermost first) has: the last two
/// dimensions, a vector as one row.
fn rows_cols(shape: &[usize]) -> (usize, usize) {
    match shape {
        [cols] => (1, *cols),
        [.., rows, cols] => (*rows, *cols),
        [] => (1, 1),
    }
}

/// Every matvec shape of a decode step of `cfg` in a pack of `mix`, sorted by type
/// (`TensorType::ALL` order) and then by bytes per launch, largest first. An error names a
/// tensor whose type does not fit its shape.
pub fn model_cases(cfg: &ModelConfig, mix: QuantMix) -> Result<Vec<MatvecCase>, String> {
    let mut cases: Vec<MatvecCase> = Vec::new();
    for spec in names::gguf_tensors(cfg) {
        let Some(suffix) = MATVEC_TENSORS.iter().find(|s| spec.name == **s || spec.name.ends_with(&format!(".{s}")))
        else {
            continue;
        };
        // The up projections run inside their gate's fused launch.
        if matches!(*suffix, "ffn_up_exps.weight" | "ffn_up_shexp.weight") {
            continue;
        }
        let fused = matches!(*suffix, "ffn_gate_exps.weight" | "ffn_gate_shexp.weight");
        let ty = fitted_type(wanted_type(mix, &spec.name, cfg.n_layers), &spec.shape);
        let (rows, cols) = rows_cols(&spec.shape);
        if ty.bytes_for(&[rows, cols]).is_none() {
            return Err(format!("tensor {}: expected rows of whole {ty} blocks, found {cols} columns", spec.name));
        }
        let experts = spec.name.ends_with("_exps.weight");
        let (n_mats, n_slots) = if experts { (spec.shape[0], cfg.n_experts_used) } else { (1, 1) };
        let x_stride = if spec.name.ends_with("ffn_down_exps.weight") { cols } else { 0 };
        let short =
            suffix.trim_end_matches(".weight").replace("ffn_gate_", if fused { "ffn_gate_up_" } else { "ffn_gate_" });
        let rows = if fused { 2 * rows } else { rows };
        let key = (ty, n_mats, rows, cols, n_slots, x_stride);
        match cases.iter_mut().find(|c| (c.ty, c.n_mats, c.rows, c.cols, c.n_slots, c.x_stride) == key) {
            Some(c) => {
                c.per_token += 1;
                if !c.tensors.contains(&short) {
                    c.tensors.push(short);
                }
            }
            None => {
                cases.push(MatvecCase { tensors: vec![short], ty, n_mats, rows, cols, n_slots, x_stride, per_token: 1 })
            }
        }
    }
    let rank = |t: TensorType| TensorType::ALL.iter().position(|&a| a == t).unwrap_or(usize::MAX);
    cases.sort_by(|a, b| rank(a.ty).cmp(&rank(b.ty)).then(b.bytes().cmp(&a.bytes())));
    Ok(cases)
}

/// Plain projections of type `ty` at each (k, n) of `shapes` (a Hugging Face checkpoint's
/// F16/BF16 matrices, Q8_0 at the listed shapes), labelled `label`.
pub fn projection_cases(ty: TensorType, shapes: &[(usize, usize)], label: &str) -> Vec<MatvecCase> {
    shapes
        .iter()
        .map(|&(cols, rows)| MatvecCase {
            tensors: vec![label.to_string()],
            ty,
            n_mats: 1,
            rows,
            cols,
            n_slots: 1,
            x_stride: 0,
            per_token: 0,
        })
        .collect()
}

/// `extra` appended to `cases`, leaving out those whose shape a case already has.
pub fn add_new(cases: &mut Vec<MatvecCase>, extra: Vec<MatvecCase>) {
    for e in extra {
        let shape = |c: &MatvecCase| (c.ty, c.n_mats, c.rows, c.cols, c.n_slots, c.x_stride);
        if !cases.iter().any(|c| shape(c) == shape(&e)) {
            cases.push(e);
        }
    }
}

/// The cases as a table (what `matvec_bw --list-cases` prints).
pub fn list(cases: &[MatvecCase]) -> String {
    let lw = cases.iter().map(|c| c.label().len()).max().unwrap_or(0).max(7);
    let mut t = format!(
        "{:<16} {:<lw$} {:<5} {:>5} {:>6} {:>5} {:>5} {:>8} {:>4} {:>11}\n",
        "kernel", "tensors", "type", "K", "N", "mats", "slots", "x_stride", "/tok", "bytes"
    );
    for c in cases {
        let kernel = baro_engine::kernels::decode_matvec_name(c.ty, c.cols);
        t += &format!(
            "{:<16} {:<lw$} {:<5} {:>5} {:>6} {:>5} {:>5} {:>8} {:>4} {:>11}\n",
            kernel,
            c.label(),
            c.ty.to_string(),
            c.cols,
            c.rows,
            c.n_mats,
            c.n_slots,
            c.x_stride,
            c.per_token,
            c.bytes()
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use baro_engine::pack::presets;

    fn find<'a>(cases: &'a [MatvecCase], ty: TensorType, rows: usize, cols: usize, n_mats: usize) -> &'a MatvecCase {
        cases
            .iter()
            .find(|c| (c.ty, c.rows, c.cols, c.n_mats) == (ty, rows, cols, n_mats))
            .unwrap_or_else(|| panic!("no {ty} {rows}x{cols} x{n_mats} in {cases:?}"))
    }

    #[test]
    fn real_community_cases_are_the_models_shapes() {
        let cfg = presets::real();
        let cases = model_cases(&cfg, QuantMix::Community).expect("real shapes fit");
        // 30 GDN layers (qkv 8192 rows) and 10 attention layers (q 2·16·256 = 8192 rows).
        let qkv = find(&cases, TensorType::Q8_0, 8192, 2048, 1);
        assert_eq!((qkv.per_token, qkv.tensors.clone()), (40, vec!["attn_qkv".to_string(), "attn_q".to_string()]));
        assert_eq!(find(&cases, TensorType::Q8_0, 2048, 512, 1).tensors, vec!["ffn_down_shexp".to_string()]);
        assert_eq!(find(&cases, TensorType::Q8_0, 512, 2048, 1).per_token, 10 * 2);
        assert_eq!(find(&cases, TensorType::Q8_0, 1024, 2048, 1).tensors, vec!["ffn_gate_up_shexp".to_string()]);
        let head = find(&cases, TensorType::Q6_K, 248_320, 2048, 1);
        assert_eq!((head.per_token, head.n_slots), (1, 1));
        for (ty, rows, cols, layers) in
            [(TensorType::Q4_K, 1024, 2048, 40), (TensorType::Q5_K, 2048, 512, 30), (TensorType::Q6_K, 2048, 512, 10)]
        {
            let c = find(&cases, ty, rows, cols, 256);
            assert_eq!((c.n_slots, c.per_token), (8, layers), "{c:?}");
            assert_eq!(c.x_stride, if rows == 2048 { 512 } else { 0 });
        }
        // 8 experts of 2 · 512 rows (gate and up) × 8 Q4_K blocks of 144 bytes, x, ids, y.
        assert_eq!(
            find(&cases, TensorType::Q4_K, 1024, 2048, 256).bytes(),
            (8 * 1024 * 8 * 144 + 4 * 2048 + 4 * 8 + 4 * 8 * 1024) as u64
        );
        assert_eq!(find(&cases, TensorType::F32, 1, 2048, 1).tensors, vec!["ffn_gate_inp_shexp".to_string()]);
        let launches: usize = cases.iter().map(|c| c.per_token).sum();
        // GDN 5, attention 4, MoE 6 (router, shared gate, 2 routed, 2 shared) per layer, the head.
        assert_eq!(launches, 30 * 5 + 10 * 4 + 40 * 6 + 1);
    }

    #[test]
    fn check_case_keeps_the_kernel_arguments_and_ids_stay_in_its_stack() {
        let c = model_cases(&presets::real(), QuantMix::Community).expect("real shapes fit");
        let down = find(&c, TensorType::Q5_K, 2048, 512, 256).check_case(4);
        assert_eq!((down.rows, down.n_mats, down.n_slots, down.x_stride, down.cols), (4, 16, 8, 512, 512));
        assert_eq!(down.check_ids(), vec![15, 13, 11, 9, 7, 5, 3, 1]);
        let head = find(&c, TensorType::Q6_K, 248_320, 2048, 1).check_case(4);
        assert_eq!((head.rows, head.n_mats, head.check_ids()), (4, 2, vec![1]));
    }
}
