//! The m=1 decode kernels of the qwen35moe path, each a `#[kernel]` with a plain-Rust
//! reference beside it that performs the same f32 operations in the same order (so host
//! results are compared byte for byte, never to a tolerance). Dimensions are scalar
//! parameters; nothing here hard-codes a model size, and nothing here calls a driver.
//!
//! Conventions shared by every file:
//! - One output (a projection row, a head, an expert) per workgroup; the lane count of every
//!   `lanes(32)` schedule is part of the kernel's meaning and independent of the target.
//! - Quantized weights are raw GGUF bytes (`&[u8]`, the block layouts of `model::dequant`),
//!   dequantized inside the dot; f16 scales are decoded from their two bytes with integer
//!   operations (`f16_bits` below documents the exact expression every kernel inlines),
//!   because the kernel language has no 16-bit integer or f16 bit cast.
//! - Token ids and expert ids are `u32` buffers.

pub mod attention;
pub mod embed;
pub mod gdn;
pub mod kquant_q8;
pub mod matvec;
pub mod moe;
pub mod norm;
pub mod pick;
pub mod q8_tiles;
pub mod q8act;
pub mod quant;
pub mod rope;

/// The f16 → f32 decode every quantized kernel inlines, on the 16 bits `h` (in a u32): the
/// sign moved to bit 31; a zero exponent (zero or subnormal) as `m · 2^-24` (an exact integer
/// conversion and a power-of-two product, no subnormal f32 involved); otherwise the exponent
/// rebased by 112 (by 224 for inf/NaN) with the mantissa shifted into place. Exact for all
/// 65536 inputs (`kernels_norm::f16_decode_is_exact` checks every one).
pub fn f16_bits(h: u32) -> f32 {
    let mag = if (h & 0x7c00) == 0 {
        ((h & 0x3ff) as f32 * 5.960_464_5e-8).to_bits()
    } else {
        ((h & 0x7fff) << 13) + if (h & 0x7c00) == 0x7c00 { 0x7000_0000 } else { 0x3800_0000 }
    };
    f32::from_bits(((h & 0x8000) << 16) | mag)
}

/// The name of the m = 1 matvec the decode path launches for a `ty` matrix of `cols` columns:
/// the quantized kernel with x staged in workgroup memory (`quant::XS_KERNELS`) where
/// `cols ≤ quant::XS_MAX_K`, the plain one otherwise. `Kernels::matvec_for` picks by this rule,
/// and benchmarks (`bench`'s `matvec_bw`) measure what it names.
pub fn decode_matvec_name(ty: crate::model::TensorType, cols: usize) -> &'static str {
    use crate::model::TensorType as T;
    if cols <= quant::XS_MAX_K {
        if let Some(&(_, name, _)) = quant::XS_KERNELS.iter().find(|(t, _, _)| *t == ty) {
            return name;
        }
    }
    match ty {
        T::F32 => "matvec_f32",
        T::F16 => "matvec_f16",
        T::BF16 => "matvec_bf16",
        T::Q8_0 => "matvec_q8_0",
        T::Q4_K => "matvec_q4_k",
        T::Q5_K => "matvec_q5_k",
        T::Q6_K => "matvec_q6_k",
    }
}

/// The IR of `decode_matvec_name(ty, cols)`, from `decode()`: what the decode path launches
/// for that matrix, with its launch arguments `(x, w, ids, y, k, n, x_stride, n_slots)`.
pub fn decode_matvec(ty: crate::model::TensorType, cols: usize) -> baro::dsl::Kernel {
    let name = decode_matvec_name(ty, cols);
    // Every name above is a kernel of `decode()` (`tests/it/kernels_matvec.rs` checks each type).
    decode().into_iter().find(|k| k.name == name).unwrap_or_else(|| {
        panic!("decode matvec {name}: expected it in kernels::decode(), found no such kernel (a bug in baro)")
    })
}

/// Every kernel of this module, for precompiling (and for the offline GPU compile test).
pub fn all() -> Vec<baro::dsl::Kernel> {
    let mut all = decode();
    all.extend(rows());
    all.extend(any_rows());
    all.extend(sampling());
    all
}

/// Kernels whose work units do not depend on how many rows they cover, so one kernel serves
/// a token and a chunk alike and needs no rows sibling: `q8act` quantizes each block of 32 on
/// its own (the q8 mode's inputs, any number of rows).
pub fn any_rows() -> Vec<baro::dsl::Kernel> {
    vec![q8act::q8act()]
}

/// Kernels after the forward pass: the greedy pick on the device (`pick`). Not part of a
/// step's arithmetic, so they have no rows siblings.
pub fn sampling() -> Vec<baro::dsl::Kernel> {
    vec![pick::greedy_chunks(), pick::greedy_pick()]
}

/// The m = 1 kernels of the decode path.
pub fn decode() -> Vec<baro::dsl::Kernel> {
    vec![
        embed::embed_f32(),
        embed::embed_bf16(),
        embed::embed_q8_0(),
        embed::embed_q4_k(),
        embed::embed_q5_k(),
        embed::embed_q6_k(),
        norm::rmsnorm(),
        norm::rmsnorm_zc(),
        norm::head_rmsnorm(),
        norm::head_rmsnorm_rope(),
        norm::add_rmsnorm(),
        q8act::add_rmsnorm_q8(),
        q8act::moe_combine_add_rmsnorm_q8(),
        q8act::gated_rmsnorm_q8(),
        q8act::swiglu_pairs_q8(),
        matvec::matvec_f32(),
        matvec::matvec_f16(),
        matvec::matvec_bf16(),
        quant::matvec_q8_0(),
        quant::matvec_q4_k(),
        quant::matvec_q5_k(),
        quant::matvec_q6_k(),
        quant::matvec_q8_0_xs(),
        quant::matvec_q4_k_xs(),
        quant::matvec_q5_k_xs(),
        quant::matvec_q6_k_xs(),
        rope::rope_neox(),
        attention::kv_append(),
        attention::attention_scores(),
        attention::attention_softmax(),
        attention::attention_pv(),
        moe::router_topk(),
        moe::router_topk_gate(),
        moe::swiglu_pairs(),
        moe::moe_combine(),
        gdn::gdn_conv_step(),
        gdn::gdn_step(),
        gdn::gdn_step_ba(),
        gdn::gated_rmsnorm(),
        q8act::matvec_q8_0_q8(),
        kquant_q8::matvec_q4_k_q8(),
        kquant_q8::matvec_q5_k_q8(),
        kquant_q8::matvec_q6_k_q8(),
    ]
}

/// The kernels of batched prefill and the batched decode step: each `_rows` kernel is the rows
/// sibling of its m = 1 kernel, derived from it (`rows(..)`: embed, matvec, quant, rope) or
/// written by hand (`rows_of`: norm, attention, moe, gdn), and proven so while this crate compiles; the MoE grouping kernels
/// (`moe_count`, `moe_scatter`, `moe_scatter_tiles`, `moe_gather`, `moe_ungather`), `copy_row` and `put_row` only
/// move integers and copies; `attention_pv_rows_reordered` is the negative control (no sibling).
pub fn rows() -> Vec<baro::dsl::Kernel> {
    vec![
        embed::embed_f32_rows(),
        embed::embed_bf16_rows(),
        embed::embed_q8_0_rows(),
        embed::embed_q4_k_rows(),
        embed::embed_q5_k_rows(),
        embed::embed_q6_k_rows(),
        norm::rmsnorm_rows(),
        norm::head_rmsnorm_rows(),
        norm::head_rmsnorm_rope_rows(),
        norm::add_rmsnorm_rows(),
        matvec::matvec_f32_rows(),
        matvec::matvec_f16_rows(),
        matvec::matvec_bf16_rows(),
        quant::matvec_q8_0_rows(),
        quant::matvec_q4_k_rows(),
        quant::matvec_q5_k_rows(),
        quant::matvec_q6_k_rows(),
        quant::matvec_q8_0_xs_rows(),
        quant::matvec_q4_k_xs_rows(),
        quant::matvec_q5_k_xs_rows(),
        quant::matvec_q6_k_xs_rows(),
        matvec::matvec_f32_rows8(),
        quant::matvec_q8_0_rows8(),
        rope::rope_neox_rows(),
        attention::kv_append_rows(),
        attention::attention_scores_rows(),
        attention::attention_softmax_rows(),
        attention::attention_pv_rows(),
        moe::router_topk_rows(),
        moe::router_topk_gate_rows(),
        moe::swiglu_pairs_rows(),
        moe::moe_combine_rows(),
        moe::moe_count(),
        moe::moe_scatter(),
        moe::moe_scatter_tiles(),
        moe::moe_gather(),
        moe::moe_ungather(),
        embed::copy_row(),
        embed::put_row(),
        attention::attention_pv_rows_reordered(),
        gdn::gdn_conv_rows(),
        gdn::gdn_scan_rows(),
        gdn::gdn_scan_ba_rows(),
        gdn::gated_rmsnorm_rows(),
        q8act::matvec_q8_0_q8_rows(),
        q8act::matvec_q8_0_q8_rows8(),
        q8act::matvec_q8_0_q8_mma(),
        q8act::add_rmsnorm_q8_rows(),
        q8act::moe_combine_add_rmsnorm_q8_rows(),
        q8act::gated_rmsnorm_q8_rows(),
        q8act::swiglu_pairs_q8_rows(),
        kquant_q8::matvec_q4_k_q8_rows(),
        kquant_q8::matvec_q5_k_q8_rows(),
        kquant_q8::matvec_q6_k_q8_rows(),
        kquant_q8::matvec_q4_k_q8_rows8(),
        kquant_q8::matvec_q5_k_q8_rows8(),
        kquant_q8::matvec_q6_k_q8_rows8(),
        kquant_q8::matvec_q4_k_q8_mma(),
        kquant_q8::matvec_q5_k_q8_mma(),
        kquant_q8::matvec_q6_k_q8_mma(),
    ]
}

/// Every (rows kernel, m = 1 kernel) pair declared with `rows_of`, for the proof count and
/// the tests that re-run the sibling check at run time.
pub fn sibling_pairs() -> Vec<(baro::dsl::Kernel, baro::dsl::Kernel)> {
    let decode = decode();
    rows()
        .into_iter()
        .filter_map(|r| {
            let of = r.sibling.as_ref()?.of.clone();
            let m1 = decode.iter().find(|k| k.name == of)?.clone();
            Some((r, m1))
        })
        .collect()
}
