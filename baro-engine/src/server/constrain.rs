//! Constrained decoding through `llguidance` (the engine llama.cpp and vLLM use): a request's
//! JSON schema, "any JSON object", Lark grammar or regex becomes a `Constraint`, which each
//! step turns into a mask over the vocabulary and then consumes the sampled token.
//!
//! The mask is applied to a copy of the step's logits just before sampling (a disallowed token
//! gets -inf): it changes which token is chosen, never how logits are computed, so a
//! constrained sequence in a batch is stepped exactly as it would be alone, and the
//! log-probabilities reported are the model's, unmasked. `Grammars` is built once per model
//! from the tokenizer's vocabulary (each token's bytes in a trie); a request's grammar is
//! compiled in the route, so a bad schema or grammar is a 400 before anything is queued.
//! JSON whitespace between tokens is bounded (one run of at most 20 characters, as llama.cpp's
//! schema grammars allow) unless the schema's `x-guidance` options say otherwise: a model that
//! loops on whitespace cannot run a constrained request to its token limit.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};

use crate::server::error::{ApiError, ErrorKind};
use crate::server::gbnf;
use crate::tokenizer::{Specials, TokenId, Tokenizer};

/// What a request asks its output to match.
#[derive(Clone, Debug)]
pub enum Spec {
    /// Any JSON object (OpenAI's `json_object`, Ollama's `"json"`).
    JsonObject,
    /// A JSON schema (OpenAI's `json_schema`, Ollama's `format` object).
    JsonSchema(Value),
    /// A Lark grammar (llguidance's dialect; `%json {...}` and `/regex/` terminals included),
    /// or GBNF (llama.cpp's), rewritten into Lark (`gbnf`).
    Lark(String),
}

/// The JSON options used unless a schema carries its own `x-guidance`: compact separators
/// allowed, whitespace between tokens bounded.
fn default_json_options() -> Value {
    json!({ "whitespace_pattern": "[\\x20\\x0A\\x0D\\x09]{1,20}" })
}

/// The compiler of constraints for one vocabulary.
pub struct Grammars {
    factory: ParserFactory,
}

/// The tokenizer as llguidance sees it: the trie of every token's bytes, and our encoder for
/// the text it needs tokenized (forced prefixes).
struct Env {
    trie: TokTrie,
    tokenizer: Arc<Tokenizer>,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<llguidance::toktrie::TokenId> {
        self.tokenizer.encode(&String::from_utf8_lossy(s), Specials::Without).unwrap_or_default()
    }
}

impl Grammars {
    /// Builds the token trie from `tokenizer`'s vocabulary (its JSON form, which carries the
    /// byte-level mapping); `eos` is the token that ends a constrained output.
    pub fn new(tokenizer: &Arc<Tokenizer>) -> Result<Grammars, String> {
        let json: Value = serde_json::from_str(
            &tokenizer.inner().to_string(false).map_err(|e| format!("serializing the tokenizer: {e}"))?,
        )
        .map_err(|e| format!("reading the tokenizer back: {e}"))?;
        let words = llguidance::token_bytes_from_tokenizer_json(&json).map_err(|e| format!("token bytes: {e}"))?;
        let special = tokenizer.special_ids();
        let eos = *special.eos.first().ok_or("constrained decoding: expected an end-of-sequence token, found none")?;
        let mut info = TokRxInfo::new(words.len() as u32, eos);
        info.tok_bos = special.bos;
        info.tok_pad = special.pad;
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(Env { trie, tokenizer: Arc::clone(tokenizer) });
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| format!("building the grammar compiler: {e}"))?;
        factory.quiet();
        Ok(Grammars { factory })
    }

    /// Compiles `spec` into a fresh constraint; a bad schema or grammar is the client's 400,
    /// naming `field`.
    pub fn compile(&self, spec: &Spec, field: &str) -> Result<Constraint, ApiError> {
        let grammar = match spec {
            Spec::JsonObject => TopLevelGrammar::from_json_schema(with_options(json!({ "type": "object" }))),
            Spec::JsonSchema(schema) => {
                if !schema.is_object() && !schema.is_boolean() {
                    return Err(ApiError::bad_param(
                        field,
                        "a JSON schema (an object)",
                        crate::server::body::kind_of(schema),
                    ));
                }
                TopLevelGrammar::from_json_schema(with_options(schema.clone()))
            }
            Spec::Lark(text) if gbnf::is_gbnf(text) => {
                let lark = gbnf::to_lark(text).map_err(|e| {
                    ApiError::bad_param(field, "a GBNF or Lark grammar", format!("GBNF it cannot read: {e}"))
                })?;
                TopLevelGrammar::from_lark(lark)
            }
            Spec::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
        };
        let parser = self.factory.create_parser(grammar).map_err(|e| {
            ApiError::new(
                ErrorKind::BadRequest,
                format!("{field}: expected a valid schema or grammar, found an error: {e}"),
            )
        })?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                format!("{field}: expected a valid schema or grammar, found an error: {e}"),
            ));
        }
        Ok(Constraint { matcher })
    }
}

/// `schema` with the default JSON options unless it carries its own.
fn with_options(mut schema: Value) -> Value {
    if let Some(o) = schema.as_object_mut() {
        o.entry("x-guidance").or_insert_with(default_json_options);
    }
    schema
}

/// One sequence's constraint: where its output is in the grammar.
pub struct Constraint {
    matcher: Matcher,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Constraint")
    }
}

impl Constraint {
    /// Sets every token the grammar does not allow next to -inf in `logits`; a grammar with no
    /// allowed token (an error state) is an error.
    pub fn mask(&mut self, logits: &mut [f32]) -> Result<(), String> {
        let allowed = self.matcher.compute_mask_or_eos().map_err(|e| format!("constraint: {e}"))?;
        let n = allowed.len().min(logits.len());
        let mut any = false;
        for (id, l) in logits.iter_mut().enumerate() {
            if id < n && allowed.is_allowed(id as TokenId) {
                any |= *l != f32::NEG_INFINITY;
            } else {
                *l = f32::NEG_INFINITY;
            }
        }
        if !any {
            return Err(
                "constraint: expected at least one token the grammar allows, found none in the vocabulary".into()
            );
        }
        Ok(())
    }

    /// Advances past `id` (a token the mask allowed).
    pub fn consume(&mut self, id: TokenId) -> Result<(), String> {
        self.matcher.consume_token(id).map_err(|e| format!("constraint: {e}"))
    }

    /// Whether the grammar is complete and allows nothing more.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }
}
