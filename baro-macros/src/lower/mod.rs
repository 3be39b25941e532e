//! The front end proper: a checked `#[kernel]` function becomes a `baro_dsl::ir::Kernel`
//! value, with a side table mapping IR positions back to the user's tokens.
//!
//! Lowering reads syntax and builds IR; it never reorders arithmetic (operands keep the order
//! they were written in) and never panics on user input: every problem is a spanned error.

mod call;
mod expr;
mod reduce;
mod spans;
mod stmt;

pub use spans::{SpanRange, SpanTable};

use crate::attr::{self, KernelAttr};
use crate::diag::{Diag, Reported, R};
use crate::signature::{self, ParamSyntax};
use baro_dsl::ir::{Const, Expr, Kernel, ParamId, ParamKind, ScalarType, SharedId, Sibling, Var, VerifyShapes};
use proc_macro2::TokenStream;
use std::collections::HashMap;
use syn::{Ident, ItemFn};

/// A successfully lowered kernel and where its parts came from.
pub struct Lowered {
    pub kernel: Kernel,
    pub spans: SpanTable,
}

/// Everything the front end learned from one `#[kernel]`, also when it failed.
pub struct Front {
    pub attr: KernelAttr,
    pub params: Vec<ParamSyntax>,
    /// `None` when errors were recorded in the `Diag`.
    pub lowered: Option<Lowered>,
    /// Statements naming the Rust items the body refers to (`bf16::from_f32`, a `let x: f16`
    /// annotation), emitted in a hidden const so those names resolve like Rust names and
    /// the user's imports of them count as used.
    pub uses: Vec<TokenStream>,
}

/// A typed IR expression.
#[derive(Clone, Debug)]
pub struct Typed {
    pub e: Expr,
    pub ty: ScalarType,
}

#[derive(Clone, Copy, Debug)]
enum Binding {
    Param(ParamId),
    /// A local, with the number of loops around its definition (to spot loop-carried
    /// accumulation).
    Local {
        var: Var,
        depth: u32,
    },
    Shared(SharedId),
    /// The results of a reduction over rows bound to one name, `let ys = sum!(r in 0..R, ..)`:
    /// R locals numbered from `first`, read one at a time as `ys[j]` with j known when the
    /// kernel is written (a literal, or the variable of an unrolled loop).
    Rows {
        first: Var,
        count: u32,
    },
    /// The variable of a loop unrolled by the front end (`for r in 0..8` whose body reads
    /// `ys[r]`): in each copy of the body, this constant.
    Unrolled(Const),
    /// A name whose definition failed: uses of it stay silent instead of cascading.
    Poisoned,
}

pub(crate) struct Lower<'d> {
    k: Kernel,
    diag: &'d mut Diag,
    scopes: Vec<HashMap<String, Binding>>,
    loop_depth: u32,
    /// `check!`s lowered so far: the next one's id.
    checks: u32,
    spans: SpanTable,
    uses: Vec<TokenStream>,
}

/// Runs the whole front end on one kernel's attribute arguments and function.
pub fn lower_kernel(attr_tokens: TokenStream, item: &ItemFn, diag: &mut Diag) -> Front {
    let attr = attr::parse(attr_tokens, diag);
    let (params, rejected) = signature::params(&item.sig, diag);
    let mut lw = Lower {
        k: Kernel::new(item.sig.ident.to_string()),
        diag,
        scopes: vec![HashMap::new()],
        loop_depth: 0,
        checks: 0,
        spans: SpanTable::new(item.sig.ident.span()),
        uses: Vec::new(),
    };
    for p in &params {
        let id = lw.k.add_param(p.name.to_string(), p.kind.clone());
        lw.bind(&p.name, Binding::Param(id));
    }
    for name in &rejected {
        lw.bind(name, Binding::Poisoned);
    }
    lw.header(&attr);
    let body = lw.block(&item.block.stmts, &[]);
    lw.k.body = body;
    let uses = std::mem::take(&mut lw.uses);
    let ok = !lw.diag.has_errors();
    let lowered = ok.then_some(Lowered { kernel: lw.k, spans: lw.spans });
    Front { attr, params, lowered, uses }
}

impl Lower<'_> {
    fn bind(&mut self, name: &Ident, b: Binding) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), b);
        }
    }

    fn lookup(&self, name: &str) -> Option<Binding> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn with_scope<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.scopes.push(HashMap::new());
        let out = f(self);
        self.scopes.pop();
        out
    }

    /// A launch knob's literal (`block = N`, `min_groups = N`): `Some(N)` for 1 ..= `max`,
    /// otherwise a diagnostic at the literal saying what was expected and `None`.
    fn launch_knob(&mut self, lit: &syn::LitInt, key: &str, max: u32, unit: &str) -> Option<u32> {
        match lit.base10_parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Some(n),
            Ok(n) => {
                self.diag.spanned(lit, format!("`{key} = {n}`: expected 1 to {max} {unit}"));
                None
            }
            Err(e) => {
                self.diag.push(e);
                None
            }
        }
    }

    /// Lowers an attribute expression (grid axis, row stride): index-typed, over scalar
    /// parameters and literals only.
    fn header_expr(&mut self, e: &syn::Expr, what: &str) -> R<Expr> {
        let t = self.expr(e, Some(ScalarType::INDEX))?;
        if t.ty != ScalarType::INDEX {
            return Err(self.diag.spanned(e, format!("{what} has type {}: expected usize", t.ty)));
        }
        if t.e.any(&|x| matches!(x, Expr::Load { .. } | Expr::GroupId(_) | Expr::Reduce(_))) {
            return Err(self.diag.spanned(
                e,
                format!(
                    "{what} must be computed from scalar parameters and literals: found a load, group id or reduction"
                ),
            ));
        }
        Ok(t.e)
    }

    /// Grid, sibling declaration and verifier shapes.
    fn header(&mut self, attr: &KernelAttr) {
        if let Some((_, axes)) = &attr.grid {
            for a in axes.iter().take(3) {
                if let Ok(e) = self.header_expr(a, "a grid axis") {
                    self.k.grid.push(e);
                }
            }
        }
        if let Some(b) = &attr.block {
            self.k.block = self.launch_knob(b, "block", baro_dsl::ir::MAX_BLOCK, "threads per workgroup");
        }
        if let Some(g) = &attr.min_groups {
            self.k.min_groups =
                self.launch_knob(g, "min_groups", baro_dsl::ir::MAX_MIN_GROUPS, "workgroups per compute unit");
        }
        if let (Some(of), Some(rows)) = (&attr.rows_of, &attr.rows) {
            let of_name = of.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
            let rows_id = match self.lookup(&rows.to_string()) {
                Some(Binding::Param(p)) if matches!(self.k.param(p).kind, ParamKind::Scalar(t) if t == ScalarType::INDEX) => {
                    Some(p)
                }
                Some(Binding::Poisoned) => None,
                _ => {
                    self.diag.spanned(
                        rows,
                        format!("`rows = {rows}`: expected a `usize` parameter of this kernel holding the row count"),
                    );
                    None
                }
            };
            let mut row_strides = Vec::new();
            for (buf, stride) in &attr.row_strides {
                let id = match self.lookup(&buf.to_string()) {
                    Some(Binding::Param(p)) if matches!(self.k.param(p).kind, ParamKind::Buffer { .. }) => Some(p),
                    Some(Binding::Poisoned) => None,
                    _ => {
                        self.diag.spanned(
                            buf,
                            format!("`row_stride({buf} = ...)`: expected a buffer parameter of this kernel"),
                        );
                        None
                    }
                };
                if let (Some(id), Ok(s)) = (id, self.header_expr(stride, "a row stride")) {
                    row_strides.push((id, s));
                }
            }
            let mut row_steps = Vec::new();
            for (scalar, step) in &attr.row_steps {
                let id = match self.lookup(&scalar.to_string()) {
                    Some(Binding::Param(p)) if matches!(self.k.param(p).kind, ParamKind::Scalar(t) if t.is_int()) => {
                        Some(p)
                    }
                    Some(Binding::Poisoned) => None,
                    _ => {
                        self.diag.spanned(
                            scalar,
                            format!("`row_step({scalar} = ...)`: expected an integer scalar parameter of this kernel"),
                        );
                        None
                    }
                };
                if let (Some(id), Ok(s)) = (id, self.header_expr(step, "a row step")) {
                    row_steps.push((id, s));
                }
            }
            let mut carried = Vec::new();
            for buf in &attr.carried {
                match self.lookup(&buf.to_string()) {
                    Some(Binding::Param(p)) if matches!(self.k.param(p).kind, ParamKind::Buffer { .. }) => {
                        if row_strides.iter().any(|(q, _)| *q == p) {
                            self.diag.spanned(buf, format!("`carry({buf})`: a carried buffer holds one state for every row, expected no `row_stride` for it"));
                        }
                        carried.push(p);
                    }
                    Some(Binding::Poisoned) => {}
                    _ => {
                        self.diag.spanned(buf, format!("`carry({buf})`: expected a buffer parameter of this kernel"));
                    }
                }
            }
            if let Some(rows) = rows_id {
                self.k.sibling = Some(Sibling { of: of_name, rows, row_strides, row_steps, carried });
            }
        }
        let mut shapes = VerifyShapes::default();
        for (param, values) in &attr.verify {
            let id = match self.lookup(&param.to_string()) {
                Some(Binding::Param(p)) if matches!(self.k.param(p).kind, ParamKind::Scalar(t) if t.is_int()) => p,
                Some(Binding::Poisoned) => continue,
                _ => {
                    self.diag.spanned(
                        param,
                        format!("`verify({param} = [...])`: expected an integer scalar parameter of this kernel"),
                    );
                    continue;
                }
            };
            let mut vs = Vec::new();
            for v in values {
                match v.base10_parse::<u64>() {
                    Ok(x) => vs.push(x),
                    Err(e) => self.diag.push(e),
                }
            }
            shapes.values.push((id, vs));
        }
        self.k.verify_shapes = shapes;
    }

    /// Records that the body names the Rust type `ty`.
    fn use_type(&mut self, ty: &syn::Type) {
        self.uses.push(quote::quote!(let _: ::core::option::Option<#ty> = ::core::option::Option::None;));
    }

    fn fail(&mut self, node: &impl quote::ToTokens, msg: impl std::fmt::Display) -> Reported {
        self.diag.spanned(node, msg)
    }
}
