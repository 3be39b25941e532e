//! HF checkpoints beyond the fixtures: the `model.language_model.` prefix, skipped MTP and
//! vision tensors, f16/bf16, sharding, and malformed files.

use crate::common;

use std::collections::HashMap;
use std::path::PathBuf;

use baro_engine::model::safetensors::normalise_name;
use baro_engine::model::{HfCheckpoint, HfError, TensorType};
use common::fixture;
use safetensors::tensor::TensorView as StView;
use safetensors::Dtype;

fn shard(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: HashMap<String, StView<'_>> =
        tensors.iter().map(|(n, d, s, b)| (n.to_string(), StView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize(&views, &None).unwrap()
}

fn tiny_config() -> baro_engine::model::ModelConfig {
    HfCheckpoint::open(&fixture("tiny")).unwrap().config
}

#[test]
fn names_are_normalised_and_extras_skipped() {
    assert_eq!(
        normalise_name("model.language_model.layers.0.mlp.gate.weight").as_deref(),
        Some("model.layers.0.mlp.gate.weight")
    );
    assert_eq!(normalise_name("lm_head.weight").as_deref(), Some("lm_head.weight"));
    assert_eq!(normalise_name("mtp.layers.0.mlp.gate.weight"), None);
    assert_eq!(normalise_name("model.visual.blocks.0.attn.qkv.weight"), None);
    let s = shard(&[
        ("model.language_model.norm.weight", Dtype::BF16, vec![2], half::bf16::from_f32(1.5).to_le_bytes().repeat(2)),
        (
            "model.language_model.embed_tokens.weight",
            Dtype::F16,
            vec![1, 2],
            half::f16::from_f32(-0.25).to_le_bytes().repeat(2),
        ),
        ("mtp.fc.weight", Dtype::F32, vec![1], 1.0f32.to_le_bytes().to_vec()),
        ("model.visual.patch_embed.proj.weight", Dtype::I64, vec![1], vec![0; 8]),
    ]);
    let ck = HfCheckpoint::from_parts(tiny_config(), vec![(PathBuf::from("a.safetensors"), s)]).unwrap();
    assert_eq!(ck.names().collect::<Vec<_>>(), vec!["model.embed_tokens.weight", "model.norm.weight"]);
    let norm = ck.tensor("model.norm.weight").unwrap();
    assert_eq!((norm.ty, norm.to_f32()), (TensorType::BF16, vec![1.5, 1.5]));
    assert_eq!(ck.tensor("model.embed_tokens.weight").unwrap().to_f32(), vec![-0.25, -0.25]);
}

#[test]
fn bad_checkpoints_give_specific_errors() {
    let cfg = tiny_config();
    let open = |shards: Vec<Vec<u8>>| {
        let parts =
            shards.into_iter().enumerate().map(|(i, b)| (PathBuf::from(format!("s{i}.safetensors")), b)).collect();
        HfCheckpoint::from_parts(cfg.clone(), parts)
    };
    let good = shard(&[("model.norm.weight", Dtype::F32, vec![2], vec![0; 8])]);
    assert!(open(vec![good.clone()]).is_ok());
    let int = shard(&[("model.norm.weight", Dtype::I32, vec![2], vec![0; 8])]);
    assert!(matches!(open(vec![int]), Err(HfError::Dtype { .. })));
    assert!(matches!(open(vec![good.clone(), good.clone()]), Err(HfError::Duplicate { .. })));
    for cut in [0, 4, 8, 20, good.len() - 1] {
        assert!(matches!(open(vec![good[..cut].to_vec()]), Err(HfError::Header { .. })), "cut {cut}");
    }
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(open(vec![huge]), Err(HfError::Header { .. })));
}

#[test]
fn a_sharded_folder_with_a_bad_index_is_rejected() {
    let dir = std::env::temp_dir().join(format!("baro-engine-st-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("tiny").join("config.json"), dir.join("config.json")).unwrap();
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        r#"{"weight_map": {"model.norm.weight": "../x.safetensors"}}"#,
    )
    .unwrap();
    assert!(matches!(HfCheckpoint::open(&dir), Err(HfError::Index { .. })));
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        r#"{"weight_map": {"model.norm.weight": "missing.safetensors"}}"#,
    )
    .unwrap();
    assert!(matches!(HfCheckpoint::open(&dir), Err(HfError::Io { .. })));
    std::fs::write(dir.join("model.safetensors.index.json"), r#"{"metadata": {}}"#).unwrap();
    assert!(matches!(HfCheckpoint::open(&dir), Err(HfError::Index { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
}
