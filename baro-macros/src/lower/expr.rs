//! Expressions: literals and their types, names, loads, unary and binary operators, casts,
//! `if` expressions (select) and the dispatch to calls and reductions.
//!
//! Typing follows Rust without implicit conversions: both operands of a binary operator have
//! one type. An unsuffixed integer literal takes the other operand's type (else `usize`); an
//! unsuffixed float literal is `f32`. `&&` and `||` on bools become `and`/`or`: both sides are
//! always evaluated (kernel expressions have no side effects, so only speed could differ).

use super::stmt::strip;
use super::{Binding, Lower, Typed};
use crate::diag::{show, R};
use crate::signature::scalar_type;
use baro_dsl::ir::{BinOp, Const, Expr, ParamKind, ScalarType, Stmt, UnOp, Var};

impl Lower<'_> {
    /// Lowers `e`; `hint` is the type the context expects, used only to type unsuffixed
    /// literals (mismatches are reported by whoever gave the hint).
    pub(super) fn expr(&mut self, e: &syn::Expr, hint: Option<ScalarType>) -> R<Typed> {
        match e {
            syn::Expr::Lit(l) => self.lit(&l.lit, false, hint),
            syn::Expr::Paren(p) => self.expr(&p.expr, hint),
            syn::Expr::Group(g) => self.expr(&g.expr, hint),
            syn::Expr::Path(p) => self.path(p),
            syn::Expr::Index(ix) => {
                if let Some((first, count)) = self.rows_binding(&ix.expr) {
                    return self.row_result(ix, first, count);
                }
                let (buf, elem) = self.buffer(&ix.expr, false)?;
                let index = self.index(&ix.index, &ix.expr)?;
                Ok(Typed { e: Expr::load(buf, index), ty: elem })
            }
            syn::Expr::Unary(u) => self.unary(u, hint),
            syn::Expr::Binary(b) => self.binary(b, hint),
            syn::Expr::Cast(c) => self.cast(c),
            syn::Expr::If(i) => self.select(i, hint),
            syn::Expr::Block(b) if b.label.is_none() && b.attrs.is_empty() => self.block_value(&b.block, hint),
            syn::Expr::MethodCall(m) => self.method(m, hint),
            syn::Expr::Call(c) => self.call(c),
            syn::Expr::Macro(m) => self.reduce(&m.mac, hint),
            other => Err(self.fail(other, unsupported(other))),
        }
    }

    /// Lowers two operands of one type: an unsuffixed literal is typed after the other side.
    pub(super) fn pair(&mut self, a: &syn::Expr, b: &syn::Expr, hint: Option<ScalarType>) -> R<(Typed, Typed)> {
        if is_untyped_int(a) && !is_untyped_int(b) {
            let tb = self.expr(b, hint)?;
            let ta = self.expr(a, Some(tb.ty))?;
            Ok((ta, tb))
        } else {
            let ta = self.expr(a, hint)?;
            let tb = self.expr(b, Some(ta.ty))?;
            Ok((ta, tb))
        }
    }

    fn lit(&mut self, lit: &syn::Lit, neg: bool, hint: Option<ScalarType>) -> R<Typed> {
        match lit {
            syn::Lit::Bool(b) => Ok(Typed { e: Expr::c(Const::bool(b.value)), ty: ScalarType::Bool }),
            syn::Lit::Float(f) => match f.suffix() {
                "" | "f32" => self.float_lit(f.base10_digits(), neg, lit),
                s => Err(self.fail(
                    lit,
                    format!("float literal of type {s}: expected f32 (f16/bf16 values come from `bf16::from_f32(..)`)"),
                )),
            },
            syn::Lit::Int(i) => {
                let ty = match i.suffix() {
                    "" => match hint {
                        Some(t) if t.is_int() => t,
                        None => ScalarType::INDEX,
                        Some(t) if t.is_float() => {
                            return Err(self.fail(
                                lit,
                                format!(
                                    "expected {t}, found integer literal `{}`: write `{}.0`",
                                    show(lit),
                                    i.base10_digits()
                                ),
                            ));
                        }
                        Some(t) => {
                            return Err(self.fail(lit, format!("expected {t}, found integer literal `{}`", show(lit))))
                        }
                    },
                    "f32" => return self.float_lit(i.base10_digits(), neg, lit),
                    s => match ScalarType::from_name(s) {
                        Some(t) if t.is_int() => t,
                        _ => {
                            return Err(self.fail(
                                lit,
                                format!(
                                    "integer literal of type {s}: expected one of i8, u8, i32, u32, i64, u64, usize"
                                ),
                            ))
                        }
                    },
                };
                let Ok(v) = i.base10_digits().parse::<u128>() else {
                    return Err(self.fail(lit, format!("integer literal `{}` does not fit in {ty}", show(lit))));
                };
                let bits = ty.bits();
                let fits = match (ty.is_signed(), neg) {
                    (false, true) => {
                        return Err(self.fail(lit, format!("cannot negate `{}` of unsigned type {ty}", show(lit))))
                    }
                    (false, false) => v <= (u64::MAX >> (64 - bits)) as u128,
                    (true, false) => v < 1u128 << (bits - 1),
                    (true, true) => v <= 1u128 << (bits - 1),
                };
                if !fits {
                    let sign = if neg { "-" } else { "" };
                    return Err(
                        self.fail(lit, format!("integer literal `{sign}{}` does not fit in {ty}", i.base10_digits()))
                    );
                }
                let raw = if neg { (v as u64).wrapping_neg() } else { v as u64 };
                Ok(Typed { e: Expr::c(Const::new(ty, raw)), ty })
            }
            other => Err(self.fail(
                other,
                "unsupported Rust construct: string, char and byte literals are not part of the kernel language",
            )),
        }
    }

    fn float_lit(&mut self, digits: &str, neg: bool, lit: &syn::Lit) -> R<Typed> {
        match digits.parse::<f32>() {
            Ok(v) if v.is_finite() => {
                let v = if neg { -v } else { v };
                Ok(Typed { e: Expr::f32(v), ty: ScalarType::F32 })
            }
            _ => Err(self.fail(lit, format!("float literal `{}` is not a finite f32", show(lit)))),
        }
    }

    fn path(&mut self, p: &syn::ExprPath) -> R<Typed> {
        if p.qself.is_some() {
            return Err(self.fail(p, unsupported(&syn::Expr::Path(p.clone()))));
        }
        let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let [ty, name] = segs.as_slice() {
            if ty == "f32" {
                let v = match name.as_str() {
                    "INFINITY" => Some(f32::INFINITY),
                    "NEG_INFINITY" => Some(f32::NEG_INFINITY),
                    "MAX" => Some(f32::MAX),
                    "MIN" => Some(f32::MIN),
                    "EPSILON" => Some(f32::EPSILON),
                    _ => None,
                };
                if let Some(v) = v {
                    return Ok(Typed { e: Expr::f32(v), ty: ScalarType::F32 });
                }
            }
            return Err(self.fail(p, format!("cannot use `{}` in a kernel: expected a parameter, a local, or one of f32::INFINITY, NEG_INFINITY, MAX, MIN, EPSILON", show(p))));
        }
        let Some(name) = p.path.get_ident().map(ToString::to_string) else {
            return Err(self.fail(p, format!("cannot use `{}` in a kernel: expected a parameter or a local", show(p))));
        };
        match self.lookup(&name) {
            Some(Binding::Param(id)) => match self.k.param(id).kind.clone() {
                ParamKind::Scalar(t) => Ok(Typed { e: Expr::Param(id), ty: t }),
                ParamKind::Buffer { .. } => {
                    Err(self.fail(p, format!("buffer `{name}` used as a value: expected an element, `{name}[i]`")))
                }
            },
            Some(Binding::Local { var, .. }) => Ok(Typed { e: Expr::Var(var), ty: self.k.var(var).ty }),
            Some(Binding::Unrolled(c)) => Ok(Typed { e: Expr::c(c), ty: c.ty }),
            Some(Binding::Rows { count, .. }) => Err(self.fail(
                p,
                format!("`{name}` holds the {count} results of a reduction over rows, used here as a value: expected one of them, `{name}[j]`"),
            )),
            Some(Binding::Shared(_)) => {
                Err(self.fail(p, format!("shared array `{name}` used as a value: expected an element, `{name}[i]`")))
            }
            Some(Binding::Poisoned) => Err(super::Reported),
            None => Err(self.fail(
                p,
                format!("cannot find `{name}` in this kernel: expected a parameter or a local defined above"),
            )),
        }
    }

    /// `Some((first, count))` if `base` names the results of a reduction over rows.
    fn rows_binding(&self, base: &syn::Expr) -> Option<(Var, u32)> {
        let syn::Expr::Path(p) = strip(base) else { return None };
        match self.lookup(&p.path.get_ident()?.to_string())? {
            Binding::Rows { first, count } => Some((first, count)),
            _ => None,
        }
    }

    /// `ys[j]`: result j of a reduction over rows, j an integer literal or the variable of an
    /// unrolled loop, below the row count.
    fn row_result(&mut self, ix: &syn::ExprIndex, first: Var, count: u32) -> R<Typed> {
        let name = show(&ix.expr);
        let j = match strip(&ix.index) {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) if matches!(i.suffix(), "" | "usize") => {
                i.base10_parse::<u64>().ok()
            }
            syn::Expr::Path(p) => match p.path.get_ident().and_then(|i| self.lookup(&i.to_string())) {
                Some(Binding::Unrolled(c)) => Some(c.bits),
                Some(Binding::Poisoned) => return Err(super::Reported),
                _ => None,
            },
            _ => None,
        };
        let Some(j) = j else {
            return Err(self.fail(
                &ix.index,
                format!(
                    "`{name}[{}]`: a result of a reduction over rows is picked when the kernel is written; expected an integer literal or the variable of a `for` loop over literal bounds (`for r in 0..{count}`), which is unrolled",
                    show(&ix.index)
                ),
            ));
        };
        if j >= u64::from(count) {
            return Err(self.fail(
                &ix.index,
                format!("row {j} out of range: `{name}` holds {count} results, rows 0 to {}", count - 1),
            ));
        }
        let var = Var(first.0 + j as u32);
        Ok(Typed { e: Expr::Var(var), ty: self.k.var(var).ty })
    }

    fn unary(&mut self, u: &syn::ExprUnary, hint: Option<ScalarType>) -> R<Typed> {
        match u.op {
            syn::UnOp::Neg(_) => {
                if let syn::Expr::Lit(l) = strip(&u.expr) {
                    return self.lit(&l.lit, true, hint);
                }
                let t = self.expr(&u.expr, hint)?;
                if !(t.ty.is_float() || t.ty.is_signed()) {
                    return Err(self.fail(u, format!("cannot negate a value of type {}: expected a float or signed integer", t.ty)));
                }
                Ok(Typed { e: Expr::un(UnOp::Neg, t.e), ty: t.ty })
            }
            syn::UnOp::Not(_) => {
                let t = self.expr(&u.expr, hint)?;
                if !(t.ty.is_int() || t.ty == ScalarType::Bool) {
                    return Err(self.fail(u, format!("`!` does not apply to {}: expected bool or an integer", t.ty)));
                }
                Ok(Typed { e: Expr::un(UnOp::Not, t.e), ty: t.ty })
            }
            _ => Err(self.fail(u, "unsupported Rust construct: dereferencing is not part of the kernel language; index buffers directly, `x[i]`")),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary, hint: Option<ScalarType>) -> R<Typed> {
        use syn::BinOp as S;
        let op = match b.op {
            S::Add(_) => BinOp::Add,
            S::Sub(_) => BinOp::Sub,
            S::Mul(_) => BinOp::Mul,
            S::Div(_) => BinOp::Div,
            S::Rem(_) => BinOp::Rem,
            S::And(_) | S::BitAnd(_) => BinOp::And,
            S::Or(_) | S::BitOr(_) => BinOp::Or,
            S::BitXor(_) => BinOp::Xor,
            S::Shl(_) => BinOp::Shl,
            S::Shr(_) => BinOp::Shr,
            S::Eq(_) => BinOp::Eq,
            S::Ne(_) => BinOp::Ne,
            S::Lt(_) => BinOp::Lt,
            S::Le(_) => BinOp::Le,
            S::Gt(_) => BinOp::Gt,
            S::Ge(_) => BinOp::Ge,
            _ => {
                return Err(self.fail(
                    b,
                    "a compound assignment inside an expression: expected it as a statement of its own, `x += v;`",
                ))
            }
        };
        let logical = matches!(b.op, S::And(_) | S::Or(_));
        let operand_hint = if op.is_comparison() {
            None
        } else if logical {
            Some(ScalarType::Bool)
        } else {
            hint
        };
        let (l, r) = self.pair(&b.left, &b.right, operand_hint)?;
        let sym = show(&b.op);
        if l.ty != r.ty {
            let what = if matches!(op, BinOp::Shl | BinOp::Shr) {
                "a shift amount of the shifted value's type"
            } else {
                "one type"
            };
            return Err(self.fail(
                b,
                format!("mismatched types: `{sym}` of {} and {}: expected {what} (convert with `.to_f32()`, `from_f32` or `as`)", l.ty, r.ty),
            ));
        }
        if logical && l.ty != ScalarType::Bool {
            return Err(
                self.fail(b, format!("`{sym}` of {}: expected bool operands (`&`, `|` work on integers)", l.ty))
            );
        }
        if let Err(m) = check_binary(op, l.ty) {
            return Err(self.fail(b, m));
        }
        let ty = if op.is_comparison() { ScalarType::Bool } else { l.ty };
        Ok(Typed { e: Expr::bin(op, l.e, r.e), ty })
    }

    fn cast(&mut self, c: &syn::ExprCast) -> R<Typed> {
        let Some(to) = scalar_type(&c.ty) else {
            return Err(self.fail(
                &c.ty,
                format!("cannot cast to `{}`: expected one of {}", show(&c.ty), crate::signature::ACCEPTED_TYPES),
            ));
        };
        if matches!(to, ScalarType::F16 | ScalarType::BF16) {
            return Err(self.fail(c, format!("`as {to}` is not Rust: expected `{to}::from_f32(x)`")));
        }
        let t = self.expr(&c.expr, None)?;
        if matches!(t.ty, ScalarType::F16 | ScalarType::BF16) {
            return Err(self.fail(c, format!("`as` from {} is not Rust: expected `x.to_f32()` first", t.ty)));
        }
        if to == ScalarType::Bool && t.ty != ScalarType::Bool {
            return Err(self.fail(c, format!("cannot cast {} to bool: expected a comparison, e.g. `x != 0`", t.ty)));
        }
        Ok(Typed { e: Expr::cast(to, t.e), ty: to })
    }

    /// `if c { a } else { b }` as a value: a select, both arms evaluated.
    fn select(&mut self, i: &syn::ExprIf, hint: Option<ScalarType>) -> R<Typed> {
        let cond = self.condition(&i.cond)?;
        let then = self.arm(&i.then_branch, hint)?;
        let els = match i.else_branch.as_ref().map(|(_, e)| &**e) {
            Some(syn::Expr::Block(b)) => self.arm(&b.block, Some(then.ty))?,
            Some(syn::Expr::If(nested)) => self.select(nested, Some(then.ty))?,
            Some(other) => return Err(self.fail(other, "expected a block or `if` after `else`")),
            None => {
                return Err(self.fail(i, "an `if` used as a value needs an `else`: expected `if c { a } else { b }`"))
            }
        };
        if then.ty != els.ty {
            return Err(self.fail(i, format!("`if` arms have types {} and {}: expected one type", then.ty, els.ty)));
        }
        Ok(Typed { e: Expr::select(cond.e, then.e, els.e), ty: then.ty })
    }

    /// One arm of a select: a block used as a value.
    fn arm(&mut self, b: &syn::Block, hint: Option<ScalarType>) -> R<Typed> {
        self.block_value(b, hint)
    }

    /// `{ let a = e1; let b = e2; tail }` as a value: the tail inside one `Expr::Let` per
    /// binding, in a scope of its own (the names end with the block, as in Rust). Only
    /// immutable `let`s may precede the tail: a value has no side effects.
    pub(super) fn block_value(&mut self, b: &syn::Block, hint: Option<ScalarType>) -> R<Typed> {
        self.with_scope(|lw| {
            let Some((syn::Stmt::Expr(tail, None), lets)) = b.stmts.split_last() else {
                return Err(lw.fail(b, "a block used as a value: expected `let` statements followed by the value without a `;`, e.g. `{ let d = f16_bits(h); d * s }`"));
            };
            let mut bound = Vec::with_capacity(lets.len());
            for s in lets {
                let syn::Stmt::Local(local) = s else {
                    return Err(lw.fail(s, "a block used as a value holds only `let x = ...;` statements before its value: expected assignments, stores, loops and `if` statements in the kernel body"));
                };
                let pat = match &local.pat {
                    syn::Pat::Type(pt) => &*pt.pat,
                    p => p,
                };
                if let syn::Pat::Ident(pi) = pat {
                    if pi.mutability.is_some() {
                        return Err(lw.fail(local, format!("`let mut {}` in a block used as a value: nothing can assign to it there; expected `let {}`", pi.ident, pi.ident)));
                    }
                }
                match lw.local(local)? {
                    Some(Stmt::Let { var, value }) => bound.push((var, value)),
                    _ => return Err(lw.fail(local, "a shared array in a block used as a value: expected `let tile = shared::<T, N>();` as a statement of the kernel body")),
                }
            }
            let tail = lw.expr(tail, hint)?;
            let e = bound.into_iter().rev().fold(tail.e, |body, (var, value)| Expr::let_in(var, value, body));
            if !lets.is_empty() && e.any(&|x| matches!(x, Expr::Reduce(_))) {
                return Err(lw.fail(b, "a reduction (`sum!`, `max!`, `min!`) inside a block with `let`s: expected it bound by a `let` statement of the kernel body first, `let s = sum!(...);`"));
            }
            Ok(Typed { e, ty: tail.ty })
        })
    }
}

/// Whether `op` applies to operands of type `ty`; the message says what would.
pub(super) fn check_binary(op: BinOp, ty: ScalarType) -> Result<(), String> {
    let ok = match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => ty.is_float() || ty.is_int(),
        BinOp::Rem | BinOp::Shl | BinOp::Shr => ty.is_int(),
        BinOp::And | BinOp::Or | BinOp::Xor => ty.is_int() || ty == ScalarType::Bool,
        BinOp::Eq | BinOp::Ne => true,
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => ty != ScalarType::Bool,
    };
    if ok {
        return Ok(());
    }
    let expected = match op {
        BinOp::Rem | BinOp::Shl | BinOp::Shr => "integer operands",
        BinOp::And | BinOp::Or | BinOp::Xor => "integer or bool operands",
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => "numbers",
        _ => "numeric operands (f16/bf16 values: convert with `.to_f32()` first)",
    };
    Err(format!("`{}` does not apply to {ty}: expected {expected}", op_symbol(op)))
}

pub(super) fn op_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::Min => "min",
        BinOp::Max => "max",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
    }
}

/// True for an integer literal without a suffix (possibly negated or parenthesized).
fn is_untyped_int(e: &syn::Expr) -> bool {
    match strip(e) {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.suffix().is_empty(),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => is_untyped_int(&u.expr),
        _ => false,
    }
}

/// True for constructs the kernel language has as values (a statement made of one of them
/// computes something and drops it).
pub(super) fn is_value_construct(e: &syn::Expr) -> bool {
    matches!(
        e,
        syn::Expr::Lit(_)
            | syn::Expr::Path(_)
            | syn::Expr::Index(_)
            | syn::Expr::Unary(_)
            | syn::Expr::Binary(_)
            | syn::Expr::Cast(_)
            | syn::Expr::MethodCall(_)
            | syn::Expr::Call(_)
            | syn::Expr::Macro(_)
    )
}

/// The "unsupported Rust construct" message for `e`: what it is and what to write instead.
pub(super) fn unsupported(e: &syn::Expr) -> String {
    let (what, instead) = match e {
        syn::Expr::While(_) => ("`while` loops are", "expected `for i in a..b` (sequential) or `for i in par(0..n)` (parallel)"),
        syn::Expr::Loop(_) => ("`loop` is", "expected `for i in a..b` with a bound computed from the parameters"),
        syn::Expr::Match(_) => ("`match` is", "expected `if`/`else`, or `if c { a } else { b }` as a value"),
        syn::Expr::Closure(_) => ("closures are", "expected the expression written inline"),
        syn::Expr::Return(_) => ("early `return` is", "expected the rest of the body guarded by an `if`"),
        syn::Expr::Break(_) | syn::Expr::Continue(_) => ("`break` and `continue` are", "expected the loop body guarded by an `if`"),
        syn::Expr::Reference(_) | syn::Expr::RawAddr(_) => ("references are", "expected buffers indexed directly, `x[i]`"),
        syn::Expr::Struct(_) => ("struct literals are", "kernels compute with scalars, buffers and shared arrays"),
        syn::Expr::Tuple(_) | syn::Expr::Array(_) | syn::Expr::Repeat(_) => {
            ("tuples and arrays are", "expected separate `let`s, or `shared::<T, N>()` for a workgroup array")
        }
        syn::Expr::Field(_) => ("field accesses are", "kernels compute with scalars, buffers and shared arrays"),
        syn::Expr::Range(_) => ("ranges as values are", "expected a range only after `in` in a `for` loop or a reduction"),
        syn::Expr::Block(_) => ("labelled or attributed blocks are", "expected a plain block, `{ let a = ...; a * 2.0 }`"),
        syn::Expr::Unsafe(_) | syn::Expr::Const(_) => ("`unsafe` and `const` blocks are", "expected a plain block, `{ let a = ...; a * 2.0 }`"),
        syn::Expr::Async(_) | syn::Expr::Await(_) | syn::Expr::Yield(_) | syn::Expr::TryBlock(_) => ("async code is", "kernels are straight-line code"),
        syn::Expr::Try(_) => ("the `?` operator is", "kernels have no fallible operations"),
        syn::Expr::Let(_) => ("`let` in an expression is", "expected a `let` statement"),
        syn::Expr::Assign(_) => ("an assignment inside an expression is", "expected it as a statement of its own"),
        syn::Expr::Path(p) if p.qself.is_some() => ("qualified paths are", "expected a parameter or a local"),
        syn::Expr::MethodCall(m) => {
            return format!(
                "unsupported Rust construct: method `.{}()` is not part of the kernel language; expected one of to_f32, to_bits, sqrt, abs, floor, max, min",
                m.method
            )
        }
        syn::Expr::Call(c) => {
            return format!(
                "unsupported Rust construct: function `{}` is not part of the kernel language; expected one of exp, log, sigmoid, silu, softplus, rsqrt, fma, group_id, barrier, f16::from_f32, bf16::from_f32, f32::from_bits",
                show(&c.func)
            )
        }
        syn::Expr::Macro(m) => {
            return format!(
                "unsupported Rust construct: macro `{}!` is not part of the kernel language; expected sum!, max! or min!",
                show(&m.mac.path)
            )
        }
        _ => ("this expression is", "see the `kernel` attribute's documentation for the supported subset"),
    };
    format!("unsupported Rust construct: {what} not part of the kernel language; {instead}")
}
