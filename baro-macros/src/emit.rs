//! Turns a built `Kernel` value back into Rust code that constructs the same value with
//! `::baro_dsl` constructors, so the user's crate gets the IR without parsing anything at
//! run time.
//!
//! This is a faithful printer of data: it must never change what it prints.

use baro_dsl::ir::{
    Access, BinOp, Buf, Const, Dot4Kind, Expr, Implements, Kernel, MathFn, Param, ParamKind, Reduce, ScalarType,
    SharedArray, Sibling, Stmt, UnOp, VarDecl, VerifyShapes,
};
use baro_dsl::schedule::{Combine, Schedule};
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

/// Rust code that evaluates to `k`.
pub fn kernel(k: &Kernel) -> TokenStream {
    let name = &k.name;
    let params = k.params.iter().map(param);
    let shared = k.shared.iter().map(shared_array);
    let vars = k.vars.iter().map(var_decl);
    let grid = k.grid.iter().map(expr);
    let body = k.body.iter().map(stmt);
    let sibling = match &k.sibling {
        None => quote!(::core::option::Option::None),
        Some(s) => {
            let s = sibling(s);
            quote!(::core::option::Option::Some(#s))
        }
    };
    let shapes = verify_shapes(&k.verify_shapes);
    // The launch knobs, `Option<u32>` each.
    let knob = |v: Option<u32>| match v {
        None => quote!(::core::option::Option::None),
        Some(n) => quote!(::core::option::Option::Some(#n)),
    };
    let (block, min_groups) = (knob(k.block), knob(k.min_groups));
    quote! {
        ::baro_dsl::ir::Kernel {
            name: ::std::string::String::from(#name),
            params: ::std::vec![#(#params),*],
            shared: ::std::vec![#(#shared),*],
            vars: ::std::vec![#(#vars),*],
            grid: ::std::vec![#(#grid),*],
            block: #block,
            min_groups: #min_groups,
            body: ::std::vec![#(#body),*],
            sibling: #sibling,
            verify_shapes: #shapes,
        }
    }
}

fn ident(s: &str) -> Ident {
    Ident::new(s, Span::call_site())
}

fn scalar(t: ScalarType) -> TokenStream {
    let v = ident(&format!("{t:?}"));
    quote!(::baro_dsl::ir::ScalarType::#v)
}

fn constant(c: &Const) -> TokenStream {
    let ty = scalar(c.ty);
    let bits = c.bits;
    quote!(::baro_dsl::ir::Const { ty: #ty, bits: #bits })
}

fn param(p: &Param) -> TokenStream {
    let name = &p.name;
    let kind = match &p.kind {
        ParamKind::Buffer { elem, access } => {
            let elem = scalar(*elem);
            let access = match access {
                Access::Read => quote!(::baro_dsl::ir::Access::Read),
                Access::ReadWrite => quote!(::baro_dsl::ir::Access::ReadWrite),
            };
            quote!(::baro_dsl::ir::ParamKind::Buffer { elem: #elem, access: #access })
        }
        ParamKind::Scalar(t) => {
            let t = scalar(*t);
            quote!(::baro_dsl::ir::ParamKind::Scalar(#t))
        }
    };
    quote!(::baro_dsl::ir::Param { name: ::std::string::String::from(#name), kind: #kind })
}

fn shared_array(s: &SharedArray) -> TokenStream {
    let (name, elem, len) = (&s.name, scalar(s.elem), s.len);
    quote!(::baro_dsl::ir::SharedArray { name: ::std::string::String::from(#name), elem: #elem, len: #len })
}

fn var_decl(v: &VarDecl) -> TokenStream {
    let (name, ty, mutable) = (&v.name, scalar(v.ty), v.mutable);
    quote!(::baro_dsl::ir::VarDecl { name: ::std::string::String::from(#name), ty: #ty, mutable: #mutable })
}

fn var(v: baro_dsl::ir::Var) -> TokenStream {
    let i = v.0;
    quote!(::baro_dsl::ir::Var(#i))
}

fn param_id(p: baro_dsl::ir::ParamId) -> TokenStream {
    let i = p.0;
    quote!(::baro_dsl::ir::ParamId(#i))
}

fn sibling(s: &Sibling) -> TokenStream {
    let of = &s.of;
    let rows = param_id(s.rows);
    let strides = s.row_strides.iter().map(|(p, e)| {
        let p = param_id(*p);
        let e = expr(e);
        quote!((#p, #e))
    });
    let steps = s.row_steps.iter().map(|(p, e)| {
        let p = param_id(*p);
        let e = expr(e);
        quote!((#p, #e))
    });
    let carried = s.carried.iter().map(|p| param_id(*p));
    quote!(::baro_dsl::ir::Sibling {
        of: ::std::string::String::from(#of),
        rows: #rows,
        row_strides: ::std::vec![#(#strides),*],
        row_steps: ::std::vec![#(#steps),*],
        carried: ::std::vec![#(#carried),*],
    })
}

fn verify_shapes(v: &VerifyShapes) -> TokenStream {
    let values = v.values.iter().map(|(p, vs)| {
        let p = param_id(*p);
        quote!((#p, ::std::vec![#(#vs),*]))
    });
    quote!(::baro_dsl::ir::VerifyShapes { values: ::std::vec![#(#values),*] })
}

fn buf(b: Buf) -> TokenStream {
    match b {
        Buf::Param(p) => {
            let p = param_id(p);
            quote!(::baro_dsl::ir::Buf::Param(#p))
        }
        Buf::Shared(s) => {
            let i = s.0;
            quote!(::baro_dsl::ir::Buf::Shared(::baro_dsl::ir::SharedId(#i)))
        }
    }
}

fn block(stmts: &[Stmt]) -> TokenStream {
    let s = stmts.iter().map(stmt);
    quote!(::std::vec![#(#s),*])
}

fn stmt(s: &Stmt) -> TokenStream {
    match s {
        Stmt::Let { var: v, value } => {
            let (v, value) = (var(*v), expr(value));
            quote!(::baro_dsl::ir::Stmt::Let { var: #v, value: #value })
        }
        Stmt::Assign { var: v, value } => {
            let (v, value) = (var(*v), expr(value));
            quote!(::baro_dsl::ir::Stmt::Assign { var: #v, value: #value })
        }
        Stmt::LetRows { vars, row, value } => {
            let (vars, row, value) = (vars.iter().map(|v| var(*v)), var(*row), expr(value));
            quote!(::baro_dsl::ir::Stmt::LetRows { vars: ::std::vec![#(#vars),*], row: #row, value: #value })
        }
        Stmt::Store { buf: b, index, value } => {
            let (b, index, value) = (buf(*b), expr(index), expr(value));
            quote!(::baro_dsl::ir::Stmt::Store { buf: #b, index: #index, value: #value })
        }
        Stmt::For { var: v, start, end, step, body } => {
            let (v, start, end, step, body) = (var(*v), expr(start), expr(end), expr(step), block(body));
            quote!(::baro_dsl::ir::Stmt::For { var: #v, start: #start, end: #end, step: #step, body: #body })
        }
        Stmt::If { cond, then_body, else_body } => {
            let (cond, then_body, else_body) = (expr(cond), block(then_body), block(else_body));
            quote!(::baro_dsl::ir::Stmt::If { cond: #cond, then_body: #then_body, else_body: #else_body })
        }
        Stmt::ParFor { var: v, end, team, body } => {
            let (v, end, body) = (var(*v), expr(end), block(body));
            let team = match team {
                None => quote!(::core::option::Option::None),
                Some(t) => quote!(::core::option::Option::Some(#t)),
            };
            quote!(::baro_dsl::ir::Stmt::ParFor { var: #v, end: #end, team: #team, body: #body })
        }
        Stmt::Lanes { lane, count, implements, body } => {
            let (lane, body) = (var(*lane), block(body));
            let implements = match implements {
                None => quote!(::core::option::Option::None),
                Some(Implements { results, row, reduce: r }) => {
                    let (results, r) = (results.iter().map(|v| var(*v)), reduce(r));
                    let row = match row {
                        None => quote!(::core::option::Option::None),
                        Some(v) => {
                            let v = var(*v);
                            quote!(::core::option::Option::Some(#v))
                        }
                    };
                    quote!(::core::option::Option::Some(::baro_dsl::ir::Implements {
                        results: ::std::vec![#(#results),*], row: #row, reduce: ::std::boxed::Box::new(#r)
                    }))
                }
            };
            quote!(::baro_dsl::ir::Stmt::Lanes { lane: #lane, count: #count, implements: #implements, body: #body })
        }
        Stmt::Barrier => quote!(::baro_dsl::ir::Stmt::Barrier),
        Stmt::Check { id, cond } => {
            let cond = expr(cond);
            quote!(::baro_dsl::ir::Stmt::Check { id: #id, cond: #cond })
        }
        Stmt::MmaI8(m) => {
            let tile = |t: &baro_dsl::ir::Tile| {
                let (array, offset, stride) = (t.array.0, expr(&t.offset), expr(&t.stride));
                quote!(::baro_dsl::ir::Tile {
                    array: ::baro_dsl::ir::SharedId(#array), offset: #offset, stride: #stride
                })
            };
            let (c, a, b, steps) = (tile(&m.c), tile(&m.a), tile(&m.b), expr(&m.steps));
            quote!(::baro_dsl::ir::Stmt::MmaI8(::std::boxed::Box::new(::baro_dsl::ir::MmaI8 {
                c: #c, a: #a, b: #b, steps: #steps
            })))
        }
    }
}

fn boxed(e: &Expr) -> TokenStream {
    let e = expr(e);
    quote!(::std::boxed::Box::new(#e))
}

fn expr(e: &Expr) -> TokenStream {
    match e {
        Expr::Const(c) => {
            let c = constant(c);
            quote!(::baro_dsl::ir::Expr::Const(#c))
        }
        Expr::Var(v) => {
            let v = var(*v);
            quote!(::baro_dsl::ir::Expr::Var(#v))
        }
        Expr::Param(p) => {
            let p = param_id(*p);
            quote!(::baro_dsl::ir::Expr::Param(#p))
        }
        Expr::GroupId(a) => quote!(::baro_dsl::ir::Expr::GroupId(#a)),
        Expr::Load { buf: b, index } => {
            let (b, index) = (buf(*b), boxed(index));
            quote!(::baro_dsl::ir::Expr::Load { buf: #b, index: #index })
        }
        Expr::Unary { op, arg } => {
            let (op, arg) = (un_op(*op), boxed(arg));
            quote!(::baro_dsl::ir::Expr::Unary { op: #op, arg: #arg })
        }
        Expr::Binary { op, lhs, rhs } => {
            let (op, lhs, rhs) = (bin_op(*op), boxed(lhs), boxed(rhs));
            quote!(::baro_dsl::ir::Expr::Binary { op: #op, lhs: #lhs, rhs: #rhs })
        }
        Expr::Select { cond, then, els } => {
            let (cond, then, els) = (boxed(cond), boxed(then), boxed(els));
            quote!(::baro_dsl::ir::Expr::Select { cond: #cond, then: #then, els: #els })
        }
        Expr::Cast { to, arg } => {
            let (to, arg) = (scalar(*to), boxed(arg));
            quote!(::baro_dsl::ir::Expr::Cast { to: #to, arg: #arg })
        }
        Expr::Bitcast { to, arg } => {
            let (to, arg) = (scalar(*to), boxed(arg));
            quote!(::baro_dsl::ir::Expr::Bitcast { to: #to, arg: #arg })
        }
        Expr::Call { func, arg } => {
            let (func, arg) = (math_fn(*func), boxed(arg));
            quote!(::baro_dsl::ir::Expr::Call { func: #func, arg: #arg })
        }
        Expr::Fma { a, b, c } => {
            let (a, b, c) = (boxed(a), boxed(b), boxed(c));
            quote!(::baro_dsl::ir::Expr::Fma { a: #a, b: #b, c: #c })
        }
        Expr::Dot4 { kind, a, b, c } => {
            let (a, b, c) = (boxed(a), boxed(b), boxed(c));
            let kind = match kind {
                Dot4Kind::I8I8 => quote!(::baro_dsl::ir::Dot4Kind::I8I8),
                Dot4Kind::U8I8 => quote!(::baro_dsl::ir::Dot4Kind::U8I8),
            };
            quote!(::baro_dsl::ir::Expr::Dot4 { kind: #kind, a: #a, b: #b, c: #c })
        }
        Expr::Let { var: v, value, body } => {
            let (v, value, body) = (var(*v), boxed(value), boxed(body));
            quote!(::baro_dsl::ir::Expr::Let { var: #v, value: #value, body: #body })
        }
        Expr::Reduce(r) => {
            let r = reduce(r);
            quote!(::baro_dsl::ir::Expr::Reduce(::std::boxed::Box::new(#r)))
        }
        Expr::ShuffleXor { value, mask } => {
            let value = boxed(value);
            quote!(::baro_dsl::ir::Expr::ShuffleXor { value: #value, mask: #mask })
        }
    }
}

fn reduce(r: &Reduce) -> TokenStream {
    let op = ident(&format!("{:?}", r.op));
    let (ty, schedule, v, len, body) = (scalar(r.ty), schedule(&r.schedule), var(r.var), expr(&r.len), expr(&r.body));
    quote!(::baro_dsl::ir::Reduce { op: ::baro_dsl::ir::ReduceOp::#op, ty: #ty, schedule: #schedule, var: #v, len: #len, body: #body })
}

fn combine(c: Combine) -> TokenStream {
    let c = ident(&format!("{c:?}"));
    quote!(::baro_dsl::schedule::Combine::#c)
}

fn schedule(s: &Schedule) -> TokenStream {
    match s {
        Schedule::Sequential => quote!(::baro_dsl::schedule::Schedule::Sequential),
        Schedule::Any => quote!(::baro_dsl::schedule::Schedule::Any),
        Schedule::Lanes { count, combine: c } => {
            let c = combine(*c);
            quote!(::baro_dsl::schedule::Schedule::Lanes { count: #count, combine: #c })
        }
        Schedule::Chunked { size, combine: c } => {
            let c = combine(*c);
            quote!(::baro_dsl::schedule::Schedule::Chunked { size: #size, combine: #c })
        }
        Schedule::Blocked { block, across } => {
            let across = schedule(across);
            quote!(::baro_dsl::schedule::Schedule::Blocked { block: #block, across: ::std::boxed::Box::new(#across) })
        }
    }
}

fn un_op(op: UnOp) -> TokenStream {
    let v = ident(&format!("{op:?}"));
    quote!(::baro_dsl::ir::UnOp::#v)
}

fn bin_op(op: BinOp) -> TokenStream {
    let v = ident(&format!("{op:?}"));
    quote!(::baro_dsl::ir::BinOp::#v)
}

fn math_fn(f: MathFn) -> TokenStream {
    let v = ident(&format!("{f:?}"));
    quote!(::baro_dsl::ir::MathFn::#v)
}
