//! Statements: `let`, assignments and stores, `for` (sequential, stepped, `par`), `if`,
//! `barrier()` and shared arrays; plus the check for undeclared float accumulation.
//!
//! One loop is not a loop in the IR: `for r in a..b` over integer literals whose body reads
//! the results of a reduction over rows by its variable (`ys[r]`) is unrolled here, one copy
//! of the body per value with `r` a `usize` constant, its statements joining the enclosing
//! block as a bare block's do. The copies are straight-line code, as if written out, so the
//! accumulation check sees no loop around them.
//!
//! Every IR statement pushed here is recorded in the span table under its statement path.

use super::reduce::{is_rows_reduce, RowNames};
use super::spans::SpanRange;
use super::{Binding, Lower, Typed};
use crate::diag::{show, R};
use crate::signature::scalar_type;
use baro_dsl::ir::{Access, BinOp, Buf, Const, Expr, MmaI8, ParamKind, ScalarType, Stmt, Tile, Var};

impl Lower<'_> {
    /// Lowers a block in its own scope; `prefix` is the path of the enclosing statement.
    pub(super) fn block(&mut self, stmts: &[syn::Stmt], prefix: &[u32]) -> Vec<Stmt> {
        self.block_at(stmts, prefix, 0)
    }

    /// As `block`, numbering the statements from `offset` (an `else` block continues the
    /// numbering of its `then` block).
    fn block_at(&mut self, stmts: &[syn::Stmt], prefix: &[u32], offset: u32) -> Vec<Stmt> {
        self.with_scope(|lw| {
            let mut out = Vec::new();
            for s in stmts {
                lw.stmt(s, prefix, offset, &mut out);
            }
            out
        })
    }

    fn stmt(&mut self, s: &syn::Stmt, prefix: &[u32], offset: u32, out: &mut Vec<Stmt>) {
        let mut path = prefix.to_vec();
        path.push(offset + out.len() as u32);
        let lowered = match s {
            syn::Stmt::Local(local) => self.local(local),
            syn::Stmt::Expr(syn::Expr::Block(b), _) if b.label.is_none() && b.attrs.is_empty() => {
                // A bare block: its statements join this one, in a scope of their own.
                self.with_scope(|lw| {
                    for inner in &b.block.stmts {
                        lw.stmt(inner, prefix, offset, out);
                    }
                });
                return;
            }
            syn::Stmt::Expr(syn::Expr::ForLoop(f), _) if self.unrolls(f).is_some() => {
                // Copies of the body join this block, one per value of the loop variable.
                let Some((var, start, end)) = self.unrolls(f) else { return };
                for j in start..end {
                    let before = self.diag.count();
                    self.with_scope(|lw| {
                        lw.bind(var, Binding::Unrolled(Const::new(ScalarType::INDEX, j)));
                        for inner in &f.body.stmts {
                            lw.stmt(inner, prefix, offset, out);
                        }
                    });
                    if self.diag.count() > before {
                        break; // one copy's errors, not one per row
                    }
                }
                return;
            }
            syn::Stmt::Expr(e, _) => self.expr_stmt(e, &path),
            syn::Stmt::Macro(m) if m.mac.path.is_ident("check") => self.check(&m.mac).map(Some),
            syn::Stmt::Macro(m) => Err(self.fail(
                m,
                format!("a `{}!` whose value is dropped: expected it on the right of an assignment or store", show(&m.mac.path)),
            )),
            syn::Stmt::Item(item) => Err(self.fail(item, "unsupported Rust construct: items inside a kernel (fn, struct, use, const) are not part of the kernel language; define them outside the kernel")),
        };
        if let Ok(Some(st)) = lowered {
            self.spans.stmts.push((path, SpanRange::of(s)));
            out.push(st);
        }
    }

    /// `let [mut] x [: T] = e;` or `let tile = shared::<T, N>();`.
    pub(super) fn local(&mut self, local: &syn::Local) -> R<Option<Stmt>> {
        let (pat, annotated) = match &local.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        if let (syn::Pat::Slice(slice), None) = (pat, annotated) {
            return self.let_rows(local, slice).map(Some);
        }
        if let (syn::Pat::Ident(pi), None, Some(init)) = (pat, annotated, &local.init) {
            if let (syn::Expr::Macro(m), None) = (strip(&init.expr), &init.diverge) {
                if is_rows_reduce(&m.mac) {
                    return self.let_rows_named(pi, &m.mac).map(Some);
                }
            }
        }
        let (name, mutable) = match pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.clone(), pi.mutability.is_some()),
            other => return Err(self.fail(other, "unsupported Rust construct: patterns in `let` are not part of the kernel language; expected `let x = ...` or `let mut x = ...`")),
        };
        let Some(init) = &local.init else {
            self.bind(&name, Binding::Poisoned);
            return Err(self.fail(local, format!("`let {name};` without a value: expected `let {name} = <value>;`")));
        };
        if let Some((_, diverge)) = &init.diverge {
            self.bind(&name, Binding::Poisoned);
            return Err(
                self.fail(diverge, "unsupported Rust construct: `let ... else` is not part of the kernel language")
            );
        }
        if let Some(shared) = self.shared_alloc(&init.expr) {
            let Ok((elem, len)) = shared else {
                self.bind(&name, Binding::Poisoned);
                return Err(super::Reported);
            };
            let id = self.k.add_shared(name.to_string(), elem, len);
            self.bind(&name, Binding::Shared(id));
            return Ok(None);
        }
        let declared = match annotated {
            Some(t) => match scalar_type(t) {
                Some(st) => {
                    self.use_type(t);
                    Some(st)
                }
                None => {
                    self.bind(&name, Binding::Poisoned);
                    return Err(self.fail(
                        t,
                        format!(
                            "wrong type for `{name}`: expected one of {}, found `{}`",
                            crate::signature::ACCEPTED_TYPES,
                            show(t)
                        ),
                    ));
                }
            },
            None => None,
        };
        let value = match self.expr(&init.expr, declared) {
            Ok(v) => v,
            Err(r) => {
                self.bind(&name, Binding::Poisoned);
                return Err(r);
            }
        };
        if let Some(d) = declared {
            if d != value.ty {
                self.bind(&name, Binding::Poisoned);
                return Err(self.fail(
                    &init.expr,
                    format!("mismatched types: `{name}` is declared {d}, found a value of type {}", value.ty),
                ));
            }
        }
        let var = self.k.add_var(name.to_string(), value.ty, mutable);
        let depth = self.loop_depth;
        self.bind(&name, Binding::Local { var, depth });
        Ok(Some(Stmt::Let { var, value: value.e }))
    }

    /// `let [y0, y1, ..] = sum!(r in 0..R, i in 0..len, order = ORDER, body);`
    fn let_rows(&mut self, local: &syn::Local, slice: &syn::PatSlice) -> R<Stmt> {
        let mut names = Vec::new();
        for p in &slice.elems {
            match p {
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() => {
                    names.push(pi.ident.clone())
                }
                other => {
                    for n in &names {
                        self.bind(n, Binding::Poisoned);
                    }
                    return Err(self.fail(
                        other,
                        format!("`{}` in `let [..]`: expected the name of one row's result", show(other)),
                    ));
                }
            }
        }
        let poison = |lw: &mut Self| {
            for n in &names {
                lw.bind(n, Binding::Poisoned);
            }
        };
        let mac = match local.init.as_ref().map(|i| (strip(&i.expr), i.diverge.is_some())) {
            Some((syn::Expr::Macro(m), false)) => &m.mac,
            _ => {
                poison(self);
                return Err(self.fail(
                    local,
                    "unsupported Rust construct: `let [..]` binds the results of a reduction over rows; expected `let [y0, y1, ..] = sum!(r in 0..R, i in 0..len, order = ORDER, body);`",
                ));
            }
        };
        match self.reduce_rows(RowNames::Each(&names), mac) {
            Ok(s) => Ok(s),
            Err(r) => {
                poison(self);
                Err(r)
            }
        }
    }

    /// `let ys = sum!(r in 0..R, i in 0..len, order = ORDER, body);`: the R results named
    /// `ys0`, .., read as `ys[j]`.
    fn let_rows_named(&mut self, pi: &syn::PatIdent, mac: &syn::Macro) -> R<Stmt> {
        let name = &pi.ident;
        if pi.by_ref.is_some() || pi.subpat.is_some() || pi.mutability.is_some() {
            self.bind(name, Binding::Poisoned);
            return Err(self.fail(
                pi,
                format!(
                    "`{}`: the results of a reduction over rows are immutable; expected `let {name} = ..`",
                    show(pi)
                ),
            ));
        }
        self.reduce_rows(RowNames::One(name), mac).inspect_err(|_| self.bind(name, Binding::Poisoned))
    }

    /// `Some` if `e` is a `shared::<T, N>()` call: the element type and length.
    fn shared_alloc(&mut self, e: &syn::Expr) -> Option<R<(ScalarType, u32)>> {
        let syn::Expr::Call(call) = e else { return None };
        let syn::Expr::Path(p) = &*call.func else { return None };
        let seg = p.path.segments.last()?;
        if p.path.segments.len() != 1 || seg.ident != "shared" {
            return None;
        }
        let usage = "expected `shared::<T, N>()` with T a scalar type and N an integer literal";
        let syn::PathArguments::AngleBracketed(args) = &seg.arguments else {
            return Some(Err(self.fail(call, usage)));
        };
        let args: Vec<&syn::GenericArgument> = args.args.iter().collect();
        let (elem, len) = match args.as_slice() {
            [syn::GenericArgument::Type(t), syn::GenericArgument::Const(syn::Expr::Lit(l))] => (t, &l.lit),
            // `shared::<f32, 256>` parses 256 as a type-position literal in some syn versions.
            [syn::GenericArgument::Type(t), syn::GenericArgument::Type(syn::Type::Verbatim(v))] => {
                match syn::parse2::<syn::Lit>(v.clone()) {
                    Ok(l) => return Some(self.shared_parts(t, &l, call)),
                    Err(_) => return Some(Err(self.fail(call, usage))),
                }
            }
            _ => return Some(Err(self.fail(call, usage))),
        };
        if !call.args.is_empty() {
            return Some(Err(self.fail(&call.args, "`shared::<T, N>()` takes no arguments")));
        }
        Some(self.shared_parts(elem, len, call))
    }

    fn shared_parts(&mut self, elem: &syn::Type, len: &syn::Lit, call: &syn::ExprCall) -> R<(ScalarType, u32)> {
        let Some(t) = scalar_type(elem) else {
            return Err(self.fail(
                elem,
                format!(
                    "wrong shared array element type: expected one of {}, found `{}`",
                    crate::signature::ACCEPTED_TYPES,
                    show(elem)
                ),
            ));
        };
        let n = match len {
            syn::Lit::Int(i) => i.base10_parse::<u32>().ok().filter(|&n| n > 0),
            _ => None,
        };
        self.use_type(elem);
        match n {
            Some(n) => Ok((t, n)),
            None => Err(self.fail(
                call,
                format!("shared array length `{}`: expected an integer literal from 1 to {}", show(len), u32::MAX),
            )),
        }
    }

    fn expr_stmt(&mut self, e: &syn::Expr, path: &[u32]) -> R<Option<Stmt>> {
        match e {
            syn::Expr::Assign(a) => self.assign(e, &a.left, None, &a.right).map(Some),
            syn::Expr::Binary(b) if compound_op(&b.op).is_some() => self.assign(e, &b.left, compound_op(&b.op), &b.right).map(Some),
            syn::Expr::ForLoop(f) => self.for_loop(f, path).map(Some),
            syn::Expr::If(i) => self.if_stmt(i, path).map(Some),
            syn::Expr::Call(c) if is_plain_call(c, "barrier") => {
                if !c.args.is_empty() {
                    return Err(self.fail(&c.args, "`barrier()` takes no arguments"));
                }
                Ok(Some(Stmt::Barrier))
            }
            syn::Expr::Call(c) if is_plain_call(c, "mma_i8") => self.mma_i8(c).map(Some),
            syn::Expr::Paren(p) => self.expr_stmt(&p.expr, path),
            syn::Expr::Macro(m) if m.mac.path.is_ident("check") => self.check(&m.mac).map(Some),
            other if super::expr::is_value_construct(other) => Err(self.fail(
                other,
                "a value computed and dropped: expected an assignment `x = ...`, a store `buf[i] = ...`, a `for` loop, an `if` or `barrier()`",
            )),
            other => Err(self.fail(other, super::expr::unsupported(other))),
        }
    }

    /// `x = v`, `x op= v`, `buf[i] = v` or `buf[i] op= v`.
    fn assign(&mut self, whole: &syn::Expr, target: &syn::Expr, op: Option<BinOp>, value: &syn::Expr) -> R<Stmt> {
        match strip(target) {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.get_ident().map(ToString::to_string).unwrap_or_default();
                let (var, depth) = match self.lookup(&name) {
                    Some(Binding::Local { var, depth }) => (var, depth),
                    Some(Binding::Poisoned) => return Err(super::Reported),
                    Some(Binding::Param(_)) => {
                        return Err(self.fail(target, format!("cannot assign to parameter `{name}`: parameters are read-only; copy it into a `let mut` first, or store into a `&mut [T]` buffer")));
                    }
                    Some(Binding::Shared(_)) => {
                        return Err(self.fail(target, format!("cannot assign to shared array `{name}`: expected a store into an element, `{name}[i] = ...`")));
                    }
                    Some(Binding::Rows { .. }) => {
                        return Err(self.fail(target, format!("cannot assign to `{name}`: it holds the results of a reduction over rows, which are immutable")));
                    }
                    Some(Binding::Unrolled(_)) => {
                        return Err(self.fail(target, format!("cannot assign to loop variable `{name}`")));
                    }
                    None => {
                        return Err(self.fail(
                            target,
                            format!(
                                "cannot find `{name}` in this kernel: expected a local defined above with `let mut`"
                            ),
                        ))
                    }
                };
                let decl = self.k.var(var).clone();
                if !decl.mutable {
                    return Err(self.fail(
                        target,
                        format!("cannot assign twice to immutable variable `{name}`: declare it `let mut {name}`"),
                    ));
                }
                let current = Typed { e: Expr::Var(var), ty: decl.ty };
                let v = self.assigned_value(current, op, value)?;
                if v.ty != decl.ty {
                    return Err(self.fail(
                        value,
                        format!("mismatched types: `{name}` is {}, found a value of type {}", decl.ty, v.ty),
                    ));
                }
                if decl.ty.is_float() && depth < self.loop_depth && accumulates(&v.e, var) {
                    return Err(self.fail(
                        whole,
                        format!("float accumulation into `{name}` inside a loop is not a declared reduction: write it as sum!(i in .., order = ..., ...)"),
                    ));
                }
                Ok(Stmt::Assign { var, value: v.e })
            }
            syn::Expr::Index(ix) => {
                let (buf, elem) = self.buffer(&ix.expr, true)?;
                let index = self.index(&ix.index, &ix.expr)?;
                let current = Typed { e: Expr::load(buf, index.clone()), ty: elem };
                let v = self.assigned_value(current, op, value)?;
                if v.ty != elem {
                    return Err(self.fail(
                        value,
                        format!("mismatched types: `{}` holds {elem}, found a value of type {}", show(&ix.expr), v.ty),
                    ));
                }
                self.spans.stores.push(SpanRange::of(whole));
                Ok(Stmt::Store { buf, index, value: v.e })
            }
            other => Err(self.fail(
                other,
                "unsupported assignment target: expected a mutable local `x = ...` or a buffer element `buf[i] = ...`",
            )),
        }
    }

    /// `Some((r, a, b))` if `f` is a loop the front end unrolls: `for r in a..b` with a and b
    /// integer literals (`usize`) whose body reads the results of a reduction over rows by the
    /// loop variable, `ys[r]`. Other loops stay loops.
    fn unrolls<'f>(&self, f: &'f syn::ExprForLoop) -> Option<(&'f syn::Ident, u64, u64)> {
        let syn::Pat::Ident(pi) = &*f.pat else { return None };
        if f.label.is_some() || pi.by_ref.is_some() || pi.mutability.is_some() || pi.subpat.is_some() {
            return None;
        }
        let syn::Expr::Range(r) = strip(&f.expr) else { return None };
        let lit = |e: &Option<Box<syn::Expr>>| match e.as_deref().map(strip) {
            Some(syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. })) if matches!(i.suffix(), "" | "usize") => {
                i.base10_parse::<u64>().ok()
            }
            _ => None,
        };
        let (start, end) = (lit(&r.start)?, lit(&r.end)?);
        if !matches!(r.limits, syn::RangeLimits::HalfOpen(_)) {
            return None;
        }
        let body = f.body.stmts.iter().map(quote::ToTokens::to_token_stream).collect();
        self.reads_rows_by(body, &pi.ident).then_some((&pi.ident, start, end))
    }

    /// True if `tokens` hold `ys[var]` with `ys` bound to the results of a reduction over rows.
    fn reads_rows_by(&self, tokens: proc_macro2::TokenStream, var: &syn::Ident) -> bool {
        use proc_macro2::{Delimiter, TokenTree};
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        tokens.iter().enumerate().any(|(i, t)| match t {
            TokenTree::Group(g) => {
                let indexed = g.delimiter() == Delimiter::Bracket
                    && matches!(g.stream().into_iter().collect::<Vec<_>>().as_slice(), [TokenTree::Ident(v)] if v == var)
                    && matches!(i.checked_sub(1).map(|p| &tokens[p]), Some(TokenTree::Ident(base))
                        if matches!(self.lookup(&base.to_string()), Some(Binding::Rows { .. })));
                indexed || self.reads_rows_by(g.stream(), var)
            }
            _ => false,
        })
    }

    /// The value an assignment stores: `value`, or `current op value` for `op=`.
    fn assigned_value(&mut self, current: Typed, op: Option<BinOp>, value: &syn::Expr) -> R<Typed> {
        let v = self.expr(value, Some(current.ty))?;
        match op {
            None => Ok(v),
            Some(op) => {
                if v.ty != current.ty {
                    return Err(self.fail(
                        value,
                        format!(
                            "mismatched types: `{}=` of {} and {}: expected one type",
                            super::expr::op_symbol(op),
                            current.ty,
                            v.ty
                        ),
                    ));
                }
                if let Err(m) = super::expr::check_binary(op, current.ty) {
                    return Err(self.fail(value, m));
                }
                Ok(Typed { e: Expr::bin(op, current.e, v.e), ty: current.ty })
            }
        }
    }

    /// Resolves `base` of `base[i]` to a buffer parameter or shared array.
    pub(super) fn buffer(&mut self, base: &syn::Expr, write: bool) -> R<(Buf, ScalarType)> {
        let name = match strip(base) {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                p.path.get_ident().map(ToString::to_string).unwrap_or_default()
            }
            other => return Err(self.fail(
                other,
                "unsupported Rust construct: only buffer parameters and shared arrays can be indexed, by name: `x[i]`",
            )),
        };
        match self.lookup(&name) {
            Some(Binding::Param(p)) => match self.k.param(p).kind.clone() {
                ParamKind::Buffer { elem, access } => {
                    if write && access == Access::Read {
                        return Err(self.fail(
                            base,
                            format!("cannot write to `{name}`: it is `&[{elem}]`; declare it `&mut [{elem}]`"),
                        ));
                    }
                    Ok((Buf::Param(p), elem))
                }
                ParamKind::Scalar(t) => Err(self.fail(
                    base,
                    format!("cannot index `{name}`: it is a scalar of type {t}, expected a buffer `&[T]`"),
                )),
            },
            Some(Binding::Shared(s)) => {
                let elem = self.k.shared[s.index()].elem;
                Ok((Buf::Shared(s), elem))
            }
            Some(Binding::Local { var, .. }) => {
                let t = self.k.var(var).ty;
                Err(self.fail(
                    base,
                    format!(
                        "cannot index `{name}`: it is a local of type {t}, expected a buffer `&[T]` or a shared array"
                    ),
                ))
            }
            Some(Binding::Rows { .. }) => Err(self.fail(
                base,
                format!("cannot store into `{name}`: it holds the results of a reduction over rows, which are immutable"),
            )),
            Some(Binding::Unrolled(c)) => Err(self.fail(
                base,
                format!("cannot index `{name}`: it is a loop variable of type {}, expected a buffer `&[T]` or a shared array", c.ty),
            )),
            Some(Binding::Poisoned) => Err(super::Reported),
            None => Err(self.fail(
                base,
                format!("cannot find `{name}` in this kernel: expected a buffer parameter or a shared array"),
            )),
        }
    }

    /// `mma_i8(c, c_offset, c_stride, a, a_offset, a_stride, b, b_offset, b_stride, steps)`:
    /// the integer matrix step (`Stmt::MmaI8`) over workgroup arrays.
    fn mma_i8(&mut self, c: &syn::ExprCall) -> R<Stmt> {
        const USAGE: &str = "`mma_i8(c, c_offset, c_stride, a, a_offset, a_stride, b, b_offset, b_stride, steps)` with `c` a `shared::<i32, N>()` array, `a` and `b` `shared::<u32, N>()` arrays of int8 words, and usize offsets, strides and steps";
        let args: Vec<&syn::Expr> = c.args.iter().collect();
        let [c_arr, c_off, c_stride, a_arr, a_off, a_stride, b_arr, b_off, b_stride, steps] = args[..] else {
            return Err(self.fail(c, format!("`mma_i8` takes 10 arguments, found {}: expected {USAGE}", args.len())));
        };
        let tile = |lw: &mut Self,
                    arr: &syn::Expr,
                    off: &syn::Expr,
                    stride: &syn::Expr,
                    want: ScalarType,
                    which: &str| {
            let (buf, elem) = lw.buffer(arr, which == "output")?;
            let Buf::Shared(array) = buf else {
                return Err(lw.fail(
                    arr,
                    format!("the matrix step's {which} tile `{}` is a buffer parameter: expected a workgroup array `shared::<{want}, N>()`", show(arr)),
                ));
            };
            if elem != want {
                return Err(lw.fail(
                    arr,
                    format!(
                        "the matrix step's {which} tile `{}` holds {elem}: expected a workgroup array of {want}",
                        show(arr)
                    ),
                ));
            }
            let (offset, stride) = (lw.index(off, arr)?, lw.index(stride, arr)?);
            Ok(Tile { array, offset, stride })
        };
        let ct = tile(self, c_arr, c_off, c_stride, ScalarType::I32, "output");
        let at = tile(self, a_arr, a_off, a_stride, ScalarType::U32, "left");
        let bt = tile(self, b_arr, b_off, b_stride, ScalarType::U32, "right");
        let s = self.expr(steps, Some(ScalarType::INDEX));
        let (ct, at, bt, s) = (ct?, at?, bt?, s?);
        if s.ty != ScalarType::INDEX {
            return Err(self.fail(steps, format!("`mma_i8` steps has type {}: expected usize", s.ty)));
        }
        Ok(Stmt::MmaI8(Box::new(MmaI8 { c: ct, a: at, b: bt, steps: s.e })))
    }

    /// An index expression: `usize`.
    pub(super) fn index(&mut self, index: &syn::Expr, base: &syn::Expr) -> R<Expr> {
        let t = self.expr(index, Some(ScalarType::INDEX))?;
        if t.ty != ScalarType::INDEX {
            return Err(self.fail(
                index,
                format!("index into `{}` has type {}: expected usize (convert with `as usize`)", show(base), t.ty),
            ));
        }
        Ok(t.e)
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop, path: &[u32]) -> R<Stmt> {
        if let Some(l) = &f.label {
            return Err(self.fail(
                l,
                "unsupported Rust construct: loop labels are not part of the kernel language (there is no `break`)",
            ));
        }
        let ident = match &*f.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.mutability.is_none() && pi.subpat.is_none() => {
                Some(pi.ident.clone())
            }
            syn::Pat::Wild(_) => None,
            other => {
                return Err(
                    self.fail(other, "unsupported Rust construct: expected a loop variable name, `for i in ...`")
                )
            }
        };
        let shape = "expected `a..b`, `(a..b).step_by(s)`, `par(0..n)` or `par_team(0..n, lanes)` after `in`";
        let mut team = None;
        let (range, step, par) = match strip(&f.expr) {
            syn::Expr::Range(r) => (r, None, false),
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => match strip(&m.receiver) {
                syn::Expr::Range(r) => (r, m.args.first(), false),
                other => return Err(self.fail(other, format!("{shape}, found `{}`", show(other)))),
            },
            syn::Expr::Call(c) if is_plain_call(c, "par") && c.args.len() == 1 => match c.args.first().map(strip) {
                Some(syn::Expr::Range(r)) => (r, None, true),
                _ => return Err(self.fail(&c.args, format!("{shape}, found `{}`", show(&c.args)))),
            },
            syn::Expr::Call(c) if is_plain_call(c, "par_team") && c.args.len() == 2 => {
                let lanes = match strip(&c.args[1]) {
                    syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(l), .. }) => match l.base10_parse::<u32>() {
                        Ok(t) if t.is_power_of_two() && t <= baro_dsl::ir::MAX_BLOCK => t,
                        _ => {
                            return Err(self.fail(
                                l,
                                format!(
                                    "`par_team` lanes `{l}`: expected a power of two up to {}",
                                    baro_dsl::ir::MAX_BLOCK
                                ),
                            ))
                        }
                    },
                    other => {
                        return Err(self.fail(
                            other,
                            format!("`par_team` lanes: expected an integer literal, found `{}`", show(other)),
                        ))
                    }
                };
                team = Some(lanes);
                match strip(&c.args[0]) {
                    syn::Expr::Range(r) => (r, None, true),
                    other => return Err(self.fail(other, format!("{shape}, found `{}`", show(other)))),
                }
            }
            other => return Err(self.fail(other, format!("{shape}, found `{}`", show(other)))),
        };
        let (start, end) = self.range(range)?;
        let var_ty;
        let (start, end, step) = if par {
            if !is_zero(&start.e) {
                return Err(self.fail(range, "a `par` loop runs over `0..n`: expected the range to start at 0"));
            }
            var_ty = end.ty;
            (start.e, end.e, Expr::index(1))
        } else {
            var_ty = start.ty;
            let step = match step {
                Some(s) => {
                    let t = self.expr(s, Some(var_ty))?;
                    if t.ty != var_ty {
                        return Err(self
                            .fail(s, format!("step has type {}: expected {var_ty}, the loop variable's type", t.ty)));
                    }
                    t.e
                }
                None => Expr::Const(baro_dsl::ir::Const::new(var_ty, 1)),
            };
            (start.e, end.e, step)
        };
        if par && var_ty != ScalarType::INDEX {
            return Err(self.fail(range, format!("a `par` loop's bound has type {var_ty}: expected usize")));
        }
        let name = ident.as_ref().map_or_else(|| "_".to_string(), ToString::to_string);
        let var = self.k.add_var(name, var_ty, false);
        self.loop_depth += 1;
        let body = self.with_scope(|lw| {
            if let Some(id) = &ident {
                let depth = lw.loop_depth;
                lw.bind(id, Binding::Local { var, depth });
            }
            lw.block(&f.body.stmts, path)
        });
        self.loop_depth -= 1;
        Ok(if par { Stmt::ParFor { var, end, team, body } } else { Stmt::For { var, start, end, step, body } })
    }

    /// `a..b`: both bounds of one integer type.
    pub(super) fn range(&mut self, r: &syn::ExprRange) -> R<(Typed, Typed)> {
        let (Some(a), Some(b), syn::RangeLimits::HalfOpen(_)) = (&r.start, &r.end, &r.limits) else {
            return Err(self.fail(r, format!("expected a half-open range `a..b`, found `{}`", show(r))));
        };
        let (ta, tb) = self.pair(a, b, Some(ScalarType::INDEX))?;
        if ta.ty != tb.ty || !ta.ty.is_int() {
            return Err(
                self.fail(r, format!("range bounds have types {} and {}: expected one integer type", ta.ty, tb.ty))
            );
        }
        Ok((ta, tb))
    }

    fn if_stmt(&mut self, i: &syn::ExprIf, path: &[u32]) -> R<Stmt> {
        let cond = self.condition(&i.cond)?;
        let then_body = self.block(&i.then_branch.stmts, path);
        let offset = then_body.len() as u32;
        let else_body = match i.else_branch.as_ref().map(|(_, e)| &**e) {
            None => Vec::new(),
            Some(syn::Expr::Block(b)) => self.block_at(&b.block.stmts, path, offset),
            Some(syn::Expr::If(nested)) => {
                let mut p = path.to_vec();
                p.push(offset);
                let s = self.if_stmt(nested, &p)?;
                self.spans.stmts.push((p, SpanRange::of(nested)));
                vec![s]
            }
            Some(other) => return Err(self.fail(other, "expected a block or `if` after `else`")),
        };
        Ok(Stmt::If { cond: cond.e, then_body, else_body })
    }

    /// A `bool` condition.
    /// `check!(cond)`: a precondition of the launch (`Stmt::Check`), numbered in source order.
    fn check(&mut self, m: &syn::Macro) -> R<Stmt> {
        let cond: syn::Expr = match m.parse_body() {
            Ok(c) => c,
            Err(_) => return Err(self.fail(m, "`check!` takes one `bool` condition: expected `check!(a == b)`")),
        };
        let cond = self.condition(&cond)?;
        let id = self.checks;
        self.checks += 1;
        Ok(Stmt::Check { id, cond: cond.e })
    }

    pub(super) fn condition(&mut self, c: &syn::Expr) -> R<Typed> {
        if let syn::Expr::Let(l) = c {
            return Err(self.fail(
                l,
                "unsupported Rust construct: `if let` is not part of the kernel language; expected a `bool` condition",
            ));
        }
        let t = self.expr(c, Some(ScalarType::Bool))?;
        if t.ty != ScalarType::Bool {
            return Err(self
                .fail(c, format!("condition has type {}: expected bool (compare it, e.g. `{} != 0`)", t.ty, show(c))));
        }
        Ok(t)
    }
}

/// The operator of a compound assignment (`+=` → Add), if `op` is one.
fn compound_op(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as S;
    Some(match op {
        S::AddAssign(_) => BinOp::Add,
        S::SubAssign(_) => BinOp::Sub,
        S::MulAssign(_) => BinOp::Mul,
        S::DivAssign(_) => BinOp::Div,
        S::RemAssign(_) => BinOp::Rem,
        S::BitAndAssign(_) => BinOp::And,
        S::BitOrAssign(_) => BinOp::Or,
        S::BitXorAssign(_) => BinOp::Xor,
        S::ShlAssign(_) => BinOp::Shl,
        S::ShrAssign(_) => BinOp::Shr,
        _ => return None,
    })
}

/// True if the new value of `var` reads `var` itself, other than as `var.max(x)` or
/// `var.min(x)` (exact in any order for non-NaN values, so no declared order is needed).
fn accumulates(value: &Expr, var: Var) -> bool {
    if let Expr::Binary { op: BinOp::Max | BinOp::Min, lhs, rhs } = value {
        if **lhs == Expr::Var(var) && !rhs.any(&|x| *x == Expr::Var(var)) {
            return false;
        }
    }
    value.any(&|x| *x == Expr::Var(var))
}

fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Const(c) if c.bits == 0 && c.ty.is_int())
}

/// `e` without parentheses or invisible groups.
pub(super) fn strip(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip(&p.expr),
        syn::Expr::Group(g) => strip(&g.expr),
        other => other,
    }
}

/// True if `c` is a call of the plain function name `name`.
pub(super) fn is_plain_call(c: &syn::ExprCall, name: &str) -> bool {
    matches!(&*c.func, syn::Expr::Path(p) if p.qself.is_none() && p.path.is_ident(name))
}
