//! Helper functions inside kernels: `#[kernel_helper]` on a function whose body is a value
//! block (`let`s, then the value), and `uses = [name, ..]` on a `#[kernel]` that calls it.
//!
//! A proc macro sees only its own item, so the helper's tokens travel to the kernel the way a
//! rows kernel's reach its m=1 sibling: every helper leaves a hidden `macro_rules!` holding its
//! function. A kernel with `uses = [a, b]` expands to `__baro_helper_a!{ [__baro_helper_b] []
//! (attr) item }`; each helper macro appends its function and calls the next, the last calls
//! `__kernel_with_helpers!{ [{fn a ..} {fn b ..}] (attr) item }`, which inlines every call of a
//! helper and expands the kernel as if it had been written out. So the verifier, the sibling
//! proof and every lowering see plain kernel code, and a rows kernel using the same helper is
//! proven against its m=1 kernel as before.
//!
//! A call `h(e1, e2)` becomes the block `{ let p1 = e1; let p2 = e2; <h's lets>; <h's value> }`
//! with every local renamed apart (`__baro_h_<n>_<name>`); a buffer parameter (`&[T]`) is
//! replaced by the buffer the call names. Helpers may call helpers listed before them. The
//! helper stays an ordinary Rust function too, so host references can call the same code.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, ToTokens};
use std::collections::HashMap;
use syn::visit_mut::VisitMut;
use syn::{FnArg, Ident, ItemFn, Pat, Type};

pub fn macro_name(helper: &Ident) -> Ident {
    format_ident!("__baro_helper_{}", helper, span = helper.span())
}

/// `#[kernel_helper]`: the function itself, plus the hidden macro that hands its tokens on.
pub fn definition(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let err = syn::Error::new_spanned(&attr, "#[kernel_helper] takes no arguments").to_compile_error();
        return quote! { #err #item };
    }
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            let err =
                syn::Error::new(e.span(), format!("#[kernel_helper] applies to a function: {e}")).to_compile_error();
            return quote! { #err #item };
        }
    };
    if let Err(e) = Helper::new(&func) {
        let err = e.to_compile_error();
        return quote! { #err #item };
    }
    let mac = macro_name(&func.sig.ident);
    quote! {
        #[allow(dead_code)]
        #item
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #mac {
            ([] [$($acc:tt)*] $($rest:tt)*) => { ::baro_macros::__kernel_with_helpers!{ [$($acc)* { #item }] $($rest)* } };
            ([$next:ident $(, $more:ident)*] [$($acc:tt)*] $($rest:tt)*) => { $next!{ [$($more),*] [$($acc)* { #item }] $($rest)* } };
        }
        #[allow(unused_imports)]
        pub(crate) use #mac;
    }
}

/// What a kernel with `uses = [..]` expands to: the first helper's macro, carrying the rest.
pub fn dispatch(uses: &[Ident], attr: &TokenStream, item: &TokenStream) -> TokenStream {
    let attr = without_uses(attr.clone());
    let first = macro_name(&uses[0]);
    let rest = uses[1..].iter().map(macro_name);
    quote! { #first!{ [#(#rest),*] [] (#attr) #item } }
}

/// The attribute tokens with the `uses = [..]` key removed.
fn without_uses(attr: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = attr.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let is_uses = matches!(&tokens[i], TokenTree::Ident(id) if id == "uses")
            && matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '=')
            && matches!(tokens.get(i + 2), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket);
        if is_uses {
            i += 3;
            if matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
                i += 1;
            }
            continue;
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out.into_iter().collect()
}

/// `__kernel_with_helpers!{ [{fn ..} ..] (attr) item }`: the kernel with its helper calls
/// inlined, expanded by `#[kernel]`'s own expansion.
pub fn with_helpers(input: TokenStream) -> TokenStream {
    let mut it = input.into_iter();
    let (Some(TokenTree::Group(helpers)), Some(TokenTree::Group(attr))) = (it.next(), it.next()) else {
        return syn::Error::new(
            Span::call_site(),
            "__kernel_with_helpers: expected `[helpers] (attr) item` (not for direct use)",
        )
        .to_compile_error();
    };
    let item: TokenStream = it.collect();
    let mut table = HashMap::new();
    for t in helpers.stream() {
        let TokenTree::Group(g) = t else { continue };
        match syn::parse2::<ItemFn>(g.stream())
            .map_err(|e| e.to_compile_error())
            .and_then(|f| Helper::new(&f).map_err(|e| e.to_compile_error()))
        {
            Ok(h) => {
                table.insert(h.name.to_string(), h);
            }
            Err(e) => return quote! { #e },
        }
    }
    let mut func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    let mut inliner = Inliner { helpers: &table, counter: 0, errors: Vec::new(), depth: 0 };
    inliner.visit_block_mut(&mut func.block);
    if !inliner.errors.is_empty() {
        let errs = inliner.errors.iter().map(syn::Error::to_compile_error);
        return quote! { #(#errs)* #item };
    }
    crate::expand::kernel(attr.stream(), func.into_token_stream())
}

enum Param {
    Scalar(Ident),
    Buffer(Ident),
}

struct Helper {
    name: Ident,
    params: Vec<Param>,
    body: syn::Block,
}

impl Helper {
    fn new(f: &ItemFn) -> syn::Result<Helper> {
        let mut params = Vec::new();
        for a in &f.sig.inputs {
            let FnArg::Typed(pt) = a else { return Err(syn::Error::new_spanned(a, "a kernel helper takes no `self`")) };
            let Pat::Ident(pi) = &*pt.pat else {
                return Err(syn::Error::new_spanned(&pt.pat, "a kernel helper's parameter: expected a plain name"));
            };
            let buffer =
                matches!(&*pt.ty, Type::Reference(r) if matches!(&*r.elem, Type::Slice(_)) && r.mutability.is_none());
            if matches!(&*pt.ty, Type::Reference(r) if r.mutability.is_some()) {
                return Err(syn::Error::new_spanned(
                    &pt.ty,
                    "a kernel helper computes a value: expected `&[T]` or a scalar, found a `&mut` parameter",
                ));
            }
            params.push(if buffer { Param::Buffer(pi.ident.clone()) } else { Param::Scalar(pi.ident.clone()) });
        }
        if matches!(f.sig.output, syn::ReturnType::Default) {
            return Err(syn::Error::new_spanned(&f.sig, "a kernel helper returns a value: expected `-> T`"));
        }
        let ok = match f.block.stmts.split_last() {
            Some((syn::Stmt::Expr(_, None), lets)) => lets.iter().all(|s| matches!(s, syn::Stmt::Local(_))),
            _ => false,
        };
        if !ok {
            return Err(syn::Error::new_spanned(
                &f.block,
                "a kernel helper's body: expected `let` statements followed by the value without a `;`",
            ));
        }
        Ok(Helper { name: f.sig.ident.clone(), params, body: (*f.block).clone() })
    }
}

struct Inliner<'h> {
    helpers: &'h HashMap<String, Helper>,
    counter: usize,
    errors: Vec<syn::Error>,
    depth: usize,
}

impl VisitMut for Inliner<'_> {
    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        if ["sum", "max", "min"].iter().any(|r| m.path.is_ident(r)) {
            self.reduction_body(m);
        }
    }

    fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        let syn::Expr::Call(call) = e else { return };
        let syn::Expr::Path(p) = &*call.func else { return };
        let Some(name) = p.path.get_ident() else { return };
        let Some(h) = self.helpers.get(&name.to_string()) else { return };
        if call.args.len() != h.params.len() {
            self.errors.push(syn::Error::new_spanned(
                &*call,
                format!("`{name}` takes {} arguments, found {}", h.params.len(), call.args.len()),
            ));
            return;
        }
        self.counter += 1;
        let n = self.counter;
        let mut renames = HashMap::new();
        let mut lets: Vec<syn::Stmt> = Vec::new();
        for (param, arg) in h.params.iter().zip(call.args.iter()) {
            match param {
                Param::Scalar(id) => {
                    let local = format_ident!("__baro_{}_{}_{}", name, n, id, span = id.span());
                    lets.push(syn::parse_quote! { let #local = #arg; });
                    renames.insert(id.to_string(), local);
                }
                Param::Buffer(id) => match arg {
                    syn::Expr::Path(ap) if ap.path.get_ident().is_some() => {
                        renames.insert(id.to_string(), ap.path.get_ident().unwrap().clone());
                    }
                    _ => {
                        self.errors.push(syn::Error::new_spanned(
                            arg,
                            format!("`{name}`'s parameter `{id}` is a buffer: expected a buffer's name here"),
                        ));
                        return;
                    }
                },
            }
        }
        let mut body = h.body.clone();
        for s in &body.stmts {
            if let syn::Stmt::Local(l) = s {
                let pat = match &l.pat {
                    Pat::Type(pt) => &*pt.pat,
                    p => p,
                };
                if let Pat::Ident(pi) = pat {
                    renames.insert(
                        pi.ident.to_string(),
                        format_ident!("__baro_{}_{}_{}", name, n, pi.ident, span = pi.ident.span()),
                    );
                }
            }
        }
        Renamer { renames: &renames }.visit_block_mut(&mut body);
        if self.depth < 16 {
            self.depth += 1;
            self.visit_block_mut(&mut body);
            self.depth -= 1;
        }
        lets.extend(body.stmts);
        body.stmts = lets;
        *e = syn::Expr::Block(syn::ExprBlock { attrs: Vec::new(), label: None, block: body });
    }
}

impl Inliner<'_> {
    /// A reduction macro's last argument is its body: inline the calls there too.
    fn reduction_body(&mut self, m: &mut syn::Macro) {
        let tokens: Vec<TokenTree> = m.tokens.clone().into_iter().collect();
        let Some(cut) = tokens.iter().rposition(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) else {
            return;
        };
        let body: TokenStream = tokens[cut + 1..].iter().cloned().collect();
        let Ok(mut e) = syn::parse2::<syn::Expr>(body) else { return };
        self.visit_expr_mut(&mut e);
        let head: TokenStream = tokens[..=cut].iter().cloned().collect();
        m.tokens = quote! { #head #e };
    }
}

/// Renames a helper body's parameters and locals (paths and `let` patterns; method names and
/// path segments after `::` are left alone).
struct Renamer<'r> {
    renames: &'r HashMap<String, Ident>,
}

impl VisitMut for Renamer<'_> {
    fn visit_expr_path_mut(&mut self, p: &mut syn::ExprPath) {
        if let Some(id) = p.path.get_ident() {
            if let Some(new) = self.renames.get(&id.to_string()) {
                p.path = new.clone().into();
            }
        }
    }
    fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
        if let Some(new) = self.renames.get(&p.ident.to_string()) {
            p.ident = new.clone();
        }
    }
    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        // A reduction's body is tokens: rename identifiers there too.
        m.tokens = rename_tokens(m.tokens.clone(), self.renames);
    }
}

fn rename_tokens(ts: TokenStream, renames: &HashMap<String, Ident>) -> TokenStream {
    let mut out = Vec::new();
    let mut prev_dot = false;
    for t in ts {
        let t = match t {
            TokenTree::Ident(id) if !prev_dot => match renames.get(&id.to_string()) {
                Some(new) => TokenTree::Ident(new.clone()),
                None => TokenTree::Ident(id),
            },
            TokenTree::Group(g) => {
                let mut ng = proc_macro2::Group::new(g.delimiter(), rename_tokens(g.stream(), renames));
                ng.set_span(g.span());
                TokenTree::Group(ng)
            }
            other => other,
        };
        prev_dot = matches!(&t, TokenTree::Punct(p) if p.as_char() == '.');
        out.push(t);
    }
    out.into_iter().collect()
}
