//! Parsing of the `#[kernel(...)]` arguments into their syntax, before any lowering.
//!
//! Keys: `grid = [e0, e1?, e2?]` (required), `block = N`, `min_groups = N`, `rows_of = path`, `rows = ident`,
//! `row_stride(buf = expr, ...)`, `row_step(scalar = expr, ...)`, `carry(buf, ...)`,
//! `verify(param = [v, ...], ...)`, and on an m=1 kernel `rows(name = ident, ...)`, the rows
//! sibling to derive from it (`derive.rs` says what each of its keys means). This module only
//! reads tokens; it never decides what a name refers to (the lowering and `derive.rs` do, with
//! the signature).

use crate::diag::Diag;
use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{bracketed, parenthesized, Expr, Ident, LitInt, Path, Token};

pub struct KernelAttr {
    /// The grid axes and the span of the `grid` key.
    pub grid: Option<(Span, Vec<Expr>)>,
    /// `block = N`: threads per workgroup (a launch knob).
    pub block: Option<LitInt>,
    /// `min_groups = N`: workgroups that must fit on a compute unit at once (a launch knob).
    pub min_groups: Option<LitInt>,
    pub rows_of: Option<Path>,
    pub rows: Option<Ident>,
    pub row_strides: Vec<(Ident, Expr)>,
    pub row_steps: Vec<(Ident, Expr)>,
    pub carried: Vec<Ident>,
    pub verify: Vec<(Ident, Vec<LitInt>)>,
    /// `rows(name = .., ..)`: a rows sibling derived from this (m=1) kernel.
    pub derive_rows: Option<DeriveRows>,
}

/// The arguments of `rows(...)` on an m=1 kernel, as written.
pub struct DeriveRows {
    /// The `rows` key itself (where errors about the whole form point).
    pub key: Ident,
    pub name: Option<Ident>,
    pub rows: Option<Ident>,
    pub tile: Option<LitInt>,
    pub axis: Option<LitInt>,
    pub row_strides: Vec<(Ident, Expr)>,
    pub row_steps: Vec<(Ident, Expr)>,
    pub fixed: Vec<(Ident, LitInt)>,
    pub verify: Vec<(Ident, Vec<LitInt>)>,
}

const KEYS: &str = "grid, block, min_groups, rows_of, rows, row_stride, row_step, carry, verify or uses";
const DERIVE_KEYS: &str = "name, rows, tile, axis, row_stride, row_step, fix or verify";

/// `(name = value, ..)`.
fn assignments<V: syn::parse::Parse>(input: ParseStream) -> syn::Result<Vec<(Ident, V)>> {
    let content;
    parenthesized!(content in input);
    let items = Punctuated::<(Ident, V), Token![,]>::parse_terminated_with(&content, |s| {
        let name: Ident = s.parse()?;
        s.parse::<Token![=]>()?;
        Ok((name, s.parse()?))
    })?;
    Ok(items.into_iter().collect())
}

fn value_lists(input: ParseStream) -> syn::Result<Vec<(Ident, Vec<LitInt>)>> {
    let content;
    parenthesized!(content in input);
    let items = Punctuated::<(Ident, Vec<LitInt>), Token![,]>::parse_terminated_with(&content, |s| {
        let param: Ident = s.parse()?;
        s.parse::<Token![=]>()?;
        let values;
        bracketed!(values in s);
        let values = Punctuated::<LitInt, Token![,]>::parse_terminated(&values)?;
        Ok((param, values.into_iter().collect()))
    })?;
    Ok(items.into_iter().collect())
}

/// Skips an unknown key's value, so parsing goes on with the next key.
fn skip_value(input: ParseStream) -> syn::Result<()> {
    while !input.is_empty() && !input.peek(Token![,]) {
        input.parse::<TokenTree>()?;
    }
    Ok(())
}

/// The comma after a key, unless it was the last.
fn comma(input: ParseStream) -> syn::Result<()> {
    if !input.is_empty() {
        input.parse::<Token![,]>()?;
    }
    Ok(())
}

/// The inside of `rows(...)`, recording unknown and repeated keys in `diag`.
fn derive_rows(key: Ident, input: ParseStream, diag: &mut Diag) -> syn::Result<DeriveRows> {
    let mut d = DeriveRows {
        key,
        name: None,
        rows: None,
        tile: None,
        axis: None,
        row_strides: Vec::new(),
        row_steps: Vec::new(),
        fixed: Vec::new(),
        verify: Vec::new(),
    };
    let content;
    parenthesized!(content in input);
    let mut seen: Vec<String> = Vec::new();
    while !content.is_empty() {
        let k: Ident = content.parse()?;
        let name = k.to_string();
        if seen.contains(&name) && DERIVE_KEYS.contains(name.as_str()) {
            diag.spanned(&k, format!("duplicate key `{name}` in `rows(...)`: expected each key at most once"));
        }
        seen.push(name.clone());
        match name.as_str() {
            "name" | "rows" => {
                content.parse::<Token![=]>()?;
                let v: Ident = content.parse()?;
                if name == "name" {
                    d.name = Some(v)
                } else {
                    d.rows = Some(v)
                }
            }
            "tile" | "axis" => {
                content.parse::<Token![=]>()?;
                let v: LitInt = content.parse()?;
                if name == "tile" {
                    d.tile = Some(v)
                } else {
                    d.axis = Some(v)
                }
            }
            "row_stride" => d.row_strides.extend(assignments(&content)?),
            "row_step" => d.row_steps.extend(assignments(&content)?),
            "fix" => d.fixed.extend(assignments(&content)?),
            "verify" => d.verify.extend(value_lists(&content)?),
            _ => {
                diag.spanned(&k, format!("unknown key `{name}` in `rows(...)`: expected {DERIVE_KEYS}"));
                skip_value(&content)?;
            }
        }
        comma(&content)?;
    }
    Ok(d)
}

/// Parses the attribute arguments, recording every problem in `diag`.
pub fn parse(tokens: TokenStream, diag: &mut Diag) -> KernelAttr {
    let mut attr = KernelAttr {
        grid: None,
        block: None,
        min_groups: None,
        rows_of: None,
        rows: None,
        row_strides: Vec::new(),
        row_steps: Vec::new(),
        carried: Vec::new(),
        verify: Vec::new(),
        derive_rows: None,
    };
    let parser = |input: ParseStream| -> syn::Result<()> {
        let mut seen: Vec<String> = Vec::new();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            // `rows = param` names a rows kernel's row count; `rows(..)` derives a rows sibling.
            let name =
                if key == "rows" && input.peek(syn::token::Paren) { "rows(..)".to_string() } else { key.to_string() };
            if seen.contains(&name) && (KEYS.contains(name.as_str()) || name == "rows(..)") {
                diag.spanned(&key, format!("duplicate attribute key `{name}`: expected each key at most once"));
            }
            seen.push(name.clone());
            match name.as_str() {
                "grid" => {
                    input.parse::<Token![=]>()?;
                    let content;
                    bracketed!(content in input);
                    let axes: Punctuated<Expr, Token![,]> = Punctuated::parse_terminated(&content)?;
                    let axes: Vec<Expr> = axes.into_iter().collect();
                    if axes.is_empty() || axes.len() > 3 {
                        diag.spanned(&key, format!("expected 1 to 3 grid axes, found {}", axes.len()));
                    }
                    attr.grid = Some((key.span(), axes));
                }
                "block" => {
                    input.parse::<Token![=]>()?;
                    attr.block = Some(input.parse()?);
                }
                "min_groups" => {
                    input.parse::<Token![=]>()?;
                    attr.min_groups = Some(input.parse()?);
                }
                "rows_of" => {
                    input.parse::<Token![=]>()?;
                    attr.rows_of = Some(Path::parse_mod_style(input)?);
                }
                "rows" => {
                    input.parse::<Token![=]>()?;
                    attr.rows = Some(input.parse()?);
                }
                "rows(..)" => {
                    attr.derive_rows = Some(derive_rows(key, input, diag)?);
                }
                "row_stride" => attr.row_strides.extend(assignments(input)?),
                "row_step" => attr.row_steps.extend(assignments(input)?),
                "carry" => {
                    let content;
                    parenthesized!(content in input);
                    let items = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                    attr.carried.extend(items);
                }
                "verify" => attr.verify.extend(value_lists(input)?),
                "uses" => {
                    // Taken apart before parsing (`uses`, below); a kernel reaching here with
                    // it still named its helpers and was dispatched already.
                    input.parse::<Token![=]>()?;
                    let content;
                    bracketed!(content in input);
                    Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                }
                _ => {
                    diag.spanned(&key, format!("unknown attribute key `{name}`: expected {KEYS}"));
                    skip_value(input)?;
                }
            }
            comma(input)?;
        }
        Ok(())
    };
    if let Err(e) = parser.parse2(tokens) {
        diag.push(e);
    }
    if attr.grid.is_none() && !diag.has_errors() {
        diag.at(Span::call_site(), "expected `grid = [...]` in #[kernel(...)]: the number of workgroups along each axis, over scalar parameters");
    }
    match (&attr.rows_of, &attr.rows) {
        (Some(p), None) => {
            diag.spanned(p, "expected `rows = <param>` next to `rows_of`: the scalar parameter holding the row count");
        }
        (None, Some(r)) => {
            diag.spanned(r, "`rows` without `rows_of`: expected `rows_of = <m=1 kernel>` as well");
        }
        _ => {}
    }
    if attr.rows_of.is_none() {
        if let Some((buf, _)) = attr.row_strides.first() {
            diag.spanned(buf, "`row_stride` without `rows_of`: expected `rows_of = <m=1 kernel>` as well");
        }
        if let Some((scalar, _)) = attr.row_steps.first() {
            diag.spanned(scalar, "`row_step` without `rows_of`: expected `rows_of = <m=1 kernel>` as well");
        }
        if let Some(buf) = attr.carried.first() {
            diag.spanned(buf, "`carry` without `rows_of`: expected `rows_of = <m=1 kernel>` as well");
        }
    }
    attr
}

/// The helper names of a `uses = [a, b]` key, if the attribute has one (empty otherwise, or
/// when it does not parse: the full parse reports that).
pub fn uses(tokens: &TokenStream) -> Vec<Ident> {
    let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
    for (i, t) in tokens.iter().enumerate() {
        let TokenTree::Ident(id) = t else { continue };
        if id != "uses" || !matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '=') {
            continue;
        }
        if let Some(TokenTree::Group(g)) = tokens.get(i + 2) {
            let parsed = Punctuated::<Ident, Token![,]>::parse_terminated.parse2(g.stream());
            return parsed.map(|p| p.into_iter().collect()).unwrap_or_default();
        }
    }
    Vec::new()
}
