//! Collects spanned errors so that one macro run reports every problem it finds.
//!
//! Nothing in the front end may panic on user input: each problem becomes a `syn::Error`
//! pushed here, and code that cannot go on returns `Err(Reported)` after pushing.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use std::fmt::Display;

/// Marker: an error was already recorded in the `Diag`; the caller just unwinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported;

pub type R<T> = Result<T, Reported>;

#[derive(Default)]
pub struct Diag {
    errors: Option<syn::Error>,
}

impl Diag {
    pub fn push(&mut self, e: syn::Error) {
        match &mut self.errors {
            Some(all) => all.combine(e),
            None => self.errors = Some(e),
        }
    }

    /// Records an error at `span` and returns the marker.
    pub fn at(&mut self, span: Span, msg: impl Display) -> Reported {
        self.push(syn::Error::new(span, msg));
        Reported
    }

    /// Records an error covering the tokens of `node` and returns the marker.
    pub fn spanned(&mut self, node: &impl ToTokens, msg: impl Display) -> Reported {
        self.push(syn::Error::new_spanned(node, msg));
        Reported
    }

    /// How many errors were recorded.
    pub fn count(&self) -> usize {
        self.errors.as_ref().map_or(0, |e| e.clone().into_iter().count())
    }

    pub fn has_errors(&self) -> bool {
        self.errors.is_some()
    }

    /// Every message recorded, in order (for tests).
    #[cfg(test)]
    pub fn messages(&self) -> Vec<String> {
        self.errors.iter().flat_map(|e| e.clone().into_iter().map(|x| x.to_string())).collect()
    }

    /// The `compile_error!`s for everything recorded (empty if nothing was).
    pub fn to_compile_errors(&self) -> TokenStream {
        self.errors.as_ref().map(syn::Error::to_compile_error).unwrap_or_default()
    }
}

/// The tokens of `node` as a person would write them (`&Vec<f32>`, not `& Vec < f32 >`),
/// for "found `...`" in messages. Spaces stay between words, after commas and around
/// arithmetic operators; generic brackets and paths are closed up.
pub fn show(node: &impl ToTokens) -> String {
    let raw = node.to_token_stream().to_string();
    let chars: Vec<char> = raw.chars().collect();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let op = |c: char| matches!(c, '=' | '+' | '-' | '*' | '/' | '%' | '|' | '^');
    let mut out = String::with_capacity(raw.len());
    for (i, &c) in chars.iter().enumerate() {
        if c != ' ' {
            out.push(c);
            continue;
        }
        let (Some(p), Some(n)) = (out.chars().last(), chars.get(i + 1).copied()) else { continue };
        let after_keyword =
            out.ends_with("mut") || out.ends_with("dyn") || out.ends_with(" as") || out.ends_with(" in");
        if (word(p) && word(n)) || (after_keyword && n != ']') || p == ',' || op(p) || op(n) {
            out.push(' ');
        }
    }
    out
}
