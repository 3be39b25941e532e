//! The kernel's Rust signature: which parameters are buffers and which are scalars, and the
//! scalar types the front end accepts by name.
//!
//! It reads types only; it never resolves names in the body.

use crate::diag::Diag;
use baro_dsl::ir::{Access, ParamKind, ScalarType};
use syn::{FnArg, Ident, Pat, Signature, Type};

pub const ACCEPTED_TYPES: &str = "f32, f16, bf16, i8, u8, i32, u32, i64, u64, usize, bool";

/// One accepted parameter, with the type tokens the user wrote (kept for the signature
/// check the expansion emits).
pub struct ParamSyntax {
    pub name: Ident,
    pub kind: ParamKind,
    pub ty: Type,
}

/// The scalar type a Rust type names: a primitive, or `f16`/`bf16` (also as `half::f16`).
pub fn scalar_type(ty: &Type) -> Option<ScalarType> {
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
            if segs.iter().any(|s| !s.arguments.is_empty()) {
                return None;
            }
            let last = segs.last()?.ident.to_string();
            let half_type = last == "f16" || last == "bf16";
            match segs.len() {
                1 if p.path.leading_colon.is_none() => ScalarType::from_name(&last),
                2 if half_type && segs[0].ident == "half" => ScalarType::from_name(&last),
                _ => None,
            }
        }
        Type::Group(g) => scalar_type(&g.elem),
        Type::Paren(p) => scalar_type(&p.elem),
        _ => None,
    }
}

fn param_kind(ty: &Type) -> Option<ParamKind> {
    match ty {
        Type::Reference(r) => {
            let Type::Slice(s) = &*r.elem else { return None };
            let elem = scalar_type(&s.elem)?;
            let access = if r.mutability.is_some() { Access::ReadWrite } else { Access::Read };
            Some(ParamKind::Buffer { elem, access })
        }
        Type::Group(g) => param_kind(&g.elem),
        other => scalar_type(other).map(ParamKind::Scalar),
    }
}

/// Checks the signature's shape and returns the accepted parameters and the names of the
/// rejected ones (so uses of them in the body do not cascade into more errors).
pub fn params(sig: &Signature, diag: &mut Diag) -> (Vec<ParamSyntax>, Vec<Ident>) {
    if let Some(c) = &sig.constness {
        diag.spanned(c, "unsupported Rust construct: a kernel is not a `const fn`");
    }
    if let Some(a) = &sig.asyncness {
        diag.spanned(a, "unsupported Rust construct: a kernel is not an `async fn`");
    }
    if let Some(u) = &sig.unsafety {
        diag.spanned(
            u,
            "unsupported Rust construct: a kernel is not an `unsafe fn`; buffer accesses are checked by the verifier",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        diag.spanned(
            &sig.generics,
            "generic parameters without `instances(..)`: expected `#[kernel(.., instances(name(P = value, ..), ..))]` naming the kernels made of this definition",
        );
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        diag.spanned(
            ty,
            "unsupported Rust construct: kernels return nothing; write results into a `&mut [T]` parameter",
        );
    }
    if let Some(v) = &sig.variadic {
        diag.spanned(v, "unsupported Rust construct: kernels are not variadic");
    }
    let mut out: Vec<ParamSyntax> = Vec::new();
    let mut rejected = Vec::new();
    for arg in &sig.inputs {
        let pt = match arg {
            FnArg::Receiver(r) => {
                diag.spanned(r, "unsupported Rust construct: a kernel is a free function, not a method taking `self`");
                continue;
            }
            FnArg::Typed(pt) => pt,
        };
        let name = match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.mutability.is_none() && pi.subpat.is_none() => pi.ident.clone(),
            other => {
                diag.spanned(other, "unsupported Rust construct: expected a plain parameter name (parameters are read-only; copy one into a `let mut` to change it)");
                continue;
            }
        };
        if out.iter().any(|p| p.name == name) {
            diag.spanned(&name, format!("parameter `{name}` is declared twice: expected distinct names"));
            continue;
        }
        match param_kind(&pt.ty) {
            Some(kind) => out.push(ParamSyntax { name, kind, ty: (*pt.ty).clone() }),
            None => {
                let found = crate::diag::show(&pt.ty);
                rejected.push(name);
                diag.spanned(
                    &pt.ty,
                    format!("wrong argument type: expected `&[T]`, `&mut [T]` or `T` with T one of {ACCEPTED_TYPES}, found `{found}`"),
                );
            }
        }
    }
    (out, rejected)
}
