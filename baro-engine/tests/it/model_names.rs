//! The HF ↔ GGUF name and value mapping (`names.rs`): names round-trip, values round-trip,
//! and the value-head reorder makes value head p read key head p % n_key.

use crate::common;

use baro_engine::model::names::{
    self, gguf_to_hf, gguf_to_hf_name, hf_to_gguf_name, v_head_order, HfSource, Transform,
};
use baro_engine::model::HfCheckpoint;
use common::{canonical_f32, fixture};

#[test]
fn v_head_order_is_a_permutation_that_tiles_key_heads() {
    for (nk, nv) in [(1, 1), (2, 4), (2, 6), (16, 32), (16, 64), (3, 3)] {
        let order = v_head_order(nk, nv);
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..nv).collect::<Vec<_>>());
        let r = nv / nk;
        for (p, &h) in order.iter().enumerate() {
            assert_eq!(h / r, p % nk, "position {p} holds head {h}, which reads key head {}", h / r);
        }
    }
    // Spelled out for 2 key heads × 3: grouped [g0v0 g0v1 g0v2 g1v0 g1v1 g1v2] → tiled.
    assert_eq!(v_head_order(2, 6), vec![0, 3, 1, 4, 2, 5]);
}

#[test]
fn names_round_trip_for_both_fixtures() {
    for name in ["tiny", "vocab"] {
        let ck = HfCheckpoint::open(&fixture(name)).unwrap();
        let cfg = &ck.config;
        let specs = names::gguf_tensors(cfg);
        let mut mapped = 0;
        for hf in ck.names() {
            let gguf = hf_to_gguf_name(cfg, hf).unwrap_or_else(|| panic!("{hf} has no gguf name"));
            let spec = specs.iter().find(|s| s.name == gguf).unwrap();
            match &spec.source {
                HfSource::One(n) => assert_eq!(gguf_to_hf_name(cfg, &gguf).as_deref(), Some(n.as_str())),
                HfSource::Experts { .. } => assert!(hf.contains(".mlp.experts.")),
            }
            mapped += 1;
        }
        assert_eq!(mapped, ck.names().count());
        assert_eq!(
            hf_to_gguf_name(cfg, "model.layers.0.mlp.experts.8.gate_proj.weight").filter(|_| cfg.n_experts <= 8),
            None
        );
        assert_eq!(
            hf_to_gguf_name(cfg, "model.layers.0.mlp.experts.gate_up_proj").as_deref(),
            Some("blk.0.ffn_gate_exps.weight")
        );
    }
}

#[test]
fn values_round_trip_hf_to_gguf_to_hf() {
    for name in ["tiny", "vocab"] {
        let ck = HfCheckpoint::open(&fixture(name)).unwrap();
        for (spec, data) in canonical_f32(&ck) {
            for (hf, back) in gguf_to_hf(&ck.config, &spec, &data) {
                let orig = ck.tensor(&hf).unwrap_or_else(|| panic!("{hf} missing"));
                assert_eq!(back.shape, orig.shape, "{hf}");
                let orig = orig.to_f32();
                let exact = !matches!(spec.transform, Transform::OnePlus | Transform::NegExpVHeads);
                for (a, b) in back.data.iter().zip(&orig) {
                    if exact {
                        assert_eq!(a.to_bits(), b.to_bits(), "{hf}");
                    } else {
                        // (1 + w) − 1 and log(−(−exp a)) lose at most a few ulps of 1 or of a.
                        assert!((a - b).abs() <= 4.0 * f32::EPSILON * (1.0 + b.abs()), "{hf}: {a} vs {b}");
                    }
                }
            }
        }
    }
}

#[test]
fn value_conventions_are_applied() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let cfg = &ck.config;
    let canonical = canonical_f32(&ck);
    let get = |n: &str| canonical.iter().find(|(s, _)| s.name == n).map(|(_, d)| d.clone()).unwrap();
    let hf = |n: &str| ck.tensor(n).unwrap().to_f32();
    // Zero-centred norms gain 1; the gated GDN norm does not.
    assert_eq!(get("blk.0.attn_norm.weight")[5], 1.0 + hf("model.layers.0.input_layernorm.weight")[5]);
    assert_eq!(get("blk.3.attn_q_norm.weight")[2], 1.0 + hf("model.layers.3.self_attn.q_norm.weight")[2]);
    assert_eq!(get("blk.0.ssm_norm.weight"), hf("model.layers.0.linear_attn.norm.weight"));
    // ssm_a at tiled position p is −exp(A_log) of grouped head order[p].
    let order = v_head_order(cfg.gdn_n_key_heads, cfg.gdn_n_value_heads);
    let a_log = hf("model.layers.1.linear_attn.A_log");
    let ssm_a = get("blk.1.ssm_a");
    for (p, &h) in order.iter().enumerate() {
        assert_eq!(ssm_a[p], -((a_log[h] as f64).exp() as f32));
        assert!(ssm_a[p] < 0.0);
    }
    // The V rows of attn_qkv: rows after q|k are value heads in tiled order.
    let qkv = hf("model.layers.2.linear_attn.in_proj_qkv.weight");
    let got = get("blk.2.attn_qkv.weight");
    let (h, vd, qk) = (cfg.hidden_dim, cfg.gdn_value_dim, 2 * cfg.gdn_n_key_heads * cfg.gdn_key_dim);
    assert_eq!(got[..qk * h], qkv[..qk * h]);
    for (p, &src) in order.iter().enumerate() {
        assert_eq!(got[(qk + p * vd) * h..][..vd * h], qkv[(qk + src * vd) * h..][..vd * h]);
    }
    // ssm_out: input columns reordered.
    let out = hf("model.layers.0.linear_attn.out_proj.weight");
    let got = get("blk.0.ssm_out.weight");
    let cols = cfg.gdn_n_value_heads * vd;
    for row in 0..h {
        for (p, &src) in order.iter().enumerate() {
            assert_eq!(got[row * cols + p * vd..][..vd], out[row * cols + src * vd..][..vd]);
        }
    }
    // Experts stacked in order; gate/up from per-expert tensors.
    let gate = get("blk.1.ffn_gate_exps.weight");
    let per = cfg.expert_ffn_dim * h;
    assert_eq!(gate[5 * per..6 * per], hf("model.layers.1.mlp.experts.5.gate_proj.weight")[..]);
}

#[test]
fn fused_gate_up_splits_gate_first() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let cfg = &ck.config;
    let (e, i, h) = (cfg.n_experts, cfg.expert_ffn_dim, cfg.hidden_dim);
    // Build the fused tensor transformers holds in memory: [E, 2I, H], gate rows first.
    let mut fused = Vec::new();
    for x in 0..e {
        fused.extend(ck.tensor(&format!("model.layers.0.mlp.experts.{x}.gate_proj.weight")).unwrap().to_f32());
        fused.extend(ck.tensor(&format!("model.layers.0.mlp.experts.{x}.up_proj.weight")).unwrap().to_f32());
    }
    let get = |n: &str| {
        (n == "model.layers.0.mlp.experts.gate_up_proj")
            .then(|| names::HfTensor { shape: vec![e, 2 * i, h], data: fused.clone() })
    };
    let specs = names::gguf_tensors(cfg);
    let canonical = canonical_f32(&ck);
    for part in ["blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight"] {
        let spec = specs.iter().find(|s| s.name == part).unwrap();
        let from_fused = names::hf_to_gguf(cfg, spec, &get).unwrap();
        let from_split = &canonical.iter().find(|(s, _)| s.name == part).unwrap().1;
        assert_eq!(&from_fused, from_split, "{part}");
    }
}
