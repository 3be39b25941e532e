//! The `tokenizer.ggml.*` section of a synthetic pack, laid out as Qwen3.5 packs carry it
//! (byte-level BPE `gpt2`, pre-tokenizer `qwen35`, tokens, token types, merges, special ids,
//! the chat template):
//!
//! - a vocabulary that holds every id of the real Qwen3.5 tokenizer (at least 248,077) gets
//!   that tokenizer: its 248,044 BPE tokens (type 1) and 247,556 merges, its 33 special tokens
//!   (type 3) at 248044–248076, and `[PAD{id}]` (type 5) for the ids after them; bos 248044
//!   `<|endoftext|>`, eos 248046 `<|im_end|>`, padding 248055 `<|vision_pad|>`;
//! - a smaller one gets a synthetic byte-level vocabulary: the 256 byte tokens, merged tokens
//!   (Ġ + letter, letter pairs, then longer) up to the last five ids, which hold
//!   `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, `<think>`, `</think>` (type 3).
//!
//! The real tokenizer is the one `tokenizer/` ships (`assets/qwen35-tokenizer.json.gz`, Qwen's
//! vocabulary under Apache-2.0; see `assets/README.md`), embedded so the binary needs no files.

use std::collections::HashSet;
use std::io::Read;

use serde_json::Value;

use crate::model::gguf::MetaValue;
use crate::pack::PackError;
use crate::tokenizer::chat::QWEN35_TEMPLATE;

const QWEN35_TOKENIZER_GZ: &[u8] = include_bytes!("../../assets/qwen35-tokenizer.json.gz");

/// One past the largest id of the real tokenizer (its last special token is 248076).
pub const QWEN35_N_IDS: usize = 248_077;

const TYPE_NORMAL: i32 = 1;
const TYPE_CONTROL: i32 = 3;
const TYPE_UNUSED: i32 = 5;

/// Which vocabulary a pack's tokenizer section holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerSource {
    Qwen35,
    Synthetic,
}

/// The special tokens of the synthetic vocabulary, in id order at its end.
pub const SYNTHETIC_SPECIALS: [&str; 5] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"];

/// The tokenizer metadata for a vocabulary of `vocab_size` ids.
pub fn tokenizer_metadata(vocab_size: usize) -> Result<(Vec<(String, MetaValue)>, TokenizerSource), PackError> {
    if vocab_size >= QWEN35_N_IDS {
        Ok((qwen35(vocab_size)?, TokenizerSource::Qwen35))
    } else {
        Ok((synthetic(vocab_size)?, TokenizerSource::Synthetic))
    }
}

struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    merges: Vec<String>,
    bos: u32,
    eos: u32,
    pad: u32,
}

impl Vocab {
    fn into_metadata(self) -> Vec<(String, MetaValue)> {
        let strings = |v: Vec<String>| MetaValue::Array(v.into_iter().map(MetaValue::String).collect());
        let k = |s: &str| format!("tokenizer.ggml.{s}");
        vec![
            (k("model"), MetaValue::String("gpt2".into())),
            (k("pre"), MetaValue::String("qwen35".into())),
            (k("tokens"), strings(self.tokens)),
            (k("token_type"), MetaValue::Array(self.types.into_iter().map(MetaValue::I32).collect())),
            (k("merges"), strings(self.merges)),
            (k("bos_token_id"), MetaValue::U32(self.bos)),
            (k("eos_token_id"), MetaValue::U32(self.eos)),
            (k("padding_token_id"), MetaValue::U32(self.pad)),
            (k("add_bos_token"), MetaValue::Bool(false)),
            ("tokenizer.chat_template".into(), MetaValue::String(QWEN35_TEMPLATE.into())),
        ]
    }
}

fn bad(message: impl Into<String>) -> PackError {
    PackError::Tokenizer { message: message.into() }
}

fn qwen35(vocab_size: usize) -> Result<Vec<(String, MetaValue)>, PackError> {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(QWEN35_TOKENIZER_GZ)
        .read_to_end(&mut json)
        .map_err(|e| bad(format!("the built-in qwen3.5 tokenizer: cannot gunzip: {e}")))?;
    let doc: Value = serde_json::from_slice(&json).map_err(|e| bad(format!("the built-in qwen3.5 tokenizer: {e}")))?;
    let mut tokens: Vec<Option<String>> = vec![None; vocab_size];
    let mut types = vec![TYPE_UNUSED; vocab_size];
    let mut place = |id: &Value, token: &str, ty: i32| -> Result<(), PackError> {
        let id = id.as_u64().map(|i| i as usize).filter(|&i| i < vocab_size);
        let id = id.ok_or_else(|| bad(format!("token {token:?}: expected an id below {vocab_size}, found {id:?}")))?;
        tokens[id] = Some(token.to_string());
        types[id] = ty;
        Ok(())
    };
    let vocab = doc["model"]["vocab"].as_object().ok_or_else(|| bad("model.vocab: expected an object"))?;
    for (token, id) in vocab {
        place(id, token, TYPE_NORMAL)?;
    }
    let added = doc["added_tokens"].as_array().ok_or_else(|| bad("added_tokens: expected an array"))?;
    for t in added {
        let content = t["content"].as_str().ok_or_else(|| bad("added_tokens: expected a content string"))?;
        place(&t["id"], content, TYPE_CONTROL)?;
    }
    let merges = doc["model"]["merges"].as_array().ok_or_else(|| bad("model.merges: expected an array"))?;
    let merges = merges
        .iter()
        .map(|m| match m {
            Value::String(s) => Ok(s.clone()),
            Value::Array(pair) => match (pair.first().and_then(Value::as_str), pair.get(1).and_then(Value::as_str)) {
                (Some(a), Some(b)) if pair.len() == 2 => Ok(format!("{a} {b}")),
                _ => Err(bad(format!("model.merges: expected a pair of strings, found {m}"))),
            },
            other => Err(bad(format!("model.merges: expected a string or a pair, found {other}"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tokens: Vec<String> =
        tokens.into_iter().enumerate().map(|(id, t)| t.unwrap_or_else(|| format!("[PAD{id}]"))).collect();
    let id_of = |s: &str| -> Result<u32, PackError> {
        tokens
            .iter()
            .position(|t| t == s)
            .map(|i| i as u32)
            .ok_or_else(|| bad(format!("expected the special token {s:?}, found none")))
    };
    let (bos, eos, pad) = (id_of("<|endoftext|>")?, id_of("<|im_end|>")?, id_of("<|vision_pad|>")?);
    Ok(Vocab { tokens, types, merges, bos, eos, pad }.into_metadata())
}

/// GPT-2's byte-level alphabet: the printable character standing for each byte.
fn byte_chars() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next = 256;
    (0u32..256)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap_or('?')
            } else {
                let c = char::from_u32(next).unwrap_or('?');
                next += 1;
                c
            }
        })
        .collect()
}

fn synthetic(vocab_size: usize) -> Result<Vec<(String, MetaValue)>, PackError> {
    let min = 256 + SYNTHETIC_SPECIALS.len();
    if vocab_size < min {
        return Err(bad(format!(
            "a synthetic byte-level vocabulary needs at least {min} ids, the config has {vocab_size}"
        )));
    }
    let n_merged = vocab_size - min;
    let mut tokens: Vec<String> = byte_chars().into_iter().map(String::from).collect();
    let mut seen: HashSet<String> = tokens.iter().cloned().collect();
    let mut merges = Vec::with_capacity(n_merged);
    let letters: Vec<String> = "etaoinshrdlucmfwypvbgkjqxz".chars().map(String::from).collect();
    let mut lefts: Vec<String> = std::iter::once("Ġ".to_string()).chain(letters.iter().cloned()).collect();
    // Each round merges every token of the last round with every letter; rounds grow the tokens
    // by one character, so every merge's parts already exist.
    while merges.len() < n_merged {
        let mut made = Vec::new();
        'round: for left in &lefts {
            for right in &letters {
                if merges.len() == n_merged {
                    break 'round;
                }
                let token = format!("{left}{right}");
                if seen.insert(token.clone()) {
                    merges.push(format!("{left} {right}"));
                    made.push(token.clone());
                    tokens.push(token);
                }
            }
        }
        if made.is_empty() {
            break;
        }
        lefts = made;
    }
    if merges.len() != n_merged {
        return Err(bad(format!("synthetic vocabulary: expected {n_merged} merged tokens, made {}", merges.len())));
    }
    let first_special = tokens.len() as u32;
    tokens.extend(SYNTHETIC_SPECIALS.iter().map(|s| s.to_string()));
    let mut types = vec![TYPE_NORMAL; vocab_size];
    for t in &mut types[first_special as usize..] {
        *t = TYPE_CONTROL;
    }
    Ok(Vocab { tokens, types, merges, bos: first_special, eos: first_special + 2, pad: first_special }.into_metadata())
}
