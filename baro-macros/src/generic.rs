//! Generic kernels: one `#[kernel]` definition with `const` parameters, made into several
//! kernels by `instances(..)`. Each instance is written out as tokens, with its constants in
//! place and its `#[when(..)]` statements kept or dropped, and then expanded exactly as a
//! hand-written kernel (helpers, rows derivation, sibling proof and all), so it is compiled,
//! verified and proven on its own. This module only writes tokens; it never lowers, verifies
//! or decides what a kernel means.
//!
//! ```text
//! #[kernel(grid = [(n + 31) / 32, (rows + 7) / 8], rows = rows, ..,
//!          instances(matvec_q4_k_q8_rows8(FMT = Q4K, rows_of = matvec_q4_k_q8),
//!                    matvec_q6_k_q8_rows8(FMT = Q6K, rows_of = matvec_q6_k_q8, row_stride(..))))]
//! pub fn matvec_kq8_rows8<const FMT: Format>(xq: &[u32], #[when(FMT != Q6K)] xsum: &[i32], ..) {
//!     let xs = shared::<u32, 9216>();
//!     #[when(FMT == Q4K)]
//!     let ys = sum!(r in 0..8, ..);
//!     ..
//! }
//! ```
//!
//! - `const P: T` with T an integer type takes an unsigned integer literal, with `bool` takes
//!   `true` or `false`, with any other type a word (an identifier: a weight format's name, or
//!   a name the body uses). Wherever P stands in the definition (attribute, signature, body,
//!   reduction bodies) the instance's value replaces it, so a literal reaches the places that
//!   need one (`shared::<T, P>()`, `sum!(r in 0..P, ..)`, a loop unrolled over `0..P`).
//! - `instances(name(P = v, .., key .., ..), ..)`: each instance binds every const parameter
//!   once; its other entries are `#[kernel]` keys that replace the definition's key of the same
//!   name (or add one): `rows_of`, `row_stride`, `verify`, `grid`, `rows(..)`...
//! - `#[when(cond)]` on a statement or a parameter keeps it in the instances where `cond`
//!   holds and drops it elsewhere; `cond` is made of const parameters, literals, the words the
//!   instances bind, `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&`, `||`, `!` and parentheses.

use proc_macro2::{Delimiter, Group, Ident, Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use std::collections::HashMap;
use syn::visit_mut::VisitMut;
use syn::{BinOp, Expr, FnArg, GenericParam, ItemFn, Lit, Type, UnOp};

/// The `#[kernel]` keys an instance may give (anything else named `x = ..` in an instance
/// must be a const parameter).
const KEYS: &str = "grid, block, min_groups, rows_of, rows, row_stride, row_step, carry, verify, uses";
const INT_TYPES: [&str; 10] = ["usize", "u8", "u16", "u32", "u64", "isize", "i8", "i16", "i32", "i64"];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Bool,
    Word,
}

#[derive(Clone, PartialEq, Debug)]
enum Value {
    Int(u128),
    Bool(bool),
    Word(String),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "an integer",
            Value::Bool(_) => "a bool",
            Value::Word(_) => "a word",
        }
    }
}

struct ConstParam {
    name: Ident,
    kind: Kind,
    ty: Type,
}

struct Instance {
    name: Ident,
    /// Const parameter name → (the token written, its value).
    bindings: HashMap<String, (TokenTree, Value)>,
    /// The instance's own `#[kernel]` keys, each an entry's tokens.
    keys: Vec<TokenStream>,
}

/// The attribute split at its `instances(..)` key, if it has one: (the other keys, the key,
/// the key's content).
pub fn split(attr: &TokenStream) -> Option<(TokenStream, Ident, TokenStream)> {
    let entries = entries(attr.clone());
    let at = entries.iter().position(|e| key_of(e).as_deref() == Some("instances"))?;
    let mut it = entries[at].clone().into_iter();
    let (Some(TokenTree::Ident(key)), Some(TokenTree::Group(g))) = (it.next(), it.next()) else { return None };
    let rest = entries.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, e)| e.clone());
    Some((join(rest), key, g.stream()))
}

/// A generic kernel's expansion: every instance as its own `#[kernel]`, or, on an error in
/// the definition, the errors and a stub for each instance named.
pub fn expand(rest: TokenStream, key: Ident, content: TokenStream, item: TokenStream) -> TokenStream {
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            let err = syn::Error::new(e.span(), format!("#[kernel] applies to a function: {e}")).to_compile_error();
            return quote! { #err #item };
        }
    };
    let mut errors: Vec<syn::Error> = Vec::new();
    let params = const_params(&func, &mut errors);
    let instances = instances(&func.sig.ident, &key, content, &params, &mut errors);
    let mut words: Vec<String> = Vec::new();
    // In instance and parameter order, so messages listing them read the same every build.
    for inst in &instances {
        for (_, v) in params.iter().filter_map(|p| inst.bindings.get(&p.name.to_string())) {
            if let Value::Word(w) = v {
                if !words.contains(w) {
                    words.push(w.clone());
                }
            }
        }
    }
    let mut made = Vec::new();
    if errors.is_empty() {
        for inst in &instances {
            match instance(&func, &rest, &params, &words, inst) {
                Ok((attr, f)) => made.push(crate::expand::kernel(attr, f)),
                Err(es) => errors.extend(es),
            }
        }
    }
    if errors.is_empty() {
        return quote! { #(#made)* };
    }
    let errs = errors.iter().map(syn::Error::to_compile_error);
    let vis = &func.vis;
    let generic = &func.sig.ident;
    let stubs = instances.iter().map(|inst| {
        let n = &inst.name;
        let msg = format!("kernel `{n}` (an instance of `{generic}`) failed to compile; see the errors above");
        quote! { #vis fn #n() -> ::baro_dsl::ir::Kernel { ::core::unreachable!(#msg) } }
    });
    quote! { #(#errs)* #(#stubs)* }
}

/// The definition's `const` parameters; anything else among its generics is an error.
fn const_params(func: &ItemFn, errors: &mut Vec<syn::Error>) -> Vec<ConstParam> {
    let g = &func.sig.generics;
    if let Some(w) = &g.where_clause {
        errors.push(syn::Error::new_spanned(
            w,
            "a generic kernel has no `where` clause: expected only `const` parameters",
        ));
    }
    if g.params.is_empty() {
        errors.push(syn::Error::new_spanned(
            &func.sig.ident,
            format!(
                "`instances(..)` on `{}`, which has no const parameters: expected `fn {}<const P: T, ..>`",
                func.sig.ident, func.sig.ident
            ),
        ));
    }
    let mut out = Vec::new();
    for p in &g.params {
        let GenericParam::Const(c) = p else {
            errors.push(syn::Error::new_spanned(
                p,
                "a generic kernel's parameters are constants: expected `const NAME: T` (T an integer type, `bool`, or a word type such as `Format`)",
            ));
            continue;
        };
        if let Some(d) = &c.default {
            errors.push(syn::Error::new_spanned(
                d,
                format!("`const {}` has a default: expected every instance to give its value", c.ident),
            ));
        }
        let ty_name = match &c.ty {
            Type::Path(tp) => tp.path.get_ident().map(Ident::to_string),
            _ => None,
        };
        let kind = match ty_name.as_deref() {
            Some(t) if INT_TYPES.contains(&t) => Kind::Int,
            Some("bool") => Kind::Bool,
            Some(_) => Kind::Word,
            None => {
                errors.push(syn::Error::new_spanned(
                    &c.ty,
                    format!("`const {}`'s type: expected an integer type, `bool` or a word type's name", c.ident),
                ));
                continue;
            }
        };
        out.push(ConstParam { name: c.ident.clone(), kind, ty: c.ty.clone() });
    }
    out
}

/// Reads `instances(name(P = v, .., key .., ..), ..)`.
fn instances(
    generic: &Ident,
    key: &Ident,
    content: TokenStream,
    params: &[ConstParam],
    errors: &mut Vec<syn::Error>,
) -> Vec<Instance> {
    let names = params.iter().map(|p| p.name.to_string()).collect::<Vec<_>>().join(", ");
    let mut out: Vec<Instance> = Vec::new();
    for entry in entries(content) {
        let toks: Vec<TokenTree> = entry.clone().into_iter().collect();
        let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(g)), None) = (toks.first(), toks.get(1), toks.get(2))
        else {
            errors.push(syn::Error::new_spanned(
                &entry,
                format!("an instance of `{generic}`: expected `name({names} = value, ..)`"),
            ));
            continue;
        };
        if g.delimiter() != Delimiter::Parenthesis {
            errors.push(syn::Error::new_spanned(
                &entry,
                format!("an instance of `{generic}`: expected `name({names} = value, ..)`"),
            ));
            continue;
        }
        if out.iter().any(|i| i.name == *name) {
            errors.push(syn::Error::new_spanned(name, format!("instance `{name}` twice: expected each name once")));
        }
        let mut inst = Instance { name: name.clone(), bindings: HashMap::new(), keys: Vec::new() };
        // The parameters bound, well or not (a bad value is reported once, not as missing too).
        let mut seen: Vec<Ident> = Vec::new();
        for e in entries(g.stream()) {
            let t: Vec<TokenTree> = e.clone().into_iter().collect();
            let bound = match (t.first(), t.get(1)) {
                (Some(TokenTree::Ident(p)), Some(TokenTree::Punct(eq))) if eq.as_char() == '=' => Some(p.clone()),
                _ => None,
            };
            let Some(p) = bound.filter(|p| !KEYS.split(", ").any(|k| p == k)) else {
                inst.keys.push(e);
                continue;
            };
            let Some(param) = params.iter().find(|c| c.name == p) else {
                errors.push(syn::Error::new_spanned(
                    &p,
                    format!("`{p} = ..` in instance `{name}`: expected a const parameter of `{generic}` ({names}) or a #[kernel] key ({KEYS})"),
                ));
                continue;
            };
            if seen.contains(&p) {
                errors.push(syn::Error::new_spanned(
                    &p,
                    format!("`{p}` bound twice in instance `{name}`: expected it once"),
                ));
                continue;
            }
            seen.push(p.clone());
            let value_toks = &t[2..];
            match value(param, value_toks) {
                Ok((tok, v)) => {
                    inst.bindings.insert(p.to_string(), (tok, v));
                }
                Err(msg) => {
                    let at: TokenStream = value_toks.iter().cloned().collect();
                    let at = if at.is_empty() { p.to_token_stream() } else { at };
                    errors.push(syn::Error::new_spanned(at, format!("`{p}` in instance `{name}`: {msg}")));
                }
            }
        }
        for param in params {
            if !seen.contains(&param.name) {
                let ty = param.ty.to_token_stream();
                errors.push(syn::Error::new_spanned(
                    name,
                    format!(
                        "instance `{name}` does not give `{}`: expected `{} = <{}>` in its list",
                        param.name, param.name, ty
                    ),
                ));
            }
        }
        out.push(inst);
    }
    if out.is_empty() {
        errors.push(syn::Error::new_spanned(
            key,
            format!("`instances()` names no kernel: expected `instances(name({names} = value, ..), ..)`"),
        ));
    }
    out
}

/// One binding's value, checked against the parameter's kind.
fn value(param: &ConstParam, toks: &[TokenTree]) -> Result<(TokenTree, Value), String> {
    let ty = param.ty.to_token_stream();
    let [tok] = toks else {
        return Err(format!("expected one token, a value of `{ty}`"));
    };
    let v = match (param.kind, tok) {
        (Kind::Int, TokenTree::Literal(l)) => syn::parse2::<syn::LitInt>(l.to_token_stream())
            .ok()
            .and_then(|i| i.base10_parse::<u128>().ok())
            .map(Value::Int),
        (Kind::Bool, TokenTree::Ident(i)) if i == "true" || i == "false" => Some(Value::Bool(i == "true")),
        (Kind::Word, TokenTree::Ident(i)) if i != "true" && i != "false" => Some(Value::Word(i.to_string())),
        _ => None,
    };
    match v {
        Some(v) => Ok((tok.clone(), v)),
        None => Err(match param.kind {
            Kind::Int => format!("expected an unsigned integer literal (a `{ty}`), found `{tok}`"),
            Kind::Bool => format!("expected `true` or `false`, found `{tok}`"),
            Kind::Word => format!("expected a word (an identifier; `{}` is a `{ty}`), found `{tok}`", param.name),
        }),
    }
}

/// One instance's attribute and function tokens.
fn instance(
    func: &ItemFn,
    rest: &TokenStream,
    params: &[ConstParam],
    words: &[String],
    inst: &Instance,
) -> Result<(TokenStream, TokenStream), Vec<syn::Error>> {
    let values: HashMap<String, Value> = inst.bindings.iter().map(|(k, (_, v))| (k.clone(), v.clone())).collect();
    let mut when = When { values: &values, params, words, errors: Vec::new() };
    let mut f = func.clone();
    f.sig.generics = syn::Generics::default();
    f.sig.ident = inst.name.clone();
    let inputs = std::mem::take(&mut f.sig.inputs);
    for mut arg in inputs {
        let keep = match &mut arg {
            FnArg::Typed(pt) => when.keep(&mut pt.attrs),
            FnArg::Receiver(r) => when.keep(&mut r.attrs),
        };
        if keep {
            f.sig.inputs.push(arg);
        }
    }
    when.visit_block_mut(&mut f.block);
    let mut errors = when.errors;
    let shown: Vec<String> = params
        .iter()
        .map(|p| {
            format!(
                "{} = {}",
                p.name,
                inst.bindings.get(&p.name.to_string()).map_or(String::new(), |(t, _)| t.to_string())
            )
        })
        .collect();
    let doc = format!(" An instance of `{}` with {} (`#[kernel(instances(..))]`).", func.sig.ident, shown.join(", "));
    f.attrs.push(syn::parse_quote!(#[doc = #doc]));
    let lookup = |id: &Ident| inst.bindings.get(&id.to_string()).map(|(t, _)| t.clone());
    let item = substitute(f.to_token_stream(), &lookup);
    if let Some(sp) = stray_when(&item) {
        errors.push(syn::Error::new(
            sp,
            "`#[when(..)]` here is not decided: expected it on a statement of a block or on a parameter",
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // The definition's keys, each replaced by the instance's key of the same name.
    let mut keys: Vec<TokenStream> = entries(rest.clone());
    for k in &inst.keys {
        match keys.iter_mut().find(|e| key_of(e).is_some() && key_of(e) == key_of(k)) {
            Some(slot) => *slot = k.clone(),
            None => keys.push(k.clone()),
        }
    }
    Ok((substitute(join(keys.into_iter()), &lookup), item))
}

/// Keeps or drops the statements and parameters marked `#[when(..)]`.
struct When<'a> {
    values: &'a HashMap<String, Value>,
    params: &'a [ConstParam],
    words: &'a [String],
    errors: Vec<syn::Error>,
}

impl VisitMut for When<'_> {
    fn visit_block_mut(&mut self, b: &mut syn::Block) {
        let stmts = std::mem::take(&mut b.stmts);
        for mut s in stmts {
            if stmt_attrs(&mut s).is_none_or(|a| self.keep(a)) {
                b.stmts.push(s);
            }
        }
        syn::visit_mut::visit_block_mut(self, b);
    }
}

impl When<'_> {
    /// Removes the `#[when]` attributes from `attrs`: true if every one of them holds.
    fn keep(&mut self, attrs: &mut Vec<syn::Attribute>) -> bool {
        let mut keep = true;
        let all = std::mem::take(attrs);
        for a in all {
            if !a.path().is_ident("when") {
                attrs.push(a);
                continue;
            }
            match a.parse_args::<Expr>().and_then(|e| self.eval(&e).map(|v| (e, v))) {
                Ok((_, Value::Bool(b))) => keep &= b,
                Ok((e, v)) => self.errors.push(syn::Error::new_spanned(
                    e,
                    format!("`#[when(..)]`: expected a condition (a bool), found {}", v.kind()),
                )),
                Err(e) => self.errors.push(e),
            }
        }
        keep
    }

    fn eval(&self, e: &Expr) -> syn::Result<Value> {
        let err = |node: &dyn ToTokens, msg: String| syn::Error::new_spanned(node, msg);
        match e {
            Expr::Paren(p) => self.eval(&p.expr),
            Expr::Group(g) => self.eval(&g.expr),
            Expr::Lit(l) => match &l.lit {
                Lit::Int(i) => Ok(Value::Int(i.base10_parse()?)),
                Lit::Bool(b) => Ok(Value::Bool(b.value)),
                _ => Err(err(l, "`#[when(..)]`: expected an integer or bool literal".into())),
            },
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let id = p.path.get_ident().map(Ident::to_string).unwrap_or_default();
                if let Some(v) = self.values.get(&id) {
                    Ok(v.clone())
                } else if self.words.contains(&id) {
                    Ok(Value::Word(id))
                } else {
                    let names: Vec<String> = self.params.iter().map(|c| c.name.to_string()).collect();
                    Err(err(
                        p,
                        format!(
                            "`{id}` in `#[when(..)]`: expected a const parameter ({}) or a word an instance gives one ({})",
                            names.join(", "),
                            self.words.join(", ")
                        ),
                    ))
                }
            }
            Expr::Unary(u) if matches!(u.op, UnOp::Not(_)) => match self.eval(&u.expr)? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                v => Err(err(&u.expr, format!("`!` in `#[when(..)]`: expected a bool, found {}", v.kind()))),
            },
            Expr::Binary(b) => {
                let (l, r) = (self.eval(&b.left)?, self.eval(&b.right)?);
                let mismatch = || err(b, format!("`#[when(..)]`: {} and {} cannot be compared", l.kind(), r.kind()));
                match (b.op, &l, &r) {
                    (BinOp::And(_), Value::Bool(x), Value::Bool(y)) => Ok(Value::Bool(*x && *y)),
                    (BinOp::Or(_), Value::Bool(x), Value::Bool(y)) => Ok(Value::Bool(*x || *y)),
                    (BinOp::And(_) | BinOp::Or(_), _, _) => Err(err(b, "`&&`/`||` in `#[when(..)]`: expected bools on both sides".into())),
                    (BinOp::Eq(_) | BinOp::Ne(_), _, _) if std::mem::discriminant(&l) != std::mem::discriminant(&r) => Err(mismatch()),
                    (BinOp::Eq(_), _, _) => Ok(Value::Bool(l == r)),
                    (BinOp::Ne(_), _, _) => Ok(Value::Bool(l != r)),
                    (BinOp::Lt(_), Value::Int(x), Value::Int(y)) => Ok(Value::Bool(x < y)),
                    (BinOp::Le(_), Value::Int(x), Value::Int(y)) => Ok(Value::Bool(x <= y)),
                    (BinOp::Gt(_), Value::Int(x), Value::Int(y)) => Ok(Value::Bool(x > y)),
                    (BinOp::Ge(_), Value::Int(x), Value::Int(y)) => Ok(Value::Bool(x >= y)),
                    (BinOp::Lt(_) | BinOp::Le(_) | BinOp::Gt(_) | BinOp::Ge(_), _, _) => Err(mismatch()),
                    _ => Err(err(b, "`#[when(..)]`: expected `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&` or `||`".into())),
                }
            }
            other => Err(err(
                other,
                "`#[when(..)]`: expected a condition over const parameters (literals, words, comparisons, `&&`, `||`, `!`)".into(),
            )),
        }
    }
}

/// The outer attributes of a statement that hold its `#[when]`, if any: a `let`'s or a
/// macro's own, an expression statement's on its leftmost operand (where syn puts them, as
/// rustc does: `#[a] y[i] = v;` holds `#[a]` on `y[i]`).
fn stmt_attrs(s: &mut syn::Stmt) -> Option<&mut Vec<syn::Attribute>> {
    match s {
        syn::Stmt::Local(l) => Some(&mut l.attrs),
        syn::Stmt::Macro(m) => Some(&mut m.attrs),
        syn::Stmt::Item(_) => None,
        syn::Stmt::Expr(e, _) => when_attrs(e),
    }
}

fn when_attrs(e: &mut Expr) -> Option<&mut Vec<syn::Attribute>> {
    if attrs_of(e).is_some_and(|a| a.iter().any(|x| x.path().is_ident("when"))) {
        return attrs_of(e);
    }
    match e {
        Expr::Assign(x) => when_attrs(&mut x.left),
        Expr::Binary(x) => when_attrs(&mut x.left),
        Expr::Cast(x) => when_attrs(&mut x.expr),
        Expr::Index(x) => when_attrs(&mut x.expr),
        Expr::Field(x) => when_attrs(&mut x.base),
        Expr::MethodCall(x) => when_attrs(&mut x.receiver),
        Expr::Call(x) => when_attrs(&mut x.func),
        _ => None,
    }
}

fn attrs_of(e: &mut Expr) -> Option<&mut Vec<syn::Attribute>> {
    Some(match e {
        Expr::Assign(x) => &mut x.attrs,
        Expr::Binary(x) => &mut x.attrs,
        Expr::Block(x) => &mut x.attrs,
        Expr::Call(x) => &mut x.attrs,
        Expr::Cast(x) => &mut x.attrs,
        Expr::Field(x) => &mut x.attrs,
        Expr::ForLoop(x) => &mut x.attrs,
        Expr::If(x) => &mut x.attrs,
        Expr::Index(x) => &mut x.attrs,
        Expr::Lit(x) => &mut x.attrs,
        Expr::Macro(x) => &mut x.attrs,
        Expr::MethodCall(x) => &mut x.attrs,
        Expr::Paren(x) => &mut x.attrs,
        Expr::Path(x) => &mut x.attrs,
        Expr::Unary(x) => &mut x.attrs,
        Expr::While(x) => &mut x.attrs,
        _ => return None,
    })
}

/// Where a `#[when(..)]` is left in these tokens, if anywhere.
pub fn stray_when(ts: &TokenStream) -> Option<Span> {
    let toks: Vec<TokenTree> = ts.clone().into_iter().collect();
    for (i, t) in toks.iter().enumerate() {
        match t {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(g)) = toks.get(i + 1) {
                    let first = g.stream().into_iter().next();
                    if g.delimiter() == Delimiter::Bracket
                        && matches!(&first, Some(TokenTree::Ident(id)) if id == "when")
                    {
                        return Some(g.span());
                    }
                }
            }
            TokenTree::Group(g) => {
                if let Some(sp) = stray_when(&g.stream()) {
                    return Some(sp);
                }
            }
            _ => {}
        }
    }
    None
}

/// Replaces every name that `value` knows (not after `.` or `::`) with its token, spanned where
/// the name stood.
pub fn substitute(ts: TokenStream, value: &impl Fn(&Ident) -> Option<TokenTree>) -> TokenStream {
    let mut out: Vec<TokenTree> = Vec::new();
    let mut after_path = false;
    for t in ts {
        // After `.` (a method or field) or `:` (a path), but not after the `..` of a range.
        let range = matches!(out.last(), Some(TokenTree::Punct(p)) if p.as_char() == '.');
        let next_after_path = matches!(&t, TokenTree::Punct(p) if (p.as_char() == '.' && !range) || p.as_char() == ':');
        let t = match t {
            TokenTree::Ident(id) if !after_path => match value(&id) {
                Some(mut v) => {
                    v.set_span(id.span());
                    v
                }
                None => TokenTree::Ident(id),
            },
            TokenTree::Group(g) => {
                let mut ng = Group::new(g.delimiter(), substitute(g.stream(), value));
                ng.set_span(g.span());
                TokenTree::Group(ng)
            }
            other => other,
        };
        after_path = next_after_path;
        out.push(t);
    }
    out.into_iter().collect()
}

/// The comma-separated entries of an attribute's tokens (commas inside groups stay).
fn entries(ts: TokenStream) -> Vec<TokenStream> {
    let mut out = Vec::new();
    let mut cur: Vec<TokenTree> = Vec::new();
    for t in ts {
        if matches!(&t, TokenTree::Punct(p) if p.as_char() == ',') {
            out.push(cur.drain(..).collect());
        } else {
            cur.push(t);
        }
    }
    if !cur.is_empty() {
        out.push(cur.into_iter().collect());
    }
    out
}

fn join(entries: impl Iterator<Item = TokenStream>) -> TokenStream {
    let entries: Vec<TokenStream> = entries.collect();
    quote! { #(#entries),* }
}

/// An entry's key: its first name (`rows(..)` for the derivation key, `rows` for `rows = ..`).
fn key_of(entry: &TokenStream) -> Option<String> {
    let mut it = entry.clone().into_iter();
    let TokenTree::Ident(k) = it.next()? else { return None };
    let derive =
        k == "rows" && matches!(it.next(), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis);
    Some(if derive { "rows(..)".into() } else { k.to_string() })
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream;
    use quote::quote;

    /// The expansion of `#[kernel(attr)] item`, as text.
    fn expand(attr: TokenStream, item: TokenStream) -> String {
        crate::expand::kernel(attr, item).to_string()
    }

    #[test]
    fn every_instance_becomes_a_kernel_and_the_definition_none() {
        let out = expand(
            quote!(grid = [n], instances(two(R = 2), three(R = 3, block = 64))),
            quote!(
                pub fn scale<const R: usize>(x: &mut [f32], n: usize) {
                    let o = group_id(0);
                    x[o] = x[o] * (R as f32);
                }
            ),
        );
        assert!(out.contains("fn two ()") && out.contains("fn three ()"), "{out}");
        assert!(!out.contains("fn scale ()") && !out.contains("compile_error"), "{out}");
    }

    #[test]
    fn misuse_says_what_was_expected() {
        let cases = [
            (
                quote!(grid = [n], instances(a(T = f32))),
                quote!(
                    fn k<T>(x: &mut [f32], n: usize) {}
                ),
                "parameters are constants",
            ),
            (
                quote!(grid = [n], instances(a(F = A), a(F = B))),
                quote!(
                    fn k<const F: Fmt>(x: &mut [f32], n: usize) {}
                ),
                "instance `a` twice",
            ),
            (
                quote!(grid = [n], instances(a(F = A))),
                quote!(
                    fn k<const F: Fmt>(x: &mut [f32], n: usize) {
                        #[when(F)]
                        x[0] = 1.0;
                    }
                ),
                "expected a condition (a bool), found a word",
            ),
            (
                quote!(grid = [n], instances(a(F = A))),
                quote!(
                    fn k<const F: Fmt>(x: &mut [f32], n: usize) {
                        #[when(F == 3)]
                        x[0] = 1.0;
                    }
                ),
                "a word and an integer cannot be compared",
            ),
            (
                quote!(grid = [n], instances(a(B = 1))),
                quote!(
                    fn k<const B: bool>(x: &mut [f32], n: usize) {}
                ),
                "expected `true` or `false`, found `1`",
            ),
            (
                quote!(grid = [n], instances()),
                quote!(
                    fn k<const B: bool>(x: &mut [f32], n: usize) {}
                ),
                "`instances()` names no kernel",
            ),
            (
                quote!(grid = [n], instances(a())),
                quote!(
                    fn k(x: &mut [f32], n: usize) {}
                ),
                "which has no const parameters",
            ),
            (
                quote!(grid = [n]),
                quote!(
                    fn k<const B: bool>(x: &mut [f32], n: usize) {}
                ),
                "generic parameters without `instances(..)`",
            ),
        ];
        for (attr, item, expected) in cases {
            let out = expand(attr, item);
            assert!(out.contains(expected), "expected `{expected}` in:\n{out}");
        }
    }
}
