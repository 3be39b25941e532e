//! The committed fixtures load through the safetensors path and through a GGUF written from
//! them, and both give the same canonical tensors: bit for bit in F32.

use crate::common;

use baro_engine::model::{gguf_tensors, GgufFile, HfCheckpoint, LayerKind, ModelConfig, TensorType};
use common::{canonical_f32, fixture, gguf_from};

#[test]
fn tiny_config_matches_the_fixture_script() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let c = &ck.config;
    assert_eq!((c.vocab_size, c.hidden_dim, c.n_layers), (1000, 64, 4));
    assert_eq!(c.layer_kinds, vec![LayerKind::Gdn, LayerKind::Gdn, LayerKind::Gdn, LayerKind::Attention]);
    assert_eq!((c.n_heads, c.n_kv_heads, c.head_dim, c.rope_dim), (4, 2, 16, 4));
    assert_eq!((c.gdn_n_key_heads, c.gdn_n_value_heads, c.gdn_key_dim, c.gdn_value_dim), (2, 4, 16, 16));
    assert_eq!((c.n_experts, c.n_experts_used, c.expert_ffn_dim, c.shared_ffn_dim), (8, 2, 32, 32));
    assert_eq!(c.rope_theta, 1e7);
    assert!(!c.tied_embeddings);
}

#[test]
fn vocab_fixture_is_sharded_bf16_and_tied() {
    let ck = HfCheckpoint::open(&fixture("vocab")).unwrap();
    let c = &ck.config;
    assert_eq!((c.vocab_size, c.hidden_dim, c.n_layers), (2048, 256, 5));
    assert_eq!(c.full_attention_interval(), Some(3));
    assert!(c.tied_embeddings);
    assert!(ck.tensor("lm_head.weight").is_none());
    assert_eq!(ck.tensor("model.embed_tokens.weight").unwrap().ty, TensorType::BF16);
    // Every tensor the spec table names exists with the right element count, and nothing else.
    let specs = gguf_tensors(c);
    let canonical = canonical_f32(&ck);
    for (spec, data) in &canonical {
        assert_eq!(data.len(), spec.shape.iter().product::<usize>(), "{}", spec.name);
    }
    let expected_hf = specs.len() - 3 * c.n_layers + 3 * c.n_layers * c.n_experts;
    assert_eq!(ck.names().count(), expected_hf);
}

fn gguf_matches_safetensors(name: &str) {
    let ck = HfCheckpoint::open(&fixture(name)).unwrap();
    let canonical = canonical_f32(&ck);
    let bytes = gguf_from(&ck.config, &canonical, &|_| TensorType::F32);
    let dir = std::env::temp_dir().join(format!("baro-engine-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model-f32.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let g = GgufFile::open(&path).unwrap();
    assert_eq!(ModelConfig::from_gguf(&g).unwrap(), ck.config);
    assert_eq!(g.tensors.len(), canonical.len());
    for (spec, data) in &canonical {
        let t = g.tensor(&spec.name).unwrap_or_else(|| panic!("{} missing", spec.name));
        assert_eq!(t.shape, spec.shape.as_slice(), "{}", spec.name);
        assert_eq!(t.ty, TensorType::F32);
        let got = t.to_f32();
        assert!(got.iter().zip(data).all(|(a, b)| a.to_bits() == b.to_bits()), "{} differs", spec.name);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tiny_gguf_f32_equals_safetensors_bit_for_bit() {
    gguf_matches_safetensors("tiny");
}

#[test]
fn vocab_gguf_f32_equals_safetensors_bit_for_bit() {
    gguf_matches_safetensors("vocab");
}

#[test]
fn reference_files_are_consistent_with_their_index() {
    for (name, vocab) in [("tiny", 1000), ("vocab", 2048)] {
        let dir = fixture(name);
        let index: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
        let f32_len = std::fs::metadata(dir.join("logits_f32.bin")).unwrap().len() as usize / 4;
        let logits: Vec<f32> = std::fs::read(dir.join("logits_f32.bin"))
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let n_greedy = index["n_greedy"].as_u64().unwrap() as usize;
        let mut total = 0;
        for p in index["prompts"].as_array().unwrap() {
            let tokens: Vec<usize> =
                p["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as usize).collect();
            let greedy: Vec<usize> =
                p["greedy"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as usize).collect();
            let l = &p["logits_f32"];
            let (off, rows, cols) = (
                l["offset"].as_u64().unwrap() as usize,
                l["rows"].as_u64().unwrap() as usize,
                l["cols"].as_u64().unwrap() as usize,
            );
            assert_eq!((rows, cols, greedy.len()), (tokens.len() + n_greedy, vocab, n_greedy));
            assert!(tokens.iter().chain(&greedy).all(|&t| t < vocab));
            // The greedy tokens are the argmax of the stored logits.
            for (i, &g) in greedy.iter().enumerate() {
                let row = &logits[off + (tokens.len() - 1 + i) * cols..][..cols];
                let best = row.iter().enumerate().fold(0, |b, (j, &v)| if v > row[b] { j } else { b });
                assert_eq!(best, g, "{name}: greedy step {i}");
            }
            total += rows * cols;
        }
        assert_eq!(total, f32_len);
    }
}
