//! The tokenizer rebuilt from GGUF metadata: a GGUF written from the Qwen3.5 tokenizer.json's
//! vocabulary and merges (laid out as Qwen3.5 packs are: 248,320 ids, specials type 3, unused
//! `[PAD…]` type 5) encodes and decodes a few hundred strings exactly as the tokenizer.json
//! does; malformed metadata gives the matching error.

use std::io::Read;

use baro_engine::model::{GgufFile, GgufWriter, MetaValue};
use baro_engine::tokenizer::chat::QWEN35_TEMPLATE;
use baro_engine::tokenizer::{Specials, Tokenizer, TokenizerError};

fn strings(items: &[&str]) -> MetaValue {
    MetaValue::Array(items.iter().map(|s| MetaValue::String(s.to_string())).collect())
}

fn ints(items: &[i32]) -> MetaValue {
    MetaValue::Array(items.iter().map(|&t| MetaValue::I32(t)).collect())
}

/// Reads the reference tokenizer.json and writes its vocabulary into GGUF metadata.
fn qwen_gguf_bytes() -> Vec<u8> {
    let gz = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/qwen35-tokenizer.json.gz")).unwrap();
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut json).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let n_ids = 248_320;
    let mut tokens = vec![String::new(); n_ids];
    let mut types = vec![5i32; n_ids];
    for (token, id) in doc["model"]["vocab"].as_object().unwrap() {
        let id = id.as_u64().unwrap() as usize;
        tokens[id] = token.clone();
        types[id] = 1;
    }
    for t in doc["added_tokens"].as_array().unwrap() {
        let id = t["id"].as_u64().unwrap() as usize;
        tokens[id] = t["content"].as_str().unwrap().to_string();
        types[id] = 3;
    }
    for (id, token) in tokens.iter_mut().enumerate() {
        if token.is_empty() {
            *token = format!("[PAD{id}]");
        }
    }
    let merges: Vec<MetaValue> = doc["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| MetaValue::String(format!("{} {}", m[0].as_str().unwrap(), m[1].as_str().unwrap())))
        .collect();
    let mut w = GgufWriter::new();
    w.add_meta("general.architecture", MetaValue::String("qwen35moe".into()));
    w.add_meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()));
    w.add_meta("tokenizer.ggml.pre", MetaValue::String("qwen35".into()));
    w.add_meta("tokenizer.ggml.tokens", MetaValue::Array(tokens.into_iter().map(MetaValue::String).collect()));
    w.add_meta("tokenizer.ggml.token_type", MetaValue::Array(types.into_iter().map(MetaValue::I32).collect()));
    w.add_meta("tokenizer.ggml.merges", MetaValue::Array(merges));
    w.add_meta("tokenizer.ggml.bos_token_id", MetaValue::U32(248044));
    w.add_meta("tokenizer.ggml.eos_token_id", MetaValue::U32(248046));
    w.add_meta("tokenizer.ggml.padding_token_id", MetaValue::U32(248055));
    w.add_meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(false));
    w.add_meta("tokenizer.chat_template", MetaValue::String(QWEN35_TEMPLATE.into()));
    w.to_bytes().0
}

/// A few hundred texts: fragments of many scripts, code, whitespace and special tokens, joined
/// pseudo-randomly.
fn corpus() -> Vec<String> {
    const PARTS: &[&str] = &[
        "Hello",
        " world",
        "!",
        " 毕老师",
        "！",
        "1 + 1 = 2",
        " ĠÑĤÐ²ÑĬÑĢ",
        "\n",
        "\r\n",
        "\t",
        "  ",
        "   \n",
        "Съешь же ещё",
        " этих",
        "日本語",
        "のテキスト",
        "中文分词",
        "人力资源",
        "한국어",
        " العربية",
        " हिन्दी",
        "ภาษาไทย",
        "🦀",
        "👩‍👩‍👧",
        "🇳🇱",
        "e\u{301}",
        "Ünïcödé",
        "fn main() {",
        "    let x = 42;",
        "}",
        "x**2",
        "0xDEADBEEF",
        "3.14159",
        "I'm",
        " you'll",
        " they've",
        "'S",
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "<|endoftext|>",
        "user",
        "assistant",
        "\u{a0}",
        "\u{2003}",
        "¿Qué?",
        "naïve café",
        "Ελληνικά",
        "ـــ",
        "‍",
        "\u{feff}",
        "a\u{0}b",
        "...",
        "—",
        "«»",
        "$$",
        "@@",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out: Vec<String> = PARTS.iter().map(|s| s.to_string()).collect();
    while out.len() < 400 {
        let n = 1 + (next() % 12) as usize;
        out.push((0..n).map(|_| PARTS[(next() % PARTS.len() as u64) as usize]).collect());
    }
    out
}

#[test]
fn gguf_tokenizer_equals_tokenizer_json() {
    let started = std::time::Instant::now();
    let file = GgufFile::from_vec(qwen_gguf_bytes()).unwrap();
    let from_gguf = Tokenizer::from_gguf(&file).unwrap();
    let from_json = Tokenizer::qwen35().unwrap();
    eprintln!("built both tokenizers in {:.1?}", started.elapsed());

    assert_eq!(from_gguf.n_ids(), 248_320);
    let s = from_gguf.special_ids();
    assert_eq!((s.bos, s.eos.as_slice(), s.pad, s.add_bos), (Some(248044), &[248046][..], Some(248055), false));
    assert_eq!(from_gguf.chat_template(), Some(QWEN35_TEMPLATE));
    for id in [248044, 248045, 248068, 248076] {
        assert!(from_gguf.is_special(id));
        assert_eq!(from_gguf.id_to_token(id), from_json.id_to_token(id));
    }
    // Unused ids decode to nothing; past the table is an error.
    assert_eq!(from_gguf.decode(&[9419, 248100, 0], Specials::With).unwrap(), "Hello!");
    assert!(from_gguf.decode(&[248320], Specials::With).is_err());

    let texts = corpus();
    assert!(texts.len() >= 400);
    let mut n_tokens = 0;
    for text in &texts {
        for specials in [Specials::With, Specials::Without] {
            let a = from_json.encode(text, specials).unwrap();
            let b = from_gguf.encode(text, specials).unwrap();
            assert_eq!(a, b, "{text:?} with {specials:?}");
            assert_eq!(from_json.decode(&a, specials).unwrap(), from_gguf.decode(&b, specials).unwrap(), "{text:?}");
            n_tokens += a.len();
        }
    }
    eprintln!("{} texts, {n_tokens} tokens equal; {:.1?} in all", texts.len(), started.elapsed());
}

/// A tiny valid vocabulary: a, b, Ġ, ab, Ġab, then <|end|> (control), <x> (user-defined),
/// [PAD7] (unused).
fn tiny() -> Vec<(String, MetaValue)> {
    vec![
        ("tokenizer.ggml.model".into(), MetaValue::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), MetaValue::String("qwen35".into())),
        ("tokenizer.ggml.tokens".into(), strings(&["a", "b", "Ġ", "ab", "Ġab", "<|end|>", "<x>", "[PAD7]"])),
        ("tokenizer.ggml.token_type".into(), ints(&[1, 1, 1, 1, 1, 3, 4, 5])),
        ("tokenizer.ggml.merges".into(), strings(&["a b", "Ġ ab"])),
        ("tokenizer.ggml.eos_token_id".into(), MetaValue::U32(5)),
        ("tokenizer.ggml.add_bos_token".into(), MetaValue::Bool(true)),
        ("tokenizer.ggml.bos_token_id".into(), MetaValue::U32(5)),
    ]
}

fn with(mut meta: Vec<(String, MetaValue)>, key: &str, value: Option<MetaValue>) -> Vec<(String, MetaValue)> {
    meta.retain(|(k, _)| k != key);
    if let Some(v) = value {
        meta.push((key.to_string(), v));
    }
    meta
}

#[test]
fn tiny_vocabulary_through_a_gguf_file() {
    let mut w = GgufWriter::new();
    for (k, v) in tiny() {
        w.add_meta(&k, v);
    }
    let file = GgufFile::from_vec(w.to_bytes().0).unwrap();
    let tok = Tokenizer::from_gguf(&file).unwrap();
    assert_eq!(tok.encode("ab ab<|end|>b<x>", Specials::With).unwrap(), [3, 4, 5, 1, 6]);
    // Decoding without specials drops the control token but keeps the user-defined one.
    assert_eq!(tok.decode(&[3, 4, 5, 1, 6], Specials::With).unwrap(), "ab ab<|end|>b<x>");
    assert_eq!(tok.decode(&[3, 4, 5, 1, 6], Specials::Without).unwrap(), "ab abb<x>");
    assert_eq!(tok.decode(&[7], Specials::With).unwrap(), "");
    assert_eq!(tok.n_ids(), 8);
    assert!(tok.special_ids().add_bos);
    assert_eq!(tok.special_ids().bos, Some(5));
    assert_eq!(tok.chat_template(), None);
}

#[test]
fn malformed_metadata_errors() {
    use TokenizerError as E;
    let err = |meta: Vec<(String, MetaValue)>| Tokenizer::from_gguf_metadata(&meta).unwrap_err();
    let cases: Vec<(Vec<(String, MetaValue)>, E)> = vec![
        (with(tiny(), "tokenizer.ggml.model", None), E::MissingKey { key: "tokenizer.ggml.model".into() }),
        (with(tiny(), "tokenizer.ggml.tokens", None), E::MissingKey { key: "tokenizer.ggml.tokens".into() }),
        (with(tiny(), "tokenizer.ggml.merges", None), E::MissingKey { key: "tokenizer.ggml.merges".into() }),
        (
            with(tiny(), "tokenizer.ggml.model", Some(MetaValue::String("llama".into()))),
            E::Unsupported {
                key: "tokenizer.ggml.model".into(),
                expected: "\"gpt2\" (byte-level bpe)",
                found: "llama".into(),
            },
        ),
        (
            with(tiny(), "tokenizer.ggml.pre", Some(MetaValue::String("llama3".into()))),
            E::Unsupported { key: "tokenizer.ggml.pre".into(), expected: "\"qwen35\"", found: "llama3".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.model", Some(MetaValue::U32(2))),
            E::WrongType { key: "tokenizer.ggml.model".into(), expected: "a string", found: "a u32".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.tokens", Some(MetaValue::String("a".into()))),
            E::WrongType { key: "tokenizer.ggml.tokens".into(), expected: "an array", found: "a string".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.tokens", Some(ints(&[1, 2]))),
            E::WrongType {
                key: "tokenizer.ggml.tokens".into(),
                expected: "an array of strings",
                found: "a i32".into(),
            },
        ),
        (
            with(tiny(), "tokenizer.ggml.token_type", Some(strings(&["1"]))),
            E::WrongType {
                key: "tokenizer.ggml.token_type".into(),
                expected: "an array of integers",
                found: "a string".into(),
            },
        ),
        (
            with(tiny(), "tokenizer.ggml.token_type", Some(ints(&[1, 1, 1]))),
            E::LengthMismatch { key: "tokenizer.ggml.token_type".into(), expected: 8, found: 3 },
        ),
        (
            with(tiny(), "tokenizer.ggml.token_type", Some(ints(&[1, 1, 1, 1, 1, 3, 7, 5]))),
            E::BadTokenType { id: 6, found: 7 },
        ),
        (
            with(tiny(), "tokenizer.ggml.token_type", Some(ints(&[1, 1, 0, 1, 1, 3, 4, 5]))),
            E::BadTokenType { id: 2, found: 0 },
        ),
        (
            with(
                tiny(),
                "tokenizer.ggml.tokens",
                Some(strings(&["a", "b", "Ġ", "ab", "Ġab", "<|end|>", "a", "[PAD7]"])),
            ),
            E::DuplicateToken { token: "a".into(), first: 0, second: 6 },
        ),
        (
            with(
                tiny(),
                "tokenizer.ggml.tokens",
                Some(strings(&["a", "b", "", "ab", "Ġab", "<|end|>", "<x>", "[PAD7]"])),
            ),
            E::EmptyToken { id: 2 },
        ),
        (with(tiny(), "tokenizer.ggml.merges", Some(strings(&["ab"]))), E::BadMerge { index: 0, found: "ab".into() }),
        (
            with(tiny(), "tokenizer.ggml.merges", Some(strings(&["a b", "Ġ  ab"]))),
            E::BadMerge { index: 1, found: "Ġ  ab".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.merges", Some(strings(&["a b c"]))),
            E::BadMerge { index: 0, found: "a b c".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.merges", Some(strings(&["a z"]))),
            E::MergeNotInVocab { index: 0, found: "a z".into(), part: "z".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.merges", Some(strings(&["b a"]))),
            E::MergeNotInVocab { index: 0, found: "b a".into(), part: "ba".into() },
        ),
        (
            // A merge may not name an unused token.
            with(tiny(), "tokenizer.ggml.merges", Some(strings(&["a [PAD7]"]))),
            E::MergeNotInVocab { index: 0, found: "a [PAD7]".into(), part: "[PAD7]".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.eos_token_id", Some(MetaValue::U32(8))),
            E::IdOutOfRange { key: "tokenizer.ggml.eos_token_id".into(), id: 8, n_tokens: 8 },
        ),
        (
            with(tiny(), "tokenizer.ggml.eos_token_id", Some(MetaValue::I32(-1))),
            E::WrongType {
                key: "tokenizer.ggml.eos_token_id".into(),
                expected: "a non-negative integer",
                found: "a i32".into(),
            },
        ),
        (
            with(tiny(), "tokenizer.ggml.padding_token_id", Some(MetaValue::U32(7))),
            E::UnusedSpecial { key: "tokenizer.ggml.padding_token_id".into(), id: 7, token: "[PAD7]".into() },
        ),
        (
            with(tiny(), "tokenizer.ggml.add_bos_token", Some(MetaValue::U8(1))),
            E::WrongType { key: "tokenizer.ggml.add_bos_token".into(), expected: "a bool", found: "a u8".into() },
        ),
        (
            with(tiny(), "tokenizer.chat_template", Some(strings(&["x"]))),
            E::WrongType {
                key: "tokenizer.chat_template".into(),
                expected: "a string",
                found: "an array of 1 string".into(),
            },
        ),
    ];
    for (meta, expected) in cases {
        let found = err(meta);
        assert_eq!(found, expected, "{found}");
        let text = found.to_string();
        assert!(text.chars().next().is_some_and(|c| c.is_lowercase()) && !text.ends_with('.'), "{text}");
    }
}
