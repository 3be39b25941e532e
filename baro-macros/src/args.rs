//! The typed launch arguments `#[kernel]` writes beside each kernel `foo_bar`: a struct
//! `FooBarArgs<'a>` with one public field per parameter, named as the parameter, in
//! declaration order, and its `baro_dsl::runtime::KernelArgs` conversion to the positional
//! list. `&[T]` is `&'a dyn ReadArg`, `&mut [T]` is `&'a mut Buffer`, a scalar its own Rust
//! type (the tokens the user wrote), so a wrong kind is a type error where the struct is
//! built. The struct sits inside `baro_dsl::__with_runtime!`: without baro-dsl's runtime
//! (feature `llvm`) nothing is emitted.
//!
//! It reads the accepted parameters only; it never looks at the body.

use crate::signature::ParamSyntax;
use baro_dsl::ir::{Access, ParamKind};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Ident, Visibility};

/// `foo_bar` → `FooBarArgs`.
pub fn struct_name(kernel: &Ident) -> Ident {
    let camel: String = kernel
        .to_string()
        .split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(chars).collect::<String>()
        })
        .collect();
    format_ident!("{}Args", camel, span = kernel.span())
}

/// The struct and its `KernelArgs` implementation for kernel `name` with `params`.
pub fn definition(name: &Ident, vis: &Visibility, params: &[ParamSyntax]) -> TokenStream {
    let rt = quote!(::baro_dsl::runtime);
    let ident = struct_name(name);
    let buffers = params.iter().any(|p| matches!(p.kind, ParamKind::Buffer { .. }));
    let lifetime = buffers.then(|| quote!(<'a>));
    let fields = params.iter().map(|p| {
        let (field, ty) = (&p.name, &p.ty);
        let doc = format!("`{}: {}`", field, crate::diag::show(ty));
        let field_ty = match p.kind {
            ParamKind::Buffer { access: Access::Read, .. } => quote!(&'a dyn #rt::ReadArg),
            ParamKind::Buffer { access: Access::ReadWrite, .. } => quote!(&'a mut #rt::Buffer),
            ParamKind::Scalar(_) => quote!(#ty),
        };
        quote! { #[doc = #doc] pub #field: #field_ty }
    });
    let args = params.iter().map(|p| {
        let field = &p.name;
        match p.kind {
            ParamKind::Buffer { access: Access::Read, .. } => quote!(#rt::ReadArg::arg(self.#field)),
            ParamKind::Buffer { access: Access::ReadWrite, .. } => quote!(#rt::DeviceArg::BufMut(self.#field)),
            ParamKind::Scalar(_) => quote!(#rt::DeviceArg::from(self.#field)),
        }
    });
    let names = params.iter().map(|p| p.name.to_string());
    let kernel = name.to_string();
    let doc = format!(
        "The launch arguments of kernel `{kernel}`, by parameter name (`baro_dsl::runtime::KernelArgs`: \
         the fields in declaration order)."
    );
    quote! {
        ::baro_dsl::__with_runtime! {
            #[doc = #doc]
            #[allow(dead_code)]
            #vis struct #ident #lifetime {
                #(#fields,)*
            }
            impl<'a> #rt::KernelArgs<'a> for #ident #lifetime {
                const KERNEL: &'static str = #kernel;
                const PARAMS: &'static [&'static str] = &[#(#names),*];
                fn into_args(self) -> ::std::vec::Vec<#rt::DeviceArg<'a>> {
                    ::std::vec![#(#args),*]
                }
            }
        }
    }
}
