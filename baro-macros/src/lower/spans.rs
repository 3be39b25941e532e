//! Where each part of the built IR came from in the user's source, so that errors the
//! verifier reports as IR locations land on the right tokens.
//!
//! Keys follow `baro_dsl::verify::Location`: statement paths (an `else` block's statements
//! are numbered after the `then` block's), and pre-order ordinals of reductions and stores.

use baro_dsl::verify::Location;
use proc_macro2::{Punct, Spacing, Span, TokenStream};
use quote::{ToTokens, TokenStreamExt};

/// The first and last token of a piece of source: an error built with
/// `syn::Error::new_spanned(range, ..)` underlines everything between them.
#[derive(Clone, Copy, Debug)]
pub struct SpanRange(pub Span, pub Span);

impl SpanRange {
    pub fn of(node: &impl ToTokens) -> SpanRange {
        let mut it = node.to_token_stream().into_iter();
        let first = it.next().map_or_else(Span::call_site, |t| t.span());
        let last = it.last().map_or(first, |t| t.span());
        SpanRange(first, last)
    }
    pub fn error(self, msg: impl std::fmt::Display) -> syn::Error {
        syn::Error::new_spanned(self, msg)
    }
}

impl ToTokens for SpanRange {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        for s in [self.0, self.1] {
            let mut p = Punct::new('.', Spacing::Alone);
            p.set_span(s);
            tokens.append(p);
        }
    }
}

pub struct SpanTable {
    /// The kernel's name: the fallback for anything not found below.
    pub name: SpanRange,
    pub stmts: Vec<(Vec<u32>, SpanRange)>,
    /// Per reduction (pre-order): its `order = ...`.
    pub reduces: Vec<SpanRange>,
    /// Per store (pre-order): the whole assignment.
    pub stores: Vec<SpanRange>,
}

impl SpanTable {
    pub fn new(name: Span) -> SpanTable {
        SpanTable { name: SpanRange(name, name), stmts: Vec::new(), reduces: Vec::new(), stores: Vec::new() }
    }

    /// The statement at `path`, or its nearest recorded ancestor.
    pub fn stmt(&self, path: &[u32]) -> Option<SpanRange> {
        (0..=path.len())
            .rev()
            .find_map(|n| self.stmts.iter().find(|(p, _)| p.as_slice() == &path[..n]).map(|(_, s)| *s))
    }

    /// The best span for a verifier location: the reduction, else the store, else the
    /// statement, else the kernel's name.
    pub fn locate(&self, loc: &Location) -> SpanRange {
        let reduce = loc.reduce.and_then(|r| self.reduces.get(r as usize).copied());
        let store = loc.store.and_then(|s| self.stores.get(s as usize).copied());
        reduce.or(store).or_else(|| self.stmt(&loc.stmt_path)).unwrap_or(self.name)
    }
}
