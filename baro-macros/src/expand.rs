//! What `#[kernel]` expands to: the IR builder function (or, on error, a stub with the same
//! signature next to the errors), a check that the parameter types name real types, the
//! typed argument struct (`args.rs`), the sibling-check plumbing, and the expansion of a rows
//! sibling derived with `rows(..)`; a generic kernel (`instances(..)`) goes to `generic.rs`
//! first, which comes back here once per instance.
//!
//! It never panics and never drops an error: everything found is reported together.

use crate::diag::Diag;
use crate::lower::{self, Front};
use crate::{args, derive, emit, sibling, verifier};
use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::ItemFn;

/// The front end plus the verifier's well-formedness check.
pub fn front_end(attr: TokenStream, item: &ItemFn, diag: &mut Diag) -> Front {
    let front = lower::lower_kernel(attr, item, diag);
    if let Some(l) = &front.lowered {
        verifier::wellformed(l, diag);
    }
    front
}

pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    if let Some((rest, key, content)) = crate::generic::split(&attr) {
        return crate::generic::expand(rest, key, content, item);
    }
    let uses = crate::attr::uses(&attr);
    if !uses.is_empty() {
        return crate::helpers::dispatch(&uses, &attr, &item);
    }
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            let err = syn::Error::new(e.span(), format!("#[kernel] applies to a function: {e}")).to_compile_error();
            return quote! { #err #item };
        }
    };
    let mut diag = Diag::default();
    if let Some(at) = crate::generic::stray_when(&item) {
        diag.at(at, "`#[when(..)]` outside a generic kernel: expected `fn name<const P: T, ..>` with `instances(..)` in #[kernel(..)]");
    }
    let front = front_end(attr.clone(), &func, &mut diag);
    let name = &func.sig.ident;
    let vis = &func.vis;
    let attrs = &func.attrs;
    let body = match (&front.lowered, diag.has_errors()) {
        (Some(l), false) => {
            let k = emit::kernel(&l.kernel);
            quote! {
                static KERNEL: ::std::sync::OnceLock<::baro_dsl::ir::Kernel> = ::std::sync::OnceLock::new();
                ::core::clone::Clone::clone(KERNEL.get_or_init(|| #k))
            }
        }
        _ => {
            let msg = format!("kernel `{name}` failed to compile; see the errors above");
            quote! { ::core::unreachable!(#msg) }
        }
    };
    let errors = diag.to_compile_errors();
    // Naming the parameter types (and the Rust items the body names) in real Rust keeps the
    // user's imports (`use half::bf16`) meaningful and checks they resolve.
    let tys = front.params.iter().map(|p| &p.ty);
    let uses = &front.uses;
    let sig_check = quote! {
        const _: ::core::option::Option<fn(#(#tys),*)> = ::core::option::Option::None;
        const _: () = { #(#uses)* };
    };
    // The argument struct needs only the accepted parameters, so a failing kernel keeps it too.
    let args_struct = args::definition(name, vis, &front.params);
    let sibling_def = sibling::definition(name, &attr, &item);
    let sibling_use = front.attr.rows_of.as_ref().map(|p| sibling::invocation(p, &attr, &item));
    let derived = front.attr.derive_rows.as_ref().map(|d| {
        let mut derive_diag = Diag::default();
        match derive::derive(d, &front.attr, &front.params, &func, &mut derive_diag) {
            // After this kernel's own macro, so the sibling check finds it.
            Some((rows_attr, rows_fn)) if !diag.has_errors() => kernel(rows_attr, rows_fn.into_token_stream()),
            _ => {
                // This kernel's errors, or the derivation's: a stub keeps callers compiling.
                let errs = derive_diag.to_compile_errors();
                let stub = d.name.as_ref().map(|n| {
                    let msg = format!("kernel `{n}` (derived from `{name}`) failed to compile; see the errors above");
                    quote! { #vis fn #n() -> ::baro_dsl::ir::Kernel { ::core::unreachable!(#msg) } }
                });
                quote! { #errs #stub }
            }
        }
    });
    quote! {
        #errors
        #(#attrs)*
        #vis fn #name() -> ::baro_dsl::ir::Kernel {
            #body
        }
        #sig_check
        #args_struct
        #sibling_def
        #sibling_use
        #derived
    }
}
