//! Streaming decode: tokens arrive one at a time, text leaves as soon as it is complete UTF-8.
//!
//! A byte-level token may carry part of a character (an emoji is often 2–4 tokens), so text is
//! held back while the decoded tail ends in an incomplete sequence (U+FFFD), and each token is
//! decoded together with the tokens since the last emitted text, so that the decoder sees the
//! same context it would see decoding everything at once. The concatenation of everything
//! `push` and `finish` return equals `decode` of all the ids. Never panics on ids; an id outside
//! the vocabulary is an error.

use crate::tokenizer::{Specials, TokenId, Tokenizer, TokenizerError};

const REPLACEMENT: char = '\u{FFFD}';

pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    specials: Specials,
    /// Tokens from the start of the last emitted piece on.
    ids: Vec<TokenId>,
    /// `ids[..read]` have been emitted.
    read: usize,
}

impl<'a> StreamDecoder<'a> {
    pub fn new(tokenizer: &'a Tokenizer, specials: Specials) -> StreamDecoder<'a> {
        StreamDecoder { tokenizer, specials, ids: Vec::new(), read: 0 }
    }

    /// Adds one token; returns the text it completes (often empty while a character is split
    /// across tokens).
    pub fn push(&mut self, id: TokenId) -> Result<String, TokenizerError> {
        self.ids.push(id);
        let prefix = self.tokenizer.decode(&self.ids[..self.read], self.specials)?;
        let full = self.tokenizer.decode(&self.ids, self.specials)?;
        if full.len() <= prefix.len() || full.ends_with(REPLACEMENT) {
            return Ok(String::new());
        }
        let piece = new_text(&prefix, full);
        // Keep the tokens of the piece just emitted as the context for the next one.
        self.ids.drain(..self.read);
        self.read = self.ids.len();
        Ok(piece)
    }

    /// Returns whatever is held back (an incomplete character decodes to U+FFFD) and resets.
    pub fn finish(&mut self) -> Result<String, TokenizerError> {
        let prefix = self.tokenizer.decode(&self.ids[..self.read], self.specials)?;
        let full = self.tokenizer.decode(&self.ids, self.specials)?;
        self.ids.clear();
        self.read = 0;
        Ok(new_text(&prefix, full))
    }
}

/// The part of `full` after `prefix`. `prefix` ended in a complete character when it was
/// emitted, so it is a prefix of `full`; if a decoder ever breaks that, `full` is returned
/// whole rather than slicing inside a character.
fn new_text(prefix: &str, full: String) -> String {
    match full.strip_prefix(prefix) {
        Some(rest) => rest.to_string(),
        None => full,
    }
}
