//! Text ↔ token ids for the engine: the byte-level BPE tokenizer loaded from a Hugging Face
//! `tokenizer.json` (plain or gzipped, or the Qwen3.5 one built into the binary) or rebuilt from
//! GGUF metadata (`gguf.rs`), the chat template (`chat.rs`) and streaming decode (`stream.rs`).
//!
//! The `tokenizers` crate does the encoding; this module decides what is loaded and which ids
//! are special. It must never panic on a file's contents or on user text: every failure is a
//! `TokenizerError` saying what was expected and what was found. Every call into `tokenizers`
//! that reads a file's contents or runs on them goes through `guard::guarded`, which turns a
//! panic inside that crate (it has some, see `guard.rs`) into such an error.

pub mod chat;
mod chat_guard;
pub mod gguf;
mod guard;
pub mod stream;

use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

pub use chat::{ChatMessage, ChatOptions, ChatTemplate};
pub use stream::StreamDecoder;

use guard::guarded;

/// A token's index in the vocabulary (what the embedding table is indexed by).
pub type TokenId = u32;

/// The Qwen3.5 tokenizer (Apache-2.0, see `assets/README.md`), gzipped `tokenizer.json`.
const QWEN35_TOKENIZER_GZ: &[u8] = include_bytes!("../../assets/qwen35-tokenizer.json.gz");

/// Whether special tokens take part: when encoding, whether `<|im_start|>` in the text is the
/// special token (`With`) or plain text split into ordinary tokens (`Without`); when decoding,
/// whether special tokens are rendered (`With`) or dropped (`Without`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    With,
    Without,
}

/// What went wrong loading or running a tokenizer. `Io` is the environment's fault, `Encode`,
/// `Decode` and `Build` are reported by the `tokenizers` crate, `Template` by the template (the
/// model's, or a `raise_exception` in it); every other variant is the input file's (or
/// metadata's) fault.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TokenizerError {
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    #[error("cannot gunzip {what}: {message}")]
    Gzip { what: String, message: String },
    #[error("bad tokenizer.json ({what}): {message}")]
    Json { what: String, message: String },
    #[error("tokenizer metadata: missing key {key:?}")]
    MissingKey { key: String },
    #[error("tokenizer metadata: key {key:?}: expected {expected}, found {found}")]
    WrongType { key: String, expected: &'static str, found: String },
    #[error("tokenizer metadata: {key:?}: expected {expected}, found {found:?}")]
    Unsupported { key: String, expected: &'static str, found: String },
    #[error("tokenizer metadata: {key:?} has {found} entries, expected {expected} (one per token)")]
    LengthMismatch { key: String, expected: usize, found: usize },
    #[error("tokenizer metadata: token {id}: expected a token type 1..=6, found {found}")]
    BadTokenType { id: usize, found: i64 },
    #[error("tokenizer metadata: token {second} repeats token {first} ({token:?})")]
    DuplicateToken { token: String, first: usize, second: usize },
    #[error("tokenizer metadata: token {id} is empty")]
    EmptyToken { id: usize },
    #[error("tokenizer metadata: merge {index}: expected \"left right\", found {found:?}")]
    BadMerge { index: usize, found: String },
    #[error("tokenizer metadata: merge {index} ({found:?}): {part:?} is not a token of the vocabulary")]
    MergeNotInVocab { index: usize, found: String, part: String },
    #[error("tokenizer metadata: {key:?} = {id} is not a token id (the vocabulary has {n_tokens})")]
    IdOutOfRange { key: String, id: u64, n_tokens: usize },
    #[error("tokenizer metadata: token {id} ({token:?}) is unused (type 5) but named by {key:?}")]
    UnusedSpecial { key: String, id: u32, token: String },
    #[error("cannot build the tokenizer: {message}")]
    Build { message: String },
    #[error("cannot encode text: {message}")]
    Encode { message: String },
    #[error("cannot decode ids: {message}")]
    Decode { message: String },
    #[error("chat template: {message}")]
    Template { message: String },
    #[error("token id {id} is out of range: the vocabulary has {n_tokens} ids")]
    BadId { id: TokenId, n_tokens: usize },
}

/// Ids with a role in generation. `eos` lists every id that ends a generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: Option<TokenId>,
    pub eos: Vec<TokenId>,
    pub pad: Option<TokenId>,
    /// Whether the model expects `bos` before a prompt (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
}

/// A loaded tokenizer: the encoder plus the ids with roles, and the chat template the model
/// came with, if any.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// A copy that reads special-token text as plain text; made on first use (it holds a
    /// second vocabulary).
    literal: OnceLock<tokenizers::Tokenizer>,
    special: SpecialIds,
    chat_template: Option<String>,
    /// One past the largest id the tokenizer knows (added tokens included).
    n_ids: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("n_ids", &self.n_ids).field("special", &self.special).finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// The Qwen3.5 tokenizer shipped in the binary. Specials: eos = `<|im_end|>`,
    /// `<|endoftext|>`; no bos; pad = `<|vision_pad|>` (the values Qwen3.5 GGUF packs carry).
    pub fn qwen35() -> Result<Tokenizer, TokenizerError> {
        let json = gunzip(QWEN35_TOKENIZER_GZ, "the built-in qwen3.5 tokenizer")?;
        let mut t = Tokenizer::from_json_bytes(&json, "the built-in qwen3.5 tokenizer")?;
        t.special.pad = t.token_to_id("<|vision_pad|>");
        Ok(t)
    }

    /// Loads a `tokenizer.json`, gunzipping it when the name ends in `.gz`. Specials are
    /// guessed from the added tokens (see `from_json_bytes`).
    pub fn from_file(path: &Path) -> Result<Tokenizer, TokenizerError> {
        let shown = path.display().to_string();
        let bytes =
            std::fs::read(path).map_err(|e| TokenizerError::Io { path: shown.clone(), message: e.to_string() })?;
        let json = if path.extension().is_some_and(|e| e == "gz") { gunzip(&bytes, &shown)? } else { bytes };
        Tokenizer::from_json_bytes(&json, &shown)
    }

    /// Parses `tokenizer.json` text. A tokenizer.json does not say which ids end a turn; the
    /// Qwen ones are used when present: eos = `<|im_end|>`, `<|endoftext|>`. Override with
    /// `set_special_ids` from the model's own configuration.
    ///
    /// A file that makes the `tokenizers` crate panic is a `Json` error like any other bad
    /// file (the panic is caught, and not printed).
    pub fn from_json_bytes(json: &[u8], what: &str) -> Result<Tokenizer, TokenizerError> {
        let json_error = |message: String| TokenizerError::Json { what: what.to_string(), message };
        let inner = match guarded(|| tokenizers::Tokenizer::from_bytes(json)) {
            Ok(loaded) => loaded.map_err(|e| json_error(e.to_string()))?,
            Err(panic) => return Err(json_error(load_panic_message(json, &panic))),
        };
        let mut t = Tokenizer::from_parts(inner, SpecialIds::default(), None, None);
        t.special.eos = ["<|im_end|>", "<|endoftext|>"].iter().filter_map(|s| t.token_to_id(s)).collect();
        Ok(t)
    }

    /// `n_ids`: one past the largest id the model may produce; `None` takes it from the
    /// vocabulary and the added tokens.
    pub(crate) fn from_parts(
        inner: tokenizers::Tokenizer,
        special: SpecialIds,
        chat_template: Option<String>,
        n_ids: Option<usize>,
    ) -> Tokenizer {
        let n_ids = n_ids.unwrap_or_else(|| {
            let n_model = inner.get_vocab(false).values().max().map_or(0, |&m| m as usize + 1);
            let n_added = inner.get_added_tokens_decoder().keys().max().map_or(0, |&m| m as usize + 1);
            n_model.max(n_added)
        });
        Tokenizer { inner, literal: OnceLock::new(), special, chat_template, n_ids }
    }

    pub fn special_ids(&self) -> &SpecialIds {
        &self.special
    }

    pub fn set_special_ids(&mut self, special: SpecialIds) {
        self.special = special;
    }

    /// The chat template that came with the model (GGUF `tokenizer.chat_template`), if any.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// One past the largest token id (the size an embedding table needs at least).
    pub fn n_ids(&self) -> usize {
        self.n_ids
    }

    pub fn token_to_id(&self, token: &str) -> Option<TokenId> {
        self.inner.token_to_id(token)
    }

    /// The token's vocabulary string (byte-level form, e.g. `Ġthe`).
    pub fn id_to_token(&self, id: TokenId) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Whether `id` is a special (added, control) token.
    pub fn is_special(&self, id: TokenId) -> bool {
        self.inner.get_added_tokens_decoder().get(&id).is_some_and(|t| t.special)
    }

    /// Encodes `text`. Never adds bos: a caller that wants it checks `special_ids().add_bos`
    /// (chat templates usually write it themselves).
    pub fn encode(&self, text: &str, specials: Specials) -> Result<Vec<TokenId>, TokenizerError> {
        let tok = match specials {
            Specials::With => &self.inner,
            Specials::Without => self.literal.get_or_init(|| {
                let mut t = self.inner.clone();
                t.set_encode_special_tokens(true);
                t
            }),
        };
        let enc = guarded(|| tok.encode_fast(text, false))
            .map_err(|panic| TokenizerError::Encode { message: format!("the tokenizers crate panicked: {panic}") })?
            .map_err(|e| TokenizerError::Encode { message: e.to_string() })?;
        Ok(enc.get_ids().to_vec())
    }

    /// Decodes ids to text; bytes that do not form UTF-8 become U+FFFD. An id past `n_ids` is
    /// an error; an id below it without a token (a GGUF "unused" slot) decodes to nothing.
    pub fn decode(&self, ids: &[TokenId], specials: Specials) -> Result<String, TokenizerError> {
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.n_ids) {
            return Err(TokenizerError::BadId { id, n_tokens: self.n_ids });
        }
        guarded(|| self.inner.decode(ids, specials == Specials::Without))
            .map_err(|panic| TokenizerError::Decode { message: format!("the tokenizers crate panicked: {panic}") })?
            .map_err(|e| TokenizerError::Decode { message: e.to_string() })
    }

    /// A streaming decoder over this tokenizer (see `StreamDecoder`).
    pub fn stream(&self, specials: Specials) -> StreamDecoder<'_> {
        StreamDecoder::new(self, specials)
    }

    /// The underlying `tokenizers` tokenizer, for what this wrapper does not cover.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// What a `tokenizer.json` that made the `tokenizers` crate panic while loading is: a JSON
/// syntax error (what the crate should have reported; 0.23 panics on one inside `"decoder"`),
/// or well-formed JSON that it cannot handle.
fn load_panic_message(json: &[u8], panic: &str) -> String {
    match serde_json::from_slice::<serde::de::IgnoredAny>(json) {
        Err(e) => format!("expected JSON, found a syntax error: {e} (the tokenizers crate panicked on it)"),
        Ok(_) => format!("expected a tokenizer the tokenizers crate can load, found one that makes it panic: {panic}"),
    }
}

/// Gunzips `bytes`, naming `what` in the error.
pub fn gunzip(bytes: &[u8], what: &str) -> Result<Vec<u8>, TokenizerError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| TokenizerError::Gzip { what: what.to_string(), message: e.to_string() })?;
    Ok(out)
}
