//! Rebuilds a byte-level BPE tokenizer from GGUF metadata (`tokenizer.ggml.*`), equivalent to
//! the model's `tokenizer.json`:
//!
//! | key | use |
//! |---|---|
//! | `tokenizer.ggml.model` | must be `gpt2` (byte-level BPE) |
//! | `tokenizer.ggml.pre` | the split regex: `qwen35` |
//! | `tokenizer.ggml.tokens` | id → token string (byte-level form) |
//! | `tokenizer.ggml.token_type` | 1 normal, 2 unknown, 3 control (special), 4 user-defined, 5 unused, 6 byte |
//! | `tokenizer.ggml.merges` | `"left right"` in rank order |
//! | `tokenizer.ggml.bos/eos/padding_token_id`, `add_bos_token` | `SpecialIds` (optional) |
//! | `tokenizer.chat_template` | kept for `ChatTemplate` (optional) |
//!
//! Control tokens become added special tokens, user-defined ones added non-special tokens, both
//! at their GGUF ids; unused ids stay in the id range but have no token. Every inconsistency is a
//! `TokenizerError`; this module never panics on metadata.

use std::collections::HashMap;

use tokenizers::decoders::byte_level::ByteLevel;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::NFC;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior};

use crate::model::gguf::{GgufFile, MetaValue};
use crate::tokenizer::guard::guarded;
use crate::tokenizer::{SpecialIds, TokenId, Tokenizer, TokenizerError};

/// Qwen3.5's pre-tokenizer split (from its `tokenizer.json`): like Qwen2's, with `\p{M}`
/// (combining marks) kept inside letter runs.
pub const QWEN35_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GGUF token types (llama.cpp's `llama_token_type`); 2 (unknown) and 6 (byte) are ordinary
/// vocabulary entries here, like 1.
const TYPE_NORMAL: i64 = 1;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;
const TYPE_UNUSED: i64 = 5;
const TYPE_BYTE: i64 = 6;

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's metadata.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::from_gguf_metadata(&file.metadata)
    }

    /// Builds the tokenizer from GGUF metadata key/values (see the module table).
    pub fn from_gguf_metadata(meta: &[(String, MetaValue)]) -> Result<Tokenizer, TokenizerError> {
        let meta = Meta(meta.iter().map(|(k, v)| (k.as_str(), v)).collect());
        let model = meta.string("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(unsupported("tokenizer.ggml.model", "\"gpt2\" (byte-level bpe)", model));
        }
        let pre = meta.string("tokenizer.ggml.pre")?;
        let split = match pre {
            "qwen35" => QWEN35_SPLIT,
            other => return Err(unsupported("tokenizer.ggml.pre", "\"qwen35\"", other)),
        };
        let tokens = meta.strings("tokenizer.ggml.tokens")?;
        let types = meta.ints("tokenizer.ggml.token_type")?;
        if types.len() != tokens.len() {
            return Err(TokenizerError::LengthMismatch {
                key: "tokenizer.ggml.token_type".into(),
                expected: tokens.len(),
                found: types.len(),
            });
        }
        let merges = meta.strings("tokenizer.ggml.merges")?;

        let mut vocab = Vocab::with_capacity(tokens.len());
        let mut added = Vec::new();
        for (id, (&token, &ty)) in tokens.iter().zip(&types).enumerate() {
            if !(TYPE_NORMAL..=TYPE_BYTE).contains(&ty) {
                return Err(TokenizerError::BadTokenType { id, found: ty });
            }
            if ty == TYPE_UNUSED {
                continue;
            }
            if token.is_empty() {
                return Err(TokenizerError::EmptyToken { id });
            }
            let tid = TokenId::try_from(id).map_err(|_| TokenizerError::IdOutOfRange {
                key: "tokenizer.ggml.tokens".into(),
                id: id as u64,
                n_tokens: tokens.len(),
            })?;
            if let Some(first) = vocab.insert(token.to_string(), tid) {
                return Err(TokenizerError::DuplicateToken {
                    token: token.to_string(),
                    first: first as usize,
                    second: id,
                });
            }
            if ty == TYPE_CONTROL || ty == TYPE_USER_DEFINED {
                added.push((tid, AddedToken::from(token, ty == TYPE_CONTROL).normalized(false)));
            }
        }
        let mut pairs = Vec::with_capacity(merges.len());
        for (index, &m) in merges.iter().enumerate() {
            let mut parts = m.split(' ');
            let (Some(left), Some(right), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(TokenizerError::BadMerge { index, found: m.to_string() });
            };
            if left.is_empty() || right.is_empty() {
                return Err(TokenizerError::BadMerge { index, found: m.to_string() });
            }
            for part in [left, right, &format!("{left}{right}")] {
                if !vocab.contains_key(part) {
                    return Err(TokenizerError::MergeNotInVocab {
                        index,
                        found: m.to_string(),
                        part: part.to_string(),
                    });
                }
            }
            pairs.push((left.to_string(), right.to_string()));
        }

        let special = SpecialIds {
            bos: meta.id("tokenizer.ggml.bos_token_id", &tokens, &types)?,
            eos: meta.id("tokenizer.ggml.eos_token_id", &tokens, &types)?.into_iter().collect(),
            pad: meta.id("tokenizer.ggml.padding_token_id", &tokens, &types)?,
            add_bos: meta.bool("tokenizer.ggml.add_bos_token")?.unwrap_or(false),
        };
        let chat_template = match meta.0.get("tokenizer.chat_template") {
            None => None,
            Some(v) => {
                Some(v.as_str().ok_or_else(|| wrong_type("tokenizer.chat_template", "a string", v))?.to_string())
            }
        };

        // Built under `guarded`: a panic inside `tokenizers` on these (checked) values is a
        // `Build` error, not a crash.
        let inner = guarded(|| -> Result<tokenizers::Tokenizer, TokenizerError> {
            let build = |e: tokenizers::Error| TokenizerError::Build { message: e.to_string() };
            let bpe = BPE::builder().vocab_and_merges(vocab, pairs).build().map_err(build)?;
            let mut inner = tokenizers::Tokenizer::new(bpe);
            inner.with_normalizer(Some(NFC)).map_err(build)?;
            let split = Split::new(SplitPattern::Regex(split.to_string()), SplitDelimiterBehavior::Isolated, false)
                .map_err(build)?;
            inner
                .with_pre_tokenizer(Some(Sequence::new(vec![split.into(), ByteLevel::new(false, true, false).into()])));
            inner.with_decoder(Some(ByteLevel::new(true, true, true)));
            let of_kind = |special: bool| {
                added.iter().filter(|(_, t)| t.special == special).map(|(_, t)| t.clone()).collect::<Vec<_>>()
            };
            inner.add_special_tokens(of_kind(true)).map_err(build)?;
            inner.add_tokens(of_kind(false)).map_err(build)?;
            for (id, t) in &added {
                // Each added token is also in the model vocabulary, so the added vocabulary reuses
                // its GGUF id; anything else is a bug here or in `tokenizers`.
                let found = inner.token_to_id(&t.content);
                if found != Some(*id) {
                    return Err(TokenizerError::Build {
                        message: format!("added token {:?}: expected id {id}, found {found:?}", t.content),
                    });
                }
            }
            Ok(inner)
        })
        .map_err(|panic| TokenizerError::Build { message: format!("the tokenizers crate panicked: {panic}") })??;
        Ok(Tokenizer::from_parts(inner, special, chat_template, Some(tokens.len())))
    }
}

fn unsupported(key: &str, expected: &'static str, found: &str) -> TokenizerError {
    TokenizerError::Unsupported { key: key.to_string(), expected, found: found.to_string() }
}

fn wrong_type(key: &str, expected: &'static str, found: &MetaValue) -> TokenizerError {
    let found = match found {
        MetaValue::Array(items) => {
            format!("an array of {} {}", items.len(), items.first().map_or("values", |v| v.kind()))
        }
        other => format!("a {}", other.kind()),
    };
    TokenizerError::WrongType { key: key.to_string(), expected, found }
}

/// Typed access to the metadata, with the errors above.
struct Meta<'a>(HashMap<&'a str, &'a MetaValue>);

impl<'a> Meta<'a> {
    fn get(&self, key: &str) -> Result<&'a MetaValue, TokenizerError> {
        self.0.get(key).copied().ok_or_else(|| TokenizerError::MissingKey { key: key.to_string() })
    }

    fn string(&self, key: &str) -> Result<&'a str, TokenizerError> {
        let v = self.get(key)?;
        v.as_str().ok_or_else(|| wrong_type(key, "a string", v))
    }

    fn array(&self, key: &str) -> Result<&'a [MetaValue], TokenizerError> {
        match self.get(key)? {
            MetaValue::Array(items) => Ok(items),
            v => Err(wrong_type(key, "an array", v)),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<&'a str>, TokenizerError> {
        let items = self.array(key)?;
        items.iter().map(|v| v.as_str().ok_or_else(|| wrong_type(key, "an array of strings", v))).collect()
    }

    fn ints(&self, key: &str) -> Result<Vec<i64>, TokenizerError> {
        let items = self.array(key)?;
        items
            .iter()
            .map(|v| match *v {
                MetaValue::I8(x) => Ok(x.into()),
                MetaValue::I16(x) => Ok(x.into()),
                MetaValue::I32(x) => Ok(x.into()),
                MetaValue::I64(x) => Ok(x),
                MetaValue::U8(x) => Ok(x.into()),
                MetaValue::U16(x) => Ok(x.into()),
                MetaValue::U32(x) => Ok(x.into()),
                _ => Err(wrong_type(key, "an array of integers", v)),
            })
            .collect()
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, TokenizerError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(MetaValue::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong_type(key, "a bool", v)),
        }
    }

    /// An optional token id: present means it must name a token that is not unused.
    fn id(&self, key: &str, tokens: &[&str], types: &[i64]) -> Result<Option<TokenId>, TokenizerError> {
        let Some(v) = self.0.get(key) else { return Ok(None) };
        let id = v.as_u64().ok_or_else(|| wrong_type(key, "a non-negative integer", v))?;
        let index = usize::try_from(id).ok().filter(|&i| i < tokens.len());
        let Some(index) = index else {
            return Err(TokenizerError::IdOutOfRange { key: key.to_string(), id, n_tokens: tokens.len() });
        };
        if types[index] == TYPE_UNUSED {
            return Err(TokenizerError::UnusedSpecial {
                key: key.to_string(),
                id: index as TokenId,
                token: tokens[index].to_string(),
            });
        }
        Ok(Some(index as TokenId))
    }
}
