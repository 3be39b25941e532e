//! The Qwen3.5 tokenizer loaded from `tokenizer.json`: the ids its documentation lists, round
//! trips on multilingual text, special tokens with and without parsing, streaming decode, file
//! loading (plain and gzipped) and its errors.

use std::path::Path;
use std::sync::OnceLock;

use baro_engine::tokenizer::{Specials, Tokenizer, TokenizerError};

fn qwen() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| Tokenizer::qwen35().expect("the built-in tokenizer loads"))
}

/// Texts in NFC (the normaliser's form), so that decode(encode(t)) == t.
const TEXTS: &[&str] = &[
    "Hello, world!",
    "  leading and trailing spaces  ",
    "line one\r\nline two\n\n\tindented\n",
    "Ünïcödé façade — “quotes” …",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Λορεμ ιψθμ δολορ σιτ αμετ",
    "日本語のテキストとカタカナ、ひらがな。",
    "中文分词测试：人工智能正在改变世界。",
    "한국어 문장도 잘 처리되어야 합니다.",
    "العربية تكتب من اليمين إلى اليسار",
    "हिन्दी में लिखा गया वाक्य",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "emoji 🦀🚀 and families 👩‍👩‍👧 and flags 🇳🇱",
    "fn main() {\n    println!(\"{}\", 1 + 2 * 3);\n}\n",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # comment",
    "numbers 1234567890 3.14159 -42 1e-9 0xDEADBEEF",
    "I'm sure you'll see they've done it; it's what we'd do.",
    "mixed: English, Deutsch (Größe), français, 中文, русский, 🙂",
    "",
    " ",
    "\u{a0}non-breaking\u{2003}em space",
];

#[test]
fn documented_example_ids() {
    let tok = qwen();
    let text = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ";
    let ids = tok.encode(text, Specials::With).unwrap();
    assert_eq!(
        ids,
        [
            9419, 0, 220, 97169, 97621, 6115, 16, 478, 220, 16, 283, 220, 17, 9551, 254, 68933, 128, 97, 91914, 28495,
            68933, 128, 105, 68933, 128, 95
        ]
    );
    assert_eq!(tok.decode(&ids, Specials::With).unwrap(), text);
}

#[test]
fn special_tokens_and_ids() {
    let tok = qwen();
    assert_eq!(tok.token_to_id("<|endoftext|>"), Some(248044));
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(248045));
    assert_eq!(tok.token_to_id("<|im_end|>"), Some(248046));
    assert_eq!(tok.token_to_id("<think>"), Some(248068));
    assert_eq!(tok.token_to_id("</think>"), Some(248069));
    assert_eq!(tok.token_to_id("<|audio_pad|>"), Some(248076));
    assert_eq!(tok.n_ids(), 248077);
    assert!(tok.is_special(248045));
    assert!(!tok.is_special(9419));
    let s = tok.special_ids();
    assert_eq!(s.eos, [248046, 248044]);
    assert_eq!(s.bos, None);
    assert_eq!(s.pad, Some(248055));
    assert!(!s.add_bos);
}

#[test]
fn round_trips_multilingual() {
    let tok = qwen();
    for text in TEXTS {
        for specials in [Specials::With, Specials::Without] {
            let ids = tok.encode(text, specials).unwrap();
            assert!(ids.iter().all(|&id| id < 248044), "{text:?}: no special ids in plain text");
            assert_eq!(tok.decode(&ids, specials).unwrap(), *text, "{text:?} with {specials:?}");
        }
    }
}

#[test]
fn normalises_to_nfc() {
    let tok = qwen();
    // e + combining acute encodes as the precomposed é.
    assert_eq!(tok.encode("e\u{301}", Specials::With).unwrap(), tok.encode("é", Specials::With).unwrap());
    assert_eq!(tok.decode(&tok.encode("e\u{301}", Specials::With).unwrap(), Specials::With).unwrap(), "é");
}

#[test]
fn specials_parsed_or_literal() {
    let tok = qwen();
    let text = "<|im_start|>user\nhi<|im_end|>";
    let with = tok.encode(text, Specials::With).unwrap();
    assert_eq!(with.first(), Some(&248045));
    assert_eq!(with.last(), Some(&248046));
    assert_eq!(with[1..3], [846, 198]);
    let without = tok.encode(text, Specials::Without).unwrap();
    assert!(without.iter().all(|&id| id < 248044), "{without:?}");
    assert!(without.len() > with.len());
    assert_eq!(tok.decode(&without, Specials::With).unwrap(), text);
    // Decoding with and without specials.
    assert_eq!(tok.decode(&with, Specials::With).unwrap(), text);
    assert_eq!(tok.decode(&with, Specials::Without).unwrap(), "user\nhi");
}

#[test]
fn decode_rejects_ids_past_the_vocabulary() {
    let tok = qwen();
    assert_eq!(
        tok.decode(&[9419, 248077], Specials::With),
        Err(TokenizerError::BadId { id: 248077, n_tokens: 248077 })
    );
    assert!(tok.decode(&[u32::MAX], Specials::Without).is_err());
}

#[test]
fn streaming_decode_yields_complete_text() {
    let tok = qwen();
    for text in TEXTS {
        let ids = tok.encode(text, Specials::With).unwrap();
        let mut stream = tok.stream(Specials::With);
        let mut out = String::new();
        for &id in &ids {
            let piece = stream.push(id).unwrap();
            assert!(!piece.contains('\u{FFFD}'), "{text:?}: piece {piece:?}");
            out.push_str(&piece);
        }
        out.push_str(&stream.finish().unwrap());
        assert_eq!(out, *text);
    }
}

#[test]
fn streaming_decode_holds_split_characters() {
    let tok = qwen();
    // 🦀 is three byte-level tokens; only the last completes the character.
    let ids = tok.encode("a🦀", Specials::With).unwrap();
    assert_eq!(ids.len(), 4, "{ids:?}");
    let mut stream = tok.stream(Specials::With);
    let pieces: Vec<String> = ids.iter().map(|&id| stream.push(id).unwrap()).collect();
    assert_eq!(pieces, ["a", "", "", "🦀"]);
    // An unfinished character is flushed as U+FFFD.
    let mut stream = tok.stream(Specials::With);
    assert_eq!(stream.push(ids[1]).unwrap(), "");
    assert_eq!(stream.finish().unwrap(), "\u{FFFD}");
    // Special tokens: rendered or skipped.
    let mut stream = tok.stream(Specials::Without);
    assert_eq!(stream.push(248045).unwrap(), "");
    assert_eq!(stream.push(846).unwrap(), "user");
    let mut stream = tok.stream(Specials::With);
    assert_eq!(stream.push(248045).unwrap(), "<|im_start|>");
    assert!(stream.push(248077).is_err());
}

/// A four-letter byte-level BPE tokenizer.json, to test loading without the large file.
const SMALL_JSON: &str = r#"{"version":"1.0","truncation":null,"padding":null,
 "added_tokens":[{"id":6,"content":"<|end|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
 "normalizer":{"type":"NFC"},
 "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},
 "post_processor":null,
 "decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},
 "model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"","fuse_unk":false,"byte_fallback":false,"ignore_merges":false,
   "vocab":{"a":0,"b":1,"Ġ":2,"ab":3,"Ġab":4,"c":5},"merges":[["a","b"],["Ġ","ab"]]}}"#;

#[test]
fn loads_plain_and_gzipped_files() {
    let dir = tempfile::tempdir().unwrap(); // removed when the test ends
    let plain = dir.path().join("tokenizer.json");
    std::fs::write(&plain, SMALL_JSON).unwrap();
    let tok = Tokenizer::from_file(&plain).unwrap();
    assert_eq!(tok.encode("ab ab<|end|>c", Specials::With).unwrap(), [3, 4, 6, 5]);
    assert_eq!(tok.n_ids(), 7);
    assert!(tok.special_ids().eos.is_empty());

    let gz = dir.path().join("tokenizer.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, SMALL_JSON.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let tok = Tokenizer::from_file(&gz).unwrap();
    assert_eq!(tok.decode(&[3, 4, 6, 5], Specials::Without).unwrap(), "ab abc");
}

#[test]
fn the_shipped_asset_is_the_reference_file() {
    let asset = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/qwen35-tokenizer.json.gz");
    let reference =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference/qwen35-tokenizer/tokenizer.json.gz");
    let asset_bytes = std::fs::read(&asset).unwrap();
    match std::fs::read(&reference) {
        Ok(r) => assert!(r == asset_bytes, "assets/qwen35-tokenizer.json.gz differs from {}", reference.display()),
        Err(e) => eprintln!("skipping the comparison: {}: {e}", reference.display()),
    }
    // And loading it from the file gives the built-in tokenizer's ids.
    let from_file = Tokenizer::from_file(&asset).unwrap();
    let text = TEXTS.concat();
    assert_eq!(from_file.encode(&text, Specials::With).unwrap(), qwen().encode(&text, Specials::With).unwrap());
}

#[test]
fn file_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap(); // removed when the test ends
    let missing = dir.path().join("missing.json");
    let err = Tokenizer::from_file(&missing).unwrap_err();
    assert!(matches!(err, TokenizerError::Io { .. }), "{err}");
    assert!(err.to_string().starts_with("cannot read "), "{err}");

    let not_gz = dir.path().join("not.json.gz");
    std::fs::write(&not_gz, SMALL_JSON).unwrap();
    let err = Tokenizer::from_file(&not_gz).unwrap_err();
    assert!(matches!(err, TokenizerError::Gzip { .. }), "{err}");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"model\": 3}").unwrap();
    let err = Tokenizer::from_file(&bad).unwrap_err();
    assert!(matches!(err, TokenizerError::Json { .. }), "{err}");
    assert!(err.to_string().contains("bad.json"), "{err}");

    let truncated = &SMALL_JSON[..SMALL_JSON.len() / 2];
    assert!(matches!(Tokenizer::from_json_bytes(truncated.as_bytes(), "half"), Err(TokenizerError::Json { .. })));
}

/// The smallest file of the kind the `tokenizer_json` fuzz target first crashed on: a JSON
/// syntax error (a trailing comma, which serde_json reports as "key must be a string") inside
/// `"decoder"`, where tokenizers 0.23 panics (`decoders/mod.rs`: `.expect("Helper")`) instead
/// of returning its error. The fuzzed input itself, and this one, are in
/// `fuzz/regressions/tokenizer_json/` (replayed by `fuzz/tests/it/corpus.rs`).
const DECODER_SYNTAX_ERROR: &str = r#"{"decoder":{"type":"ByteLevel",}}"#;

#[test]
fn a_file_that_makes_tokenizers_panic_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap(); // removed when the test ends
                                            // The control: the input does reach the panic in the crate itself. If a newer tokenizers
                                            // returns an error instead, the engine's answer below must stay the same; only this
                                            // control goes.
    let raw = std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(DECODER_SYNTAX_ERROR.as_bytes()));
    assert!(raw.is_err(), "tokenizers no longer panics on {DECODER_SYNTAX_ERROR}: drop this control");

    let path = dir.path().join("decoder_syntax_error.json");
    std::fs::write(&path, DECODER_SYNTAX_ERROR).unwrap();
    let err = Tokenizer::from_file(&path).unwrap_err();
    assert!(matches!(err, TokenizerError::Json { .. }), "{err:?}");
    let text = err.to_string();
    for want in [
        path.display().to_string().as_str(),
        "expected JSON, found a syntax error",
        "key must be a string",
        "line 1 column 32",
    ] {
        assert!(text.contains(want), "{text:?} should contain {want:?}");
    }
    // The same twice in a row (a caught panic leaves nothing behind), and from bytes.
    assert_eq!(Tokenizer::from_file(&path).unwrap_err(), err);
    let err = Tokenizer::from_json_bytes(DECODER_SYNTAX_ERROR.as_bytes(), "inline").unwrap_err();
    assert!(err.to_string().starts_with("bad tokenizer.json (inline): expected JSON"), "{err}");
    // Well-formed files still load after a caught panic.
    assert!(Tokenizer::from_json_bytes(SMALL_JSON.as_bytes(), "small").is_ok());
}

#[test]
fn a_decoder_that_makes_tokenizers_panic_is_a_decode_error() {
    // Well-formed, and loads; tokenizers 0.23's `Strip` decoder then slices `"a"` as [1..0]
    // (its start cut passes its stop cut) and panics on decode.
    let strip = SMALL_JSON.replace(
        r#""decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}"#,
        r#""decoder":{"type":"Strip","content":"a","start":1,"stop":1}"#,
    );
    assert_ne!(strip, SMALL_JSON);
    let tok = Tokenizer::from_json_bytes(strip.as_bytes(), "strip").unwrap();
    let raw = std::panic::catch_unwind(|| tok.inner().decode(&[0], false));
    assert!(raw.is_err(), "tokenizers no longer panics decoding with this Strip decoder: drop this control");

    let err = tok.decode(&[0], Specials::With).unwrap_err();
    assert!(matches!(err, TokenizerError::Decode { .. }), "{err:?}");
    assert!(err.to_string().starts_with("cannot decode ids: the tokenizers crate panicked: "), "{err}");
    let mut stream = tok.stream(Specials::With);
    assert!(stream.push(0).is_err());
    // Ids the decoder does not trip on still decode, and encoding is untouched.
    assert_eq!(tok.decode(&[1], Specials::With).unwrap(), "b");
    assert_eq!(tok.encode("ab", Specials::With).unwrap(), [3]);
}

/// The exact input the `tokenizer_json` fuzz target crashed on (its artifact
/// `crash-760033abb9ea6fa0f626bff448166245961caa49`): the fixture's tokenizer.json with
/// mutated bytes, which tokenizers 0.23 panics on while loading. The engine says it is not
/// JSON, and where.
#[test]
fn the_fuzzed_crash_input_is_a_clear_error() {
    let fuzzed: &[u8] =
        include_bytes!("../../../fuzz/regressions/tokenizer_json/decoder_syntax_error_panic.fuzzed.json");
    let raw = std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(fuzzed));
    assert!(raw.is_err(), "tokenizers no longer panics on the fuzzed input: drop this control");

    let err = Tokenizer::from_json_bytes(fuzzed, "fuzzed").unwrap_err();
    assert!(matches!(err, TokenizerError::Json { .. }), "{err:?}");
    let text = err.to_string();
    let want =
        "bad tokenizer.json (fuzzed): expected JSON, found a syntax error: expected `,` or `}` at line 1 column 1522";
    assert!(text.starts_with(want), "{text:?} should start with {want:?}");
}
