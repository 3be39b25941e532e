//! Rows siblings derived from their m=1 kernel: `#[kernel(.., rows(name = .., ..))]` on an
//! m=1 kernel also emits its rows sibling, written from the m=1 body by one mechanical rule,
//! then expanded like a hand-written `rows_of` kernel, so the build-time sibling proof checks
//! it exactly as it checks one written by hand. This module writes the sibling's tokens; it
//! never proves anything and never decides that a derivation is right (the verifier does).
//!
//! ```text
//! #[kernel(grid = [n, n_slots], rows(name = matvec_rows, tile = 8, axis = 1,
//!          row_stride(x = k, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(rows = [1, 3, 9])))]
//! ```
//!
//! Keys of `rows(...)`:
//! - `name = ident` (required): the rows kernel's name;
//! - `rows = ident` (default `rows`): its row-count parameter, appended to the m=1 parameters;
//! - `axis = A` (default: a new last grid axis) and `tile = T` (default 1): grid axis A runs
//!   over tiles of T rows, `(rows + T − 1) / T` workgroups (`rows` when T = 1). An existing
//!   axis must be 1 in the m=1 grid once `fix` is applied (one row is one m=1 launch), and
//!   `group_id(A)` in the m=1 body becomes 0;
//! - `row_stride(buf = expr, ..)`, `row_step(param = expr, ..)`: as for `rows_of`; row r
//!   indexes `buf[r·expr + i]` where the m=1 body indexes `buf[i]`, and sees `param + r·expr`;
//! - `fix(param = literal, ..)`: integer parameters held at one value: the rows body and grid
//!   read the literal (the parameter stays in the signature, unread), and the verifier tries
//!   only that value;
//! - `verify(param = [v, ..], ..)`: the rows kernel's verifier shapes; a parameter not listed
//!   keeps the m=1 kernel's list.
//!
//! The rows body, for T > 1 (for T = 1 the loop and the test are left out):
//!
//! ```text
//! for __baro_tile in 0..T {
//!     let __baro_row = group_id(A) * T + __baro_tile;
//!     if __baro_row < rows {
//!         let __baro_off_x = __baro_row * (k);      // one per row_stride
//!         let pos = pos + __baro_row * (1);         // one per row_step
//!         let x_stride: usize = 0;                  // one per fix
//!         <the m=1 body, `x[i]` as `x[__baro_off_x + (i)]`, `group_id(A)` as 0>
//!     }
//! }
//! ```
//!
//! A per-row buffer may only be indexed by name in the body (the helpers of `uses` are
//! inlined by then, so their indexes count); anything the rule cannot express (a grouping
//! that changes from row to row, state carried across rows) stays a hand-written `rows_of`
//! kernel.

use crate::attr::{DeriveRows, KernelAttr};
use crate::diag::{show, Diag};
use crate::generic::substitute;
use crate::signature::ParamSyntax;
use baro_dsl::ir::{ParamKind, ScalarType};
use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use std::collections::HashMap;
use syn::{Expr, ItemFn, LitInt};

/// The largest row tile: a workgroup steps through its tile's rows one after another.
const MAX_TILE: u32 = 1024;

/// The derived rows kernel: its attribute arguments and function, ready for `#[kernel]`'s
/// own expansion; or `None` with the errors in `diag`.
pub fn derive(
    d: &DeriveRows,
    attr: &KernelAttr,
    params: &[ParamSyntax],
    item: &ItemFn,
    diag: &mut Diag,
) -> Option<(TokenStream, ItemFn)> {
    let m1 = &item.sig.ident;
    if let Some(of) = &attr.rows_of {
        diag.spanned(
            &d.key,
            format!(
                "`rows(..)` on `{m1}`, which is itself declared `rows_of = {}`: expected an m=1 kernel to derive from",
                show(of)
            ),
        );
        return None;
    }
    let name = match &d.name {
        Some(n) if n == m1 => {
            diag.spanned(n, format!("`name = {n}`: expected a name for the rows kernel, found the m=1 kernel's own"));
            n.clone()
        }
        Some(n) => n.clone(),
        None => {
            diag.spanned(&d.key, "expected `name = <ident>` in `rows(...)`: the name of the rows kernel to derive");
            format_ident!("{}_rows", m1)
        }
    };
    let rows = d.rows.clone().unwrap_or_else(|| Ident::new("rows", d.key.span()));
    if params.iter().any(|p| p.name == rows) {
        let at = d.rows.as_ref().map_or(d.key.span(), Ident::span);
        diag.at(at, format!("the rows kernel appends a parameter `{rows}` (the row count), found one already in `{m1}`: expected another name, `rows = <ident>`"));
    }
    let param = |id: &Ident| params.iter().find(|p| p.name == *id);
    let tile = match &d.tile {
        None => 1,
        Some(t) => match t.base10_parse::<u32>() {
            Ok(v) if (1..=MAX_TILE).contains(&v) => v,
            Ok(v) => {
                diag.spanned(t, format!("`tile = {v}`: expected 1 to {MAX_TILE} rows per workgroup"));
                1
            }
            Err(e) => {
                diag.push(e);
                1
            }
        },
    };

    // `fix`: integer parameters, each once, with an integer literal.
    let mut fixed: Vec<(Ident, LitInt, syn::Type)> = Vec::new();
    for (p, v) in &d.fixed {
        let Some(ty) = param(p).filter(|s| int_scalar(&s.kind).is_some()).map(|s| s.ty.clone()) else {
            diag.spanned(p, format!("`fix({p} = ..)`: expected an integer scalar parameter of `{m1}`"));
            continue;
        };
        if fixed.iter().any(|(q, _, _)| q == p) {
            diag.spanned(p, format!("`fix({p} = ..)` twice: expected each parameter at most once"));
            continue;
        }
        if v.base10_parse::<u64>().is_err() {
            diag.spanned(v, format!("`fix({p} = {v})`: expected an unsigned integer literal"));
            continue;
        }
        fixed.push((p.clone(), v.clone(), ty));
    }

    // The grid: `fix` applied, then axis A over row tiles.
    let grid: Vec<Expr> = attr.grid.as_ref().map(|(_, g)| g.clone()).unwrap_or_default();
    let literal_of = |id: &Ident| fixed.iter().find(|(q, _, _)| q == id).map(|(_, v, _)| TokenTree::Literal(v.token()));
    let mut axes: Vec<TokenStream> = grid.iter().map(|e| substitute(e.to_token_stream(), &literal_of)).collect();
    let axis = match &d.axis {
        None => Some(axes.len()),
        Some(a) => match a.base10_parse::<usize>() {
            Ok(v) if v <= axes.len() && v < 3 => Some(v),
            Ok(v) => {
                let last = axes.len().min(2);
                let new = if axes.len() < 3 { format!(", or {} for a new one", axes.len()) } else { String::new() };
                diag.spanned(
                    a,
                    format!("`axis = {v}`: expected an axis from 0 to {last} (an axis of `{m1}`'s grid{new})"),
                );
                None
            }
            Err(e) => {
                diag.push(e);
                None
            }
        },
    };
    if axis == Some(3) {
        diag.spanned(&d.key, format!("`{m1}` has 3 grid axes, so the rows cannot take a new one: expected `axis = A` naming one that is 1 once fixed"));
    }
    let checked = axis.is_some_and(|a| a < 3);
    let axis = axis.unwrap_or(axes.len()).min(2);
    if let Some(found) = axes.get(axis).filter(|_| checked) {
        if !is_one(found) {
            let at = d.axis.as_ref().map_or(d.key.span(), LitInt::span);
            let hint = match syn::parse2::<Ident>(found.clone()) {
                Ok(p) if param(&p).is_some_and(|s| int_scalar(&s.kind).is_some()) => {
                    format!("; `fix({p} = 1)` holds it there")
                }
                _ => String::new(),
            };
            let found = show(found);
            diag.at(at, format!("grid axis {axis} of `{m1}` is `{found}`, expected 1 once fixed: one m=1 launch along it must be one row{hint}"));
        }
    }
    let tiles = if tile == 1 {
        quote_spanned!(d.key.span()=> #rows)
    } else {
        let (t1, t) = (lit(tile - 1), lit(tile));
        quote_spanned!(d.key.span()=> (#rows + #t1) / #t)
    };
    if axis < axes.len() {
        axes[axis] = tiles;
    } else if axis < 3 {
        axes.push(tiles);
    }

    // Per-row buffers and stepped parameters.
    let mut offsets: Vec<(Ident, Ident, Expr)> = Vec::new();
    for (b, stride) in &d.row_strides {
        if !matches!(param(b).map(|s| &s.kind), Some(ParamKind::Buffer { .. })) {
            diag.spanned(b, format!("`row_stride({b} = ..)`: expected a buffer parameter of `{m1}`"));
            continue;
        }
        if offsets.iter().any(|(q, _, _)| q == b) {
            diag.spanned(b, format!("`row_stride({b} = ..)` twice: expected each buffer at most once"));
            continue;
        }
        offsets.push((b.clone(), format_ident!("__baro_off_{}", b, span = b.span()), stride.clone()));
    }
    // A stepped parameter of another type than the steps' `usize` needs a cast.
    let mut steps: Vec<(Ident, Expr, Option<syn::Type>)> = Vec::new();
    for (p, step) in &d.row_steps {
        let Some(ty) =
            param(p).and_then(|s| int_scalar(&s.kind).map(|t| (t != ScalarType::INDEX).then(|| s.ty.clone())))
        else {
            diag.spanned(p, format!("`row_step({p} = ..)`: expected an integer scalar parameter of `{m1}`"));
            continue;
        };
        if fixed.iter().any(|(q, _, _)| q == p) || steps.iter().any(|(q, _, _)| q == p) {
            diag.spanned(
                p,
                format!("`row_step({p} = ..)`: `{p}` is already fixed or stepped, expected each parameter once"),
            );
            continue;
        }
        steps.push((p.clone(), step.clone(), ty));
    }

    // The m=1 body, per-row indexes offset and `group_id(axis)` zero.
    let per_row: HashMap<String, Ident> = offsets.iter().map(|(b, off, _)| (b.to_string(), off.clone())).collect();
    let mut rw = Rewrite { per_row: &per_row, axis, errors: Vec::new() };
    let stmts: TokenStream = item.block.stmts.iter().map(ToTokens::to_token_stream).collect();
    let body = rw.tokens(stmts);
    for e in rw.errors {
        diag.push(e);
    }
    if diag.has_errors() {
        return None;
    }

    let sp = d.key.span();
    let row = Ident::new("__baro_row", sp);
    let offset_lets = offsets.iter().map(|(_, off, stride)| quote_spanned!(sp=> let #off = #row * (#stride);));
    let step_lets = steps.iter().map(|(p, step, ty)| {
        let by = format_ident!("__baro_step_{}", p, span = p.span());
        let add = match ty {
            None => quote_spanned!(sp=> #by),
            Some(t) => quote_spanned!(sp=> (#by as #t)),
        };
        (quote_spanned!(sp=> let #by = #row * (#step);), quote_spanned!(sp=> let #p = #p + #add;))
    });
    let (step_amounts, step_lets): (Vec<_>, Vec<_>) = step_lets.unzip();
    let fix_lets = fixed.iter().map(|(p, v, t)| quote_spanned!(sp=> let #p: #t = #v;));
    let inner = quote! { #(#offset_lets)* #(#step_amounts)* #(#step_lets)* #(#fix_lets)* #body };
    let ax = lit(axis as u32);
    let block = if tile == 1 {
        quote_spanned!(sp=> { let #row = group_id(#ax); #inner })
    } else {
        let t = lit(tile);
        quote_spanned!(sp=> {
            for __baro_tile in 0..#t {
                let #row = group_id(#ax) * #t + __baro_tile;
                if #row < #rows { #inner }
            }
        })
    };

    let mut func = item.clone();
    func.sig.ident = name.clone();
    func.sig.inputs.push(syn::parse_quote_spanned!(sp=> #rows: usize));
    func.block = match syn::parse2(block) {
        Ok(b) => Box::new(b),
        Err(e) => {
            diag.push(e);
            return None;
        }
    };
    let described = describe(m1, &offsets, &steps, &fixed, tile, axis);
    func.attrs.retain(|a| !a.path().is_ident("doc"));
    func.attrs.insert(0, syn::parse_quote!(#[doc = #described]));

    // Attribute arguments: the m=1 block and verify lists, with `fix` and `verify(..)` applied.
    let mut verify: Vec<(Ident, Vec<LitInt>)> =
        attr.verify.iter().filter(|(p, _)| !fixed.iter().any(|(q, _, _)| q == p)).cloned().collect();
    verify.extend(fixed.iter().map(|(p, v, _)| (p.clone(), vec![v.clone()])));
    for (p, vs) in &d.verify {
        match verify.iter_mut().find(|(q, _)| q == p) {
            Some(slot) => *slot = (p.clone(), vs.clone()),
            None => verify.push((p.clone(), vs.clone())),
        }
    }
    let verify = verify.iter().map(|(p, vs)| quote!(#p = [#(#vs),*]));
    let block_key = attr.block.as_ref().map(|b| quote!(block = #b,));
    let groups_key = attr.min_groups.as_ref().map(|g| quote!(min_groups = #g,));
    let strides = offsets.iter().map(|(b, _, e)| quote!(#b = #e));
    let row_steps = steps.iter().map(|(p, e, _)| quote!(#p = #e));
    let of = Ident::new(&m1.to_string(), d.name.as_ref().map_or(sp, Ident::span));
    let rows_attr = quote! {
        grid = [#(#axes),*], #block_key #groups_key rows_of = #of, rows = #rows,
        row_stride(#(#strides),*), row_step(#(#row_steps),*), verify(#(#verify),*)
    };
    Some((rows_attr, func))
}

/// What the derived function's doc comment says.
fn describe(
    m1: &Ident,
    offsets: &[(Ident, Ident, Expr)],
    steps: &[(Ident, Expr, Option<syn::Type>)],
    fixed: &[(Ident, LitInt, syn::Type)],
    tile: u32,
    axis: usize,
) -> String {
    let mut parts: Vec<String> = offsets.iter().map(|(b, _, e)| format!("`{b}` at r·({})", show(e))).collect();
    parts.extend(steps.iter().map(|(p, e, _)| format!("`{p}` + r·({})", show(e))));
    parts.extend(fixed.iter().map(|(p, v, _)| format!("`{p}` = {v}")));
    let per = if tile == 1 {
        "one row per workgroup".to_string()
    } else {
        format!("{tile} rows per workgroup, one after another")
    };
    format!(
        " `{m1}` over rows, derived from it by `#[kernel(rows(..))]` and proven its sibling at build time: row r runs `{m1}`'s body with {}; {per} along grid axis {axis}.",
        if parts.is_empty() { "nothing changed".to_string() } else { parts.join(", ") }
    )
}

fn int_scalar(k: &ParamKind) -> Option<ScalarType> {
    match k {
        ParamKind::Scalar(t) if t.is_int() => Some(*t),
        _ => None,
    }
}

fn lit(v: u32) -> Literal {
    Literal::u32_unsuffixed(v)
}

/// True if the tokens are the literal 1 (possibly parenthesized).
fn is_one(ts: &TokenStream) -> bool {
    match syn::parse2::<Expr>(ts.clone()) {
        Ok(e) => is_one_expr(&e),
        Err(_) => false,
    }
}

fn is_one_expr(e: &Expr) -> bool {
    match e {
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse::<u64>().ok() == Some(1),
        Expr::Paren(p) => is_one_expr(&p.expr),
        Expr::Group(g) => is_one_expr(&g.expr),
        _ => false,
    }
}

fn regroup(g: &Group, stream: TokenStream) -> TokenTree {
    let mut ng = Group::new(g.delimiter(), stream);
    ng.set_span(g.span());
    TokenTree::Group(ng)
}

/// The token rewrite of the m=1 body (reductions are macro tokens, so this works on tokens,
/// not on syntax trees).
struct Rewrite<'a> {
    /// Per-row buffer name → the local holding its row offset.
    per_row: &'a HashMap<String, Ident>,
    axis: usize,
    errors: Vec<syn::Error>,
}

impl Rewrite<'_> {
    fn tokens(&mut self, ts: TokenStream) -> TokenStream {
        let toks: Vec<TokenTree> = ts.into_iter().collect();
        let mut out: Vec<TokenTree> = Vec::with_capacity(toks.len());
        let mut i = 0;
        while i < toks.len() {
            let after_path =
                i > 0 && matches!(&toks[i - 1], TokenTree::Punct(p) if p.as_char() == '.' || p.as_char() == ':');
            match &toks[i] {
                TokenTree::Ident(id) if !after_path && id == "group_id" => {
                    if let Some(TokenTree::Group(g)) = toks.get(i + 1) {
                        let arg = syn::parse2::<LitInt>(g.stream()).ok().and_then(|l| l.base10_parse::<usize>().ok());
                        if g.delimiter() == Delimiter::Parenthesis && arg == Some(self.axis) {
                            // One m=1 launch is one row: its group id along the rows axis is 0.
                            let mut zero = Literal::usize_suffixed(0);
                            zero.set_span(id.span());
                            out.push(TokenTree::Literal(zero));
                            i += 2;
                            continue;
                        }
                    }
                    out.push(toks[i].clone());
                }
                TokenTree::Ident(id) if !after_path && self.per_row.contains_key(&id.to_string()) => {
                    let declared = i > 0 && matches!(&toks[i - 1], TokenTree::Ident(k) if k == "let" || k == "mut");
                    match toks.get(i + 1) {
                        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket && !declared => {
                            let off = &self.per_row[&id.to_string()];
                            let mut index = Group::new(Delimiter::Parenthesis, self.tokens(g.stream()));
                            index.set_span(g.span());
                            let plus = TokenTree::Punct(Punct::new('+', Spacing::Alone));
                            let stream: TokenStream = [TokenTree::Ident(off.clone()), plus, TokenTree::Group(index)].into_iter().collect();
                            out.push(toks[i].clone());
                            out.push(regroup(g, stream));
                            i += 2;
                            continue;
                        }
                        _ if declared => self.errors.push(syn::Error::new(id.span(), format!("`{id}` is a per-row buffer (`row_stride`), declared again here: expected another name for this local, so the derived rows kernel can offset `{id}[..]`"))),
                        _ => self.errors.push(syn::Error::new(
                            id.span(),
                            format!("per-row buffer `{id}` (`row_stride`) used here other than as `{id}[i]`: the derived rows kernel offsets only indexes of it; index it here, or write the rows kernel by hand (`rows_of`)"),
                        )),
                    }
                    out.push(toks[i].clone());
                }
                TokenTree::Group(g) => out.push(regroup(g, self.tokens(g.stream()))),
                other => out.push(other.clone()),
            }
            i += 1;
        }
        out.into_iter().collect()
    }
}
