//! Synthetic packs read back: a small config written in every mix opens with `GgufFile::open`,
//! its metadata gives back the config, its tensor table is `names::gguf_tensors(cfg)` with the
//! mix's types, every value dequantizes finite and of the intended magnitude, the bytes are a
//! function of the seed alone (not the thread count), and bad output paths give clear errors.

use std::path::{Path, PathBuf};

use baro_engine::model::dequant;
use baro_engine::model::{gguf_tensors, GgufFile, MetaValue, ModelConfig, TensorType};
use baro_engine::pack::mix::{fitted_type, wanted_type};
use baro_engine::pack::{self, presets, PackError, PackPlan, QuantMix, ValueKind, WriteOptions};
use baro_engine::tokenizer::{Specials, Tokenizer};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("baro-pack-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(cfg: &ModelConfig, mix: QuantMix, seed: u64, threads: usize, path: &Path) -> PackPlan {
    let plan = pack::plan(cfg, mix, seed).unwrap();
    let mut last = 0;
    let len = pack::write_pack(&plan, path, &WriteOptions { seed, threads }, &mut |n| {
        assert!(n >= last, "progress went back from {last} to {n}");
        last = n;
    })
    .unwrap();
    assert_eq!(len, plan.file_len());
    assert_eq!(last, len, "the last progress report is the file size");
    assert_eq!(std::fs::metadata(path).unwrap().len(), len);
    assert!(!pack::write::tmp_path(path).exists(), "the .tmp file is renamed away");
    plan
}

fn fixture_config() -> ModelConfig {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/tiny/config.json")).unwrap();
    ModelConfig::from_hf_json(&text).unwrap()
}

/// Every value finite and inside the kind's bounds (quantized weights: within 3.2σ, the
/// largest code times the largest scale plus f16 rounding); weights of at least 4096 elements have an rms
/// within 15% of σ and a mean within 0.05σ of zero.
fn check_values(name: &str, ty: TensorType, kind: ValueKind, values: &[f32]) {
    assert!(values.iter().all(|v| v.is_finite()), "{name} ({ty}): a non-finite value");
    let (lo, hi) = match kind {
        ValueKind::Weight { std } if ty.is_quantized() => (-3.2 * std, 3.2 * std),
        other => other.bounds(),
    };
    // f16/f32 rounding of the bounds themselves.
    let slack = 1e-5 * hi.abs().max(lo.abs());
    let (min, max) = values.iter().fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    assert!(
        min >= lo - slack && max <= hi + slack,
        "{name} ({ty}): values in [{min}, {max}], expected within [{lo}, {hi}]"
    );
    if let ValueKind::Weight { std } = kind {
        if values.len() >= 4096 {
            let n = values.len() as f64;
            let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let rms = (values.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / n).sqrt();
            let std = f64::from(std);
            assert!((rms / std - 1.0).abs() < 0.15, "{name} ({ty}): rms {rms}, expected about {std}");
            assert!(mean.abs() < 0.05 * std, "{name} ({ty}): mean {mean}, expected about 0");
        }
    }
    if matches!(kind, ValueKind::Norm | ValueKind::Decay | ValueKind::DtBias | ValueKind::Conv) && values.len() >= 32 {
        // Not a constant: random within the range.
        assert!(max - min > 0.1 * (hi - lo), "{name}: values span [{min}, {max}] of [{lo}, {hi}]");
    }
}

fn check_pack(cfg: &ModelConfig, mix: QuantMix, seed: u64, path: &Path, plan: &PackPlan) {
    let file = GgufFile::open(path).unwrap();
    assert_eq!(file.meta("general.architecture"), Some(&MetaValue::String("qwen35moe".into())));
    assert_eq!(file.meta("general.alignment"), Some(&MetaValue::U32(32)));
    assert_eq!(file.meta("baro.synthetic.seed"), Some(&MetaValue::U64(seed)));
    assert_eq!(file.meta("baro.synthetic.mix"), Some(&MetaValue::String(mix.name().into())));
    assert_eq!(file.meta("tokenizer.ggml.model").and_then(MetaValue::as_str), Some("gpt2"));
    assert_eq!(file.meta("tokenizer.ggml.pre").and_then(MetaValue::as_str), Some("qwen35"));
    assert_eq!(&ModelConfig::from_gguf(&file).unwrap(), cfg, "the metadata gives back the config");

    let specs = gguf_tensors(cfg);
    assert_eq!(file.tensors.len(), specs.len());
    for (info, spec) in file.tensors.iter().zip(&specs) {
        assert_eq!((&info.name, &info.shape), (&spec.name, &spec.shape), "tensor table in gguf_tensors order");
        let expected = fitted_type(wanted_type(mix, &spec.name, cfg.n_layers), &spec.shape);
        assert_eq!(info.ty, expected, "{}: type", info.name);
        let view = file.tensor(&info.name).unwrap();
        // Block by block, so a bad block is named.
        let mut values = Vec::with_capacity(view.n_elements());
        for (b, block) in view.bytes.chunks_exact(info.ty.block_bytes()).enumerate() {
            let start = values.len();
            values.extend(dequant::to_f32(info.ty, block));
            assert!(values[start..].iter().all(|v| v.is_finite()), "{} block {b}: a non-finite value", info.name);
        }
        check_values(&info.name, info.ty, ValueKind::of(&info.name), &values);
    }
    assert_eq!(plan.tensors.len(), specs.len());
}

#[test]
fn tiny_pack_in_every_mix_reads_back() {
    let dir = TempDir::new("mixes");
    let cfg = presets::tiny();
    for mix in QuantMix::ALL {
        let path = dir.0.join(format!("tiny-{mix}.gguf"));
        let plan = write(&cfg, mix, 11, 2, &path);
        assert!(plan.fallbacks().is_empty(), "{mix}: every tensor of the tiny preset fits its type");
        check_pack(&cfg, mix, 11, &path, &plan);
    }
}

#[test]
fn community_mix_types() {
    let cfg = presets::tiny();
    let plan = pack::plan(&cfg, QuantMix::Community, 0).unwrap();
    let ty = |name: &str| plan.tensors.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no {name}")).ty;
    use TensorType::*;
    let expected = [
        ("token_embd.weight", Q8_0),
        ("output.weight", Q6_K),
        ("output_norm.weight", F32),
        ("blk.0.ffn_gate_exps.weight", Q4_K),
        ("blk.0.ffn_up_exps.weight", Q4_K),
        ("blk.0.ffn_down_exps.weight", Q6_K),
        ("blk.1.ffn_down_exps.weight", Q5_K),
        ("blk.2.ffn_down_exps.weight", Q5_K),
        ("blk.3.ffn_down_exps.weight", Q6_K),
        ("blk.0.attn_qkv.weight", Q8_0),
        ("blk.0.attn_gate.weight", Q8_0),
        ("blk.0.ssm_out.weight", Q8_0),
        ("blk.0.ssm_alpha.weight", F32),
        ("blk.0.ssm_beta.weight", F32),
        ("blk.0.ssm_conv1d.weight", F32),
        ("blk.0.ssm_a", F32),
        ("blk.0.ssm_dt.bias", F32),
        ("blk.0.ssm_norm.weight", F32),
        ("blk.3.attn_q.weight", Q8_0),
        ("blk.3.attn_k.weight", Q8_0),
        ("blk.3.attn_v.weight", Q8_0),
        ("blk.3.attn_output.weight", Q8_0),
        ("blk.3.attn_q_norm.weight", F32),
        ("blk.0.ffn_gate_inp.weight", F32),
        ("blk.0.ffn_gate_inp_shexp.weight", F32),
        ("blk.0.ffn_gate_shexp.weight", Q8_0),
        ("blk.0.ffn_down_shexp.weight", Q8_0),
    ];
    for (name, t) in expected {
        assert_eq!(ty(name), t, "{name}");
    }
}

#[test]
fn fixture_config_falls_back_where_blocks_do_not_fit() {
    // hidden 64: no K-quant fits a row, so the community mix falls back to Q8_0.
    let dir = TempDir::new("fixture");
    let cfg = fixture_config();
    let path = dir.0.join("fixture.gguf");
    let plan = write(&cfg, QuantMix::Community, 3, 1, &path);
    let fallbacks = plan.fallbacks();
    assert!(fallbacks.iter().any(|t| t.name == "blk.0.ffn_gate_exps.weight" && t.ty == TensorType::Q8_0));
    assert!(fallbacks.iter().all(|t| t.wanted.is_quantized() && t.ty == TensorType::Q8_0));
    check_pack(&cfg, QuantMix::Community, 3, &path, &plan);
}

#[test]
fn bytes_depend_on_the_seed_not_the_threads() {
    let dir = TempDir::new("seed");
    let cfg = presets::tiny();
    let paths: Vec<PathBuf> = (0..5).map(|i| dir.0.join(format!("{i}.gguf"))).collect();
    write(&cfg, QuantMix::Community, 5, 1, &paths[0]);
    write(&cfg, QuantMix::Community, 5, 4, &paths[1]);
    write(&cfg, QuantMix::Community, 6, 2, &paths[2]);
    // F32: the expert tensors (2 MiB) span several chunks.
    write(&cfg, QuantMix::F32, 5, 1, &paths[3]);
    write(&cfg, QuantMix::F32, 5, 3, &paths[4]);
    let read = |i: usize| std::fs::read(&paths[i]).unwrap();
    assert!(read(0) == read(1), "community: same seed, 1 vs 4 threads: different bytes");
    assert!(read(3) == read(4), "f32: same seed, 1 vs 3 threads: different bytes");
    let (a, b) = (GgufFile::open(&paths[0]).unwrap(), GgufFile::open(&paths[2]).unwrap());
    for info in &a.tensors {
        let (x, y) = (a.tensor(&info.name).unwrap().bytes, b.tensor(&info.name).unwrap().bytes);
        assert!(x != y, "{} is the same for seeds 5 and 6", info.name);
    }
}

#[test]
fn synthetic_tokenizer_section_loads() {
    let cfg = presets::tiny();
    let plan = pack::plan(&cfg, QuantMix::Community, 0).unwrap();
    assert_eq!(plan.tokenizer, pack::TokenizerSource::Synthetic);
    let tok = Tokenizer::from_gguf_metadata(&plan.metadata).unwrap();
    assert_eq!(tok.n_ids(), cfg.vocab_size);
    let text = "the cat sat on the mat";
    let ids = tok.encode(text, Specials::With).unwrap();
    assert!(ids.len() < text.len(), "merges apply: {ids:?}");
    assert_eq!(tok.decode(&ids, Specials::With).unwrap(), text);
    let im_end = tok.token_to_id("<|im_end|>").unwrap();
    assert_eq!(tok.special_ids().eos, vec![im_end]);
    assert_eq!(tok.encode("<|im_end|>", Specials::With).unwrap(), vec![im_end]);
}

#[test]
fn real_config_plan() {
    let cfg = presets::real();
    let plan = pack::plan(&cfg, QuantMix::Community, 0).unwrap();
    assert_eq!(plan.tokenizer, pack::TokenizerSource::Qwen35);
    assert!(plan.fallbacks().is_empty());
    let specs = gguf_tensors(&cfg);
    assert_eq!(plan.tensors.len(), specs.len());
    // Per layer 2 norms + 8 MoE tensors, plus 9 GDN or 6 attention tensors; then embedding,
    // output norm, output.
    assert_eq!(specs.len(), 30 * 19 + 10 * 16 + 3);
    let len = plan.file_len();
    assert!((21_500_000_000..23_000_000_000).contains(&len), "real community pack: {len} bytes");
    let hist = plan.histogram();
    let of = |ty| hist.iter().find(|h| h.0 == ty).map(|h| (h.1, h.2)).unwrap_or((0, 0));
    assert_eq!(of(TensorType::Q4_K).0, 80);
    // Q6_K: 10 edge layers' down experts + the output head.
    assert_eq!((of(TensorType::Q5_K).0, of(TensorType::Q6_K).0), (30, 11));
    let down_q6 = 256 * 2048 * 512 / 256 * 210;
    assert_eq!(
        plan.header.sizes[plan.tensors.iter().position(|t| t.name == "blk.39.ffn_down_exps.weight").unwrap()],
        down_q6 as u64
    );

    // The tokenizer section is the real Qwen3.5 tokenizer: the chat prompt from
    // shared/reference/qwen35-tokenizer/README.md encodes to the documented ids.
    let meta = |k: &str| plan.metadata.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    assert_eq!(meta("tokenizer.ggml.bos_token_id"), Some(MetaValue::U32(248_044)));
    assert_eq!(meta("tokenizer.ggml.eos_token_id"), Some(MetaValue::U32(248_046)));
    assert_eq!(meta("tokenizer.ggml.padding_token_id"), Some(MetaValue::U32(248_055)));
    let tok = Tokenizer::from_gguf_metadata(&plan.metadata).unwrap();
    assert_eq!(tok.n_ids(), 248_320);
    let ids = tok.encode("<|im_start|>user\nWhat is 2+2?", Specials::With).unwrap();
    assert_eq!(ids, [248_045, 846, 198, 3710, 369, 220, 17, 10, 17, 30]);
    let ids = tok.encode("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", Specials::With).unwrap();
    assert_eq!(ids, [248_046, 198, 248_045, 74_455, 198, 248_068, 271, 248_069, 271]);
    assert_eq!(tok.id_to_token(248_300).as_deref(), None, "unused ids have no token");
    assert_eq!(
        meta("qwen35moe.rope.dimension_sections"),
        Some(MetaValue::Array([11, 11, 10, 0].map(MetaValue::I32).to_vec()))
    );
}

#[test]
fn bad_output_paths_give_clear_errors() {
    let dir = TempDir::new("paths");
    let plan = pack::plan(&presets::tiny(), QuantMix::Community, 0).unwrap();
    let opts = WriteOptions { seed: 0, threads: 1 };
    let try_write = |path: &Path| pack::write_pack(&plan, path, &opts, &mut |_| {});

    let missing = dir.0.join("no/such/dir/pack.gguf");
    let err = try_write(&missing).unwrap_err();
    assert!(matches!(&err, PackError::Output { .. }), "{err:?}");
    assert!(err.to_string().contains("does not exist"), "{err}");

    let file = dir.0.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = try_write(&file.join("pack.gguf")).unwrap_err();
    assert!(err.to_string().contains("is not a directory"), "{err}");

    let err = try_write(&dir.0).unwrap_err();
    assert!(err.to_string().contains("found a directory"), "{err}");

    // A directory squatting on PATH.tmp: creating the file fails, with the path named.
    let out = dir.0.join("pack.gguf");
    std::fs::create_dir(pack::write::tmp_path(&out)).unwrap();
    let err = try_write(&out).unwrap_err();
    assert!(matches!(&err, PackError::Io { path, .. } if path.ends_with("pack.gguf.tmp")), "{err:?}");
    assert!(!out.exists());
}

#[test]
fn generated_blocks_have_the_intended_magnitude() {
    use baro_engine::pack::blocks;
    use baro_engine::pack::rng::Xoshiro256;
    for ty in [
        TensorType::Q8_0,
        TensorType::Q4_K,
        TensorType::Q5_K,
        TensorType::Q6_K,
        TensorType::F32,
        TensorType::F16,
        TensorType::BF16,
    ] {
        for std in [0.02f32, 1.0] {
            let kind = ValueKind::Weight { std };
            let mut bytes = vec![0u8; ty.bytes_for(&[64, 256]).unwrap()];
            blocks::fill(ty, kind, &mut Xoshiro256::from_words(&[1, 2, 3]), &mut bytes);
            let values = dequant::to_f32(ty, &bytes);
            assert_eq!(values.len(), 64 * 256);
            check_values(&format!("{ty} std {std}"), ty, kind, &values);
        }
    }
    // No mix asks for a quantized non-weight tensor; the fill still stays in range.
    for kind in [ValueKind::Norm, ValueKind::Decay, ValueKind::DtBias, ValueKind::Conv] {
        let mut bytes = vec![0u8; TensorType::Q8_0.bytes_for(&[4, 256]).unwrap()];
        blocks::fill(TensorType::Q8_0, kind, &mut Xoshiro256::from_words(&[4]), &mut bytes);
        let values = dequant::to_f32(TensorType::Q8_0, &bytes);
        let (lo, hi) = kind.bounds();
        // Q8_0 rounds each value by up to half a step of max|x| / 127.
        let step = lo.abs().max(hi.abs()) / 127.0;
        assert!(values.iter().all(|&v| v >= lo - step && v <= hi + step), "{kind:?}: {values:?}");
    }
}

#[test]
fn stream_header_matches_the_in_memory_writer() {
    use baro_engine::model::gguf_write::{stream_header, TensorEntry};
    use baro_engine::model::GgufWriter;
    let tensors =
        [("a", TensorType::F32, vec![3]), ("b", TensorType::Q8_0, vec![2, 64]), ("c", TensorType::Q6_K, vec![256])];
    let mut w = GgufWriter::new();
    w.add_meta("general.architecture", MetaValue::String("qwen35moe".into()));
    w.add_meta("x.list", MetaValue::Array(vec![MetaValue::I32(1), MetaValue::I32(-2)]));
    let mut entries = Vec::new();
    for (name, ty, shape) in &tensors {
        w.add_tensor(name, *ty, shape, vec![7u8; ty.bytes_for(shape).unwrap()]).unwrap();
        entries.push(TensorEntry { name: name.to_string(), ty: *ty, shape: shape.clone() });
    }
    let (bytes, layout) = w.to_bytes();
    let meta = [
        ("general.architecture".to_string(), MetaValue::String("qwen35moe".into())),
        ("x.list".to_string(), MetaValue::Array(vec![MetaValue::I32(1), MetaValue::I32(-2)])),
    ];
    let header = stream_header(&meta, &entries, 32).unwrap();
    assert_eq!(header.bytes, bytes[..layout.data_offset]);
    assert_eq!(header.bytes.len() as u64 + header.data_len, bytes.len() as u64);
    let file = GgufFile::from_vec(bytes).unwrap();
    let offsets: Vec<u64> = file.tensors.iter().map(|t| t.offset).collect();
    assert_eq!(header.offsets, offsets);
    let bad = [TensorEntry { name: "q".into(), ty: TensorType::Q4_K, shape: vec![64] }];
    let err = stream_header(&meta, &bad, 32).unwrap_err();
    assert!(err.contains("\"q\"") && err.contains("Q4_K"), "{err}");
}
