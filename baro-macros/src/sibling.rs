//! The build-time sibling check. Every `#[kernel]` leaves a hidden `macro_rules!` holding its
//! own tokens; a rows kernel calls its m=1 kernel's macro with its tokens, and that expands
//! to `__check_sibling!{ m1 = {..} rows = {..} }`, which runs the front end on both and the
//! verifier's sibling check, and turns a failure into a compile error at the rows kernel's
//! reduction order or store.
//!
//! Tokens pass through verbatim so every span still points into the user's source. A
//! kernel that fails on its own is reported by its own expansion, never again here.

use crate::diag::Diag;
use crate::expand::front_end;
use crate::lower::{Lowered, SpanRange};
use crate::verifier;
use baro_dsl::verify::{ErrorKind, SiblingError};
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};
use syn::parse::{ParseStream, Parser};
use syn::{braced, parenthesized, ItemFn, Path, Token};

fn macro_name(kernel: &Ident) -> Ident {
    format_ident!("__baro_kernel_{}", kernel, span = kernel.span())
}

/// The hidden macro every kernel defines, holding its attribute arguments and function.
pub fn definition(name: &Ident, attr: &TokenStream, item: &TokenStream) -> TokenStream {
    let mac = macro_name(name);
    quote! {
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #mac {
            ($($cb:tt)*) => { ::baro_macros::__check_sibling!{ m1 = { (#attr) #item } $($cb)* } };
        }
        #[allow(unused_imports)]
        pub(crate) use #mac;
    }
}

/// A rows kernel's call of its m=1 kernel's macro (`super::__baro_kernel_matvec!{..}`), with
/// the macro path spanned on `rows_of` so a wrong path is reported there.
pub fn invocation(rows_of: &Path, attr: &TokenStream, item: &TokenStream) -> TokenStream {
    let mut path = rows_of.clone();
    if let Some(last) = path.segments.last_mut() {
        last.ident = macro_name(&last.ident);
    }
    quote! { #path!{ rows = { (#attr) #item } } }
}

struct Side {
    attr: TokenStream,
    item: ItemFn,
}

fn parse_side(input: ParseStream, key: &str) -> syn::Result<Side> {
    let k: Ident = input.parse()?;
    if k != key {
        return Err(syn::Error::new(k.span(), format!("expected `{key} = {{ .. }}`, found `{k}`")));
    }
    input.parse::<Token![=]>()?;
    let content;
    braced!(content in input);
    let attr_content;
    parenthesized!(attr_content in content);
    let attr: TokenStream = attr_content.parse()?;
    let item: ItemFn = content.parse()?;
    Ok(Side { attr, item })
}

/// `__check_sibling!{ m1 = { (attr) fn } rows = { (attr) fn } }`.
pub fn check(input: TokenStream) -> TokenStream {
    let parsed = (|s: ParseStream| -> syn::Result<(Side, Side)> {
        let m1 = parse_side(s, "m1")?;
        let rows = parse_side(s, "rows")?;
        Ok((m1, rows))
    })
    .parse2(input);
    let (m1, rows) = match parsed {
        Ok(x) => x,
        Err(e) => {
            let msg = format!("the sibling check got tokens it cannot read (a bug in baro-macros, or `__check_sibling!` called by hand): {e}");
            return syn::Error::new(e.span(), msg).to_compile_error();
        }
    };
    let (Some(m1_l), Some(rows_l)) = (build(&m1), build(&rows)) else {
        return TokenStream::new();
    };
    match verifier::check_sibling(&rows_l.kernel, &m1_l.kernel) {
        Ok(_) => TokenStream::new(),
        Err(e) => sibling_error(&e, &rows_l, &m1_l, &rows).to_compile_error(),
    }
}

/// The lowered kernel, or `None` if it has errors of its own (its own expansion shows them).
fn build(side: &Side) -> Option<Lowered> {
    let mut diag = Diag::default();
    let front = front_end(side.attr.clone(), &side.item, &mut diag);
    front.lowered.filter(|_| !diag.has_errors())
}

fn sibling_error(e: &SiblingError, rows: &Lowered, m1: &Lowered, rows_side: &Side) -> syn::Error {
    let head = format!("`{}` is not an order-preserving sibling of `{}`", rows.kernel.name, m1.kernel.name);
    match e {
        SiblingError::Schedule { reduce, rows_schedule, m1_schedule, detail } => {
            let at = rows.spans.reduces.get(*reduce as usize).copied().unwrap_or(rows.spans.name);
            if rows_schedule == m1_schedule {
                // Same order, different operation or type: the detail says which.
                return at.error(format!("{head}: {detail}"));
            }
            let count = if detail.contains("reductions") { format!("; {detail}") } else { String::new() };
            at.error(format!(
                "{head}: reduction order {rows_schedule} here, {m1_schedule} in `{}`{count}",
                m1.kernel.name
            ))
        }
        SiblingError::Arithmetic(m) => {
            let at = m
                .location
                .store
                .and_then(|s| rows.spans.stores.get(s as usize).copied())
                .unwrap_or_else(|| rows.spans.locate(&m.location));
            at.error(format!("{head}: {m}"))
        }
        SiblingError::Invalid(errs) if errs.len() == 1 && errs[0].kind == ErrorKind::Race => {
            // A race sits at an access of one of the two kernels: point at it.
            let e = &errs[0];
            let spans = if e.kernel == m1.kernel.name { &m1.spans } else { &rows.spans };
            spans.locate(&e.location).error(format!(
                "`{}` cannot be checked against `{}`: `{}` has a {}",
                rows.kernel.name, m1.kernel.name, e.kernel, e.message
            ))
        }
        SiblingError::Invalid(errs)
            if errs.len() == 1 && errs[0].kind == ErrorKind::Vacuous && errs[0].message.starts_with("the `") =>
        {
            // An arm of an `if` no shape took: point at the reduction it sits in.
            let e = &errs[0];
            rows.spans
                .locate(&e.location)
                .error(format!("`{}` cannot be checked against `{}`: {}", rows.kernel.name, m1.kernel.name, e))
        }
        SiblingError::Invalid(errs) => {
            let at = rows_side
                .attr
                .clone()
                .into_iter()
                .next()
                .map(|t| SpanRange(t.span(), t.span()))
                .unwrap_or(rows.spans.name);
            let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
            at.error(format!(
                "`{}` cannot be checked against `{}`: {}",
                rows.kernel.name,
                m1.kernel.name,
                msgs.join("; ")
            ))
        }
    }
}
