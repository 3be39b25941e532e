//! Malformed GGUF files: every truncation, each corrupted field, and random byte flips give a
//! specific error, never a panic or an over-read. Also malformed configs and safetensors.

use crate::common;

use std::path::PathBuf;

use baro_engine::model::gguf::GgufError;
use baro_engine::model::gguf_write::Layout;
use baro_engine::model::{ConfigError, GgufFile, GgufWriter, HfCheckpoint, MetaValue, ModelConfig, TensorType};
use common::{fixture, Rng};

fn sample() -> (Vec<u8>, Layout) {
    let mut w = GgufWriter::new();
    w.add_meta("general.architecture", MetaValue::String("qwen35moe".into()));
    w.add_meta("t.u8", MetaValue::U8(7));
    w.add_meta("t.i8", MetaValue::I8(-7));
    w.add_meta("t.u16", MetaValue::U16(700));
    w.add_meta("t.i16", MetaValue::I16(-700));
    w.add_meta("t.i32", MetaValue::I32(-70000));
    w.add_meta("t.f32", MetaValue::F32(0.5));
    w.add_meta("t.bool", MetaValue::Bool(true));
    w.add_meta("t.u64", MetaValue::U64(1 << 40));
    w.add_meta("t.i64", MetaValue::I64(-(1 << 40)));
    w.add_meta("t.f64", MetaValue::F64(0.25));
    w.add_meta("t.strings", MetaValue::Array(vec![MetaValue::String("a".into()), MetaValue::String("bc".into())]));
    w.add_meta("t.nested", MetaValue::Array(vec![MetaValue::Array(vec![MetaValue::U32(1), MetaValue::U32(2)])]));
    let mut rng = Rng(99);
    let x: Vec<f32> = (0..512).map(|_| rng.unit()).collect();
    for (name, ty, shape) in [
        ("a", TensorType::F32, vec![4usize, 8]),
        ("b", TensorType::Q8_0, vec![2, 64]),
        ("c", TensorType::Q4_K, vec![2, 256]),
        ("d", TensorType::BF16, vec![3]),
    ] {
        let n: usize = shape.iter().product();
        let bytes = baro_engine::model::quantize::quantize(ty, &x[..n]).unwrap();
        w.add_tensor(name, ty, &shape, bytes).unwrap();
    }
    w.to_bytes()
}

fn parse(b: &[u8]) -> Result<GgufFile, GgufError> {
    GgufFile::from_vec(b.to_vec())
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
/// The offset of the value-type field of metadata `key`.
fn value_type_at(b: &[u8], key: &str) -> usize {
    b.windows(key.len()).position(|w| w == key.as_bytes()).unwrap() + key.len()
}

#[test]
fn the_sample_parses_with_every_value_type() {
    let (b, _) = sample();
    let g = parse(&b).unwrap();
    assert_eq!(g.meta("t.i16"), Some(&MetaValue::I16(-700)));
    assert_eq!(g.meta("t.u64").and_then(MetaValue::as_u64), Some(1 << 40));
    assert_eq!(
        g.meta("t.nested"),
        Some(&MetaValue::Array(vec![MetaValue::Array(vec![MetaValue::U32(1), MetaValue::U32(2)])]))
    );
    assert_eq!(g.tensor("c").unwrap().shape, &[2, 256]);
    assert_eq!(g.tensors.len(), 4);
}

#[test]
fn every_truncation_fails_with_truncated_or_out_of_bounds() {
    let (b, layout) = sample();
    let g = parse(&b).unwrap();
    let data_end = g.tensors.iter().map(|t| g.data_offset + t.offset + t.n_bytes).max().unwrap() as usize;
    for cut in 0..data_end {
        match parse(&b[..cut]) {
            Err(GgufError::Truncated { .. }) => {
                assert!(cut < layout.data_offset, "cut {cut}: truncated inside the data")
            }
            Err(GgufError::OutOfBounds { .. }) => {
                assert!(cut >= layout.tensor_infos.last().unwrap().offset_at + 8, "cut {cut}")
            }
            Err(GgufError::BadMagic { .. }) => assert!(cut < 4),
            other => panic!("cut {cut}: expected a truncation error, found {:?}", other.map(|_| ())),
        }
    }
    // Cutting only trailing padding leaves every tensor readable.
    assert!(parse(&b[..data_end]).is_ok());
}

#[test]
fn each_corrupted_field_gives_its_error() {
    let (b, layout) = sample();
    let t = |name: &str| layout.tensor_infos.iter().find(|t| t.name == name).unwrap().clone();
    let check = |mutate: &dyn Fn(&mut Vec<u8>), want: &dyn Fn(&GgufError) -> bool, what: &str| {
        let mut c = b.clone();
        mutate(&mut c);
        match parse(&c) {
            Err(e) if want(&e) => println!("{what}: {e}"),
            other => panic!("{what}: unexpected {:?}", other.map(|_| ()).map_err(|e| e.to_string())),
        }
    };
    check(&|c| c[0] = b'X', &|e| matches!(e, GgufError::BadMagic { .. }), "magic");
    check(&|c| put_u32(c, 4, 2), &|e| *e == GgufError::BadVersion { found: 2 }, "version 2");
    check(&|c| put_u32(c, 4, 3 << 24), &|e| matches!(e, GgufError::BadVersion { .. }), "big-endian version");
    check(
        &|c| put_u64(c, layout.tensor_count_at, u64::MAX),
        &|e| matches!(e, GgufError::Truncated { .. }),
        "tensor count",
    );
    check(
        &|c| put_u64(c, layout.tensor_count_at + 8, 1 << 60),
        &|e| matches!(e, GgufError::Truncated { .. }),
        "metadata count",
    );
    check(
        &|c| put_u32(c, value_type_at(&b, "t.u8"), 13),
        &|e| matches!(e, GgufError::UnknownValueType { found: 13, .. }),
        "value type",
    );
    check(
        &|c| {
            let at = value_type_at(&b, "t.bool") + 4;
            c[at] = 2
        },
        &|e| matches!(e, GgufError::BadBool { found: 2, .. }),
        "bool",
    );
    check(
        &|c| {
            let at = value_type_at(&b, "t.strings") + 8;
            put_u64(c, at, u64::MAX / 2)
        },
        &|e| matches!(e, GgufError::Truncated { .. }),
        "array length",
    );
    check(
        &|c| {
            let at = value_type_at(&b, "t.strings") + 16;
            put_u64(c, at, u64::MAX)
        },
        &|e| matches!(e, GgufError::Truncated { .. }),
        "string length",
    );
    check(
        &|c| put_u32(c, t("b").type_at, 2),
        &|e| matches!(e, GgufError::UnsupportedType { found: 2, name: "Q4_0", .. }),
        "type Q4_0",
    );
    check(
        &|c| put_u32(c, t("b").type_at, 1000),
        &|e| matches!(e, GgufError::UnsupportedType { found: 1000, name: "unknown", .. }),
        "type 1000",
    );
    check(
        &|c| {
            let at = t("c").offset_at;
            let v = u64::from_le_bytes(c[at..at + 8].try_into().unwrap());
            put_u64(c, at, v + 1)
        },
        &|e| matches!(e, GgufError::Misaligned { .. }),
        "offset + 1",
    );
    check(&|c| put_u64(c, t("c").offset_at, 1 << 40), &|e| matches!(e, GgufError::OutOfBounds { .. }), "offset far");
    check(
        &|c| put_u64(c, t("c").offset_at, u64::MAX - 31),
        &|e| matches!(e, GgufError::OutOfBounds { .. }),
        "offset overflowing",
    );
    check(&|c| put_u64(c, t("c").offset_at, 0), &|e| matches!(e, GgufError::Overlap { .. }), "offset overlapping");
    check(
        &|c| put_u64(c, t("a").dims_at + 8, u64::MAX),
        &|e| matches!(e, GgufError::DimsOverflow { .. }),
        "dims overflow",
    );
    check(
        &|c| put_u64(c, t("a").dims_at + 8, 1 << 33),
        &|e| matches!(e, GgufError::OutOfBounds { .. }),
        "dims too big",
    );
    // Zero elements, but the other dimension is beyond i64: refused, so no product of the
    // shape taken in another order overflows (found by fuzzing: [2^40, 2^40, 0]).
    check(
        &|c| {
            put_u64(c, t("a").dims_at, 0);
            put_u64(c, t("a").dims_at + 8, u64::MAX)
        },
        &|e| matches!(e, GgufError::DimsOverflow { .. }),
        "zero dim, huge dim",
    );
    check(
        &|c| put_u64(c, t("b").dims_at, 48),
        &|e| matches!(e, GgufError::PartialBlock { ne0: 48, .. }),
        "partial block",
    );
    check(&|c| put_u32(c, t("a").n_dims_at, 5), &|e| matches!(e, GgufError::BadRank { found: 5, .. }), "rank 5");
    check(&|c| put_u32(c, t("a").n_dims_at, 0), &|e| matches!(e, GgufError::BadRank { found: 0, .. }), "rank 0");
    check(
        &|c| {
            let at = value_type_at(&b, "t.u8") - 4;
            c[at..at + 4].copy_from_slice(b"t.i8")
        },
        &|e| matches!(e, GgufError::DuplicateKey { .. }),
        "duplicate key",
    );
    check(
        &|c| {
            let at = t("b").n_dims_at - 1;
            c[at] = b'a'
        },
        &|e| matches!(e, GgufError::DuplicateTensor { .. }),
        "duplicate tensor",
    );
    check(
        &|c| {
            let at = value_type_at(&b, "t.strings") + 24;
            c[at] = 0xFF
        },
        &|e| matches!(e, GgufError::BadUtf8 { .. }),
        "utf-8",
    );
}

#[test]
fn zero_element_shapes_whose_other_dimensions_overflow_have_no_size() {
    let big = 1usize << 40;
    for shape in [[big, big, 0], [0, big, big], [big, 0, big]] {
        assert_eq!(TensorType::F32.bytes_for(&shape), None, "{shape:?}");
    }
    assert_eq!(TensorType::F32.bytes_for(&[big, 0]), Some(0));
    assert_eq!(TensorType::Q8_0.bytes_for(&[3, 0]), Some(0));
}

#[test]
fn bad_alignment_is_rejected() {
    for (value, ok) in [
        (MetaValue::U32(64), true),
        (MetaValue::U32(3), false),
        (MetaValue::U32(0), false),
        (MetaValue::U64(32), false),
    ] {
        let mut w = GgufWriter::new();
        w.add_meta("general.alignment", value.clone());
        let r = parse(&w.to_bytes().0);
        assert_eq!(r.is_ok(), ok, "{value:?}");
        if !ok {
            assert!(matches!(r, Err(GgufError::BadAlignment { .. })), "{value:?}");
        }
    }
    let mut w = GgufWriter::new();
    w.set_alignment(64);
    w.add_tensor("x", TensorType::F32, &[3], vec![0; 12]).unwrap();
    w.add_tensor("y", TensorType::F32, &[3], vec![1; 12]).unwrap();
    let g = parse(&w.to_bytes().0).unwrap();
    assert_eq!((g.alignment, g.tensor_info("y").unwrap().offset), (64, 64));
}

#[test]
fn random_byte_flips_never_panic() {
    let (b, _) = sample();
    let mut rng = Rng(7);
    let mut errors = 0;
    for _ in 0..3000 {
        let mut c = b.clone();
        for _ in 0..1 + rng.next_u64() % 4 {
            let at = (rng.next_u64() % c.len() as u64) as usize;
            c[at] = rng.next_u64() as u8;
        }
        if let Ok(g) = parse(&c) {
            for t in &g.tensors {
                let v = g.tensor(&t.name).unwrap();
                assert_eq!(v.bytes.len() as u64, t.n_bytes);
                let _ = v.to_f32();
            }
        } else {
            errors += 1;
        }
    }
    assert!(errors > 100, "only {errors} of 3000 corruptions were detected");
}

#[test]
fn a_missing_file_is_an_io_error() {
    let r = GgufFile::open(&PathBuf::from("/nonexistent/baro.gguf"));
    assert!(matches!(r, Err(GgufError::Io { .. })));
}

fn tiny_json() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("tiny").join("config.json")).unwrap()).unwrap()
}

#[test]
fn inconsistent_configs_are_rejected_with_the_key() {
    let cases: Vec<(&str, serde_json::Value, &dyn Fn(&ConfigError) -> bool)> = vec![
        ("model_type", "llama".into(), &|e| matches!(e, ConfigError::UnknownArchitecture { .. })),
        (
            "num_key_value_heads",
            3.into(),
            &|e| matches!(e, ConfigError::Invalid { what, .. } if what.contains("n_kv_heads")),
        ),
        (
            "linear_num_value_heads",
            5.into(),
            &|e| matches!(e, ConfigError::Invalid { what, .. } if what.contains("gdn_n_value_heads")),
        ),
        (
            "num_experts_per_tok",
            9.into(),
            &|e| matches!(e, ConfigError::Invalid { what, .. } if what == "n_experts_used"),
        ),
        (
            "linear_key_head_dim",
            256.into(),
            &|e| matches!(e, ConfigError::Invalid { what, .. } if what == "gdn_key_dim"),
        ),
        (
            "num_hidden_layers",
            5.into(),
            &|e| matches!(e, ConfigError::Invalid { what, .. } if what.contains("layer kinds")),
        ),
        ("hidden_size", "64".into(), &|e| matches!(e, ConfigError::WrongType { key, .. } if key == "hidden_size")),
        (
            "head_dim",
            0.into(),
            &|e| matches!(e, ConfigError::Invalid { what, .. } if what == "head_dim" || what.contains("rope")),
        ),
        ("vocab_size", serde_json::Value::Null, &|e| matches!(e, ConfigError::Missing { key } if key == "vocab_size")),
        (
            "layer_types",
            serde_json::json!(["linear_attention", "x", "linear_attention", "full_attention"]),
            &|e| matches!(e, ConfigError::WrongType { key, .. } if key == "layer_types[1]"),
        ),
    ];
    for (key, value, want) in cases {
        let mut j = tiny_json();
        j[key] = value;
        if key == "model_type" {
            j["architectures"] = serde_json::json!(["LlamaForCausalLM"]);
        }
        match ModelConfig::from_hf_json(&j.to_string()) {
            Err(e) if want(&e) => println!("{key}: {e}"),
            other => panic!("{key}: unexpected {other:?}"),
        }
    }
    assert!(matches!(ModelConfig::from_hf_json("{"), Err(ConfigError::Json(_))));
    // A multimodal config nests the text config.
    let nested = serde_json::json!({"model_type": "qwen3_5_moe", "text_config": tiny_json()});
    assert_eq!(ModelConfig::from_hf_json(&nested.to_string()).unwrap().hidden_dim, 64);
}

#[test]
fn gguf_metadata_errors_name_the_key() {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let meta = ck.config.to_gguf_metadata().unwrap();
    let build = |edit: &dyn Fn(&mut Vec<(String, MetaValue)>)| {
        let mut m = meta.clone();
        edit(&mut m);
        let mut w = GgufWriter::new();
        for (k, v) in m {
            w.add_meta(&k, v);
        }
        w.add_tensor("token_embd.weight", TensorType::F32, &[10, 64], vec![0; 2560]).unwrap();
        ModelConfig::from_gguf(&GgufFile::from_vec(w.to_bytes().0).unwrap())
    };
    assert!(build(&|_| {}).is_ok());
    let set = |key: &'static str, v: MetaValue| {
        move |m: &mut Vec<(String, MetaValue)>| m.iter_mut().filter(|(k, _)| k == key).for_each(|(_, x)| *x = v.clone())
    };
    assert!(matches!(
        build(&set("general.architecture", MetaValue::String("llama".into()))),
        Err(ConfigError::UnknownArchitecture { .. })
    ));
    assert!(
        matches!(build(&set("qwen35moe.block_count", MetaValue::String("4".into()))), Err(ConfigError::WrongType { key, .. }) if key == "qwen35moe.block_count")
    );
    assert!(matches!(build(&set("qwen35moe.ssm.time_step_rank", MetaValue::U32(3))), Err(ConfigError::Invalid { .. })));
    assert!(matches!(
        build(&set("qwen35moe.attention.head_count_kv", MetaValue::U32(3))),
        Err(ConfigError::Invalid { .. })
    ));
    assert!(
        matches!(build(&|m| m.retain(|(k, _)| k != "qwen35moe.expert_count")), Err(ConfigError::Missing { key }) if key == "qwen35moe.expert_count")
    );
}
