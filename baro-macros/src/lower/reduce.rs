//! Reductions: `sum!`/`max!`/`min!(i in 0..len, order = ORDER, body)` (a `sum!` whose body
//! is `fma(x, w)`, two arguments, is an `fma_sum`: `acc = fma(x_i, w_i, acc)` in every
//! partial) and the ORDER syntax
//! (`seq`, `lanes(N).butterfly()`, `lanes(N).strided().pairwise()`, `lanes(N).seq()`,
//! `chunked(C)`, `chunked(C).pairwise()`, `blocked(B, ORDER)`, and `any` for an integer
//! reduction the verifier proves the same in every order).
//!
//! A reduction over rows, `let [y0, .., yR-1] = sum!(r in 0..R, i in 0..len, order = ORDER,
//! body);` (R an integer literal, one name per row; `r` readable in the body and in `len`,
//! so each row may have its own length), is one `Stmt::LetRows`: result j is the reduction
//! with `r` = j, each in ORDER. `let ys = sum!(r in 0..R, ..);` is the same statement with the
//! results named `ys0`, .. and read as `ys[j]`, j a literal or the variable of a loop the front
//! end unrolls (`stmt.rs`).
//!
//! The order the user writes becomes the `Schedule` verbatim; nothing here picks one.

use super::spans::SpanRange;
use super::stmt::{is_plain_call, strip};
use super::{Binding, Lower, Typed};
use crate::diag::{show, R};
use baro_dsl::ir::{BinOp, Expr, Reduce, ReduceOp, ScalarType, Stmt};
use baro_dsl::schedule::{Combine, Schedule};
use proc_macro2::TokenStream;
use syn::parse::{ParseStream, Parser};
use syn::{Ident, Token};

struct ReduceSyntax {
    /// `r in 0..R` before the element range: a reduction over R rows.
    row: Option<(Ident, syn::Expr)>,
    var: Ident,
    range: syn::Expr,
    /// `order = ORDER`, for the span table.
    order_tokens: TokenStream,
    order: syn::Expr,
    body: syn::Expr,
}

const ORDERS: &str = "seq, lanes(N).butterfly(), lanes(N).pairwise(), lanes(N).seq(), chunked(C), chunked(C).pairwise(), blocked(B, ORDER), or any for an integer reduction proven the same in every order";

fn parse_reduce(input: ParseStream) -> syn::Result<ReduceSyntax> {
    let mut var: Ident = input.parse()?;
    input.parse::<Token![in]>()?;
    let mut range = syn::Expr::parse_without_eager_brace(input)?;
    input.parse::<Token![,]>()?;
    // `r in 0..R, i in 0..len, ..`: the first range is the rows'.
    let mut row = None;
    if input.peek(Ident) && input.peek2(Token![in]) {
        let v: Ident = input.parse()?;
        input.parse::<Token![in]>()?;
        let rg = syn::Expr::parse_without_eager_brace(input)?;
        input.parse::<Token![,]>()?;
        row = Some((std::mem::replace(&mut var, v), std::mem::replace(&mut range, rg)));
    }
    let key: Ident = input.parse()?;
    if key != "order" {
        return Err(syn::Error::new(
            key.span(),
            format!(
                "expected `order = ...` after the range, found `{key}`: every reduction declares its order ({ORDERS})"
            ),
        ));
    }
    let eq: Token![=] = input.parse()?;
    let order: syn::Expr = input.parse()?;
    let order_tokens = quote::quote!(#key #eq #order);
    input.parse::<Token![,]>()?;
    let body: syn::Expr = input.parse()?;
    if !input.is_empty() {
        input.parse::<Token![,]>()?;
    }
    if !input.is_empty() {
        return Err(input.error("expected the end of the reduction after its body"));
    }
    Ok(ReduceSyntax { row, var, range, order_tokens, order, body })
}

/// The names a reduction over rows binds.
#[derive(Clone, Copy)]
pub(super) enum RowNames<'a> {
    /// `let [y0, y1, ..] = ..`: one name per row.
    Each(&'a [Ident]),
    /// `let ys = ..`: one name for all of them, read as `ys[j]`.
    One(&'a Ident),
}

/// True if `mac` is a `sum!`/`max!`/`min!` over rows (`r in 0..R, i in 0..len, ..`); false
/// also when it does not parse (the reduction's own lowering reports that).
pub(super) fn is_rows_reduce(mac: &syn::Macro) -> bool {
    let reduction = ["sum", "max", "min"].iter().any(|n| mac.path.is_ident(n));
    reduction && parse_reduce.parse2(mac.tokens.clone()).is_ok_and(|r| r.row.is_some())
}

impl Lower<'_> {
    pub(super) fn reduce(&mut self, mac: &syn::Macro, hint: Option<ScalarType>) -> R<Typed> {
        let Some((r, op)) = self.reduce_syntax(mac)? else { return Err(super::Reported) };
        if let Some((row, rows)) = &r.row {
            return Err(self.fail(
                mac,
                format!(
                    "a reduction over rows (`{row} in {}`) has one result per row: bind them with `let ys = {}!({row} in {}, ..);` (read as `ys[j]`) or `let [y0, y1, ..] = ..`",
                    show(rows),
                    op.name(),
                    show(rows)
                ),
            ));
        }
        let reduce = self.reduce_parsed(r, op, hint, None)?;
        Ok(Typed { ty: reduce.ty, e: Expr::Reduce(Box::new(reduce)) })
    }

    /// `let [y0, .., yR-1] = sum!(r in 0..R, i in 0..len, order = ORDER, body);` or `let ys =
    /// ..`: one reduction with R results, result j the reduction with `r` = j
    /// (`Stmt::LetRows`).
    pub(super) fn reduce_rows(&mut self, names: RowNames, mac: &syn::Macro) -> R<Stmt> {
        let Some((mut r, op)) = self.reduce_syntax(mac)? else { return Err(super::Reported) };
        let usage = format!(
            "expected `let [y0, y1, ..] = {}!(r in 0..R, i in 0..len, order = ORDER, body)` with R names",
            op.name()
        );
        let Some((row, rows)) = r.row.take() else {
            let n = match names {
                RowNames::Each(names) => names.len(),
                RowNames::One(_) => 1,
            };
            return Err(self.fail(mac, format!("a reduction with one result bound to {n} names: {usage}")));
        };
        let count = match strip(&rows) {
            syn::Expr::Range(rg) if rg.start.as_deref().is_some_and(|s| matches!(strip(s), syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) if i.base10_digits() == "0")) && matches!(rg.limits, syn::RangeLimits::HalfOpen(_)) => {
                match rg.end.as_deref().map(strip) {
                    Some(syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. })) => i.base10_parse::<usize>().ok(),
                    _ => None,
                }
            }
            _ => None,
        };
        let Some(count) = count.filter(|c| *c > 0) else {
            return Err(self.fail(&rows, format!("rows `{}`: expected `0..R` with R an integer literal (rows are fixed when the kernel is written); {usage}", show(&rows))));
        };
        if let RowNames::Each(names) = names {
            if count != names.len() {
                return Err(
                    self.fail(&rows, format!("{count} rows bound to {} names: expected one name per row", names.len()))
                );
            }
        }
        let Ok(count32) = u32::try_from(count) else {
            return Err(self.fail(&rows, format!("{count} rows: expected at most {}", u32::MAX)));
        };
        let row_var = self.k.add_var(row.to_string(), ScalarType::INDEX, false);
        let reduce = self.reduce_parsed(r, op, None, Some((&row, row_var)))?;
        let depth = self.loop_depth;
        let vars: Vec<_> = match names {
            RowNames::Each(names) => names
                .iter()
                .map(|n| {
                    let var = self.k.add_var(n.to_string(), reduce.ty, false);
                    self.bind(n, Binding::Local { var, depth });
                    var
                })
                .collect(),
            RowNames::One(name) => {
                // Consecutive locals, so the binding is the first and a count.
                let vars: Vec<_> = (0..count).map(|j| self.k.add_var(format!("{name}{j}"), reduce.ty, false)).collect();
                self.bind(name, Binding::Rows { first: vars[0], count: count32 });
                vars
            }
        };
        Ok(Stmt::LetRows { vars, row: row_var, value: Expr::Reduce(Box::new(reduce)) })
    }

    /// The reduction's syntax and op, or `None` with the error reported.
    fn reduce_syntax(&mut self, mac: &syn::Macro) -> R<Option<(ReduceSyntax, ReduceOp)>> {
        let op = match mac.path.get_ident().map(ToString::to_string).as_deref() {
            Some("sum") => ReduceOp::Add,
            Some("max") => ReduceOp::Max,
            Some("min") => ReduceOp::Min,
            _ => {
                return Err(self.fail(
                    mac,
                    super::expr::unsupported(&syn::Expr::Macro(syn::ExprMacro { attrs: vec![], mac: mac.clone() })),
                ))
            }
        };
        let usage = format!("expected `{}!(i in 0..len, order = ORDER, body)`", op.name());
        match parse_reduce.parse2(mac.tokens.clone()) {
            Ok(r) => Ok(Some((r, op))),
            Err(e) => {
                let msg = format!("{e}; {usage}");
                self.diag.push(syn::Error::new(e.span(), msg));
                Ok(None)
            }
        }
    }

    /// Lowers a parsed reduction; `row`: the row variable of a reduction over rows, in scope
    /// in the body.
    fn reduce_parsed(
        &mut self,
        r: ReduceSyntax,
        op: ReduceOp,
        hint: Option<ScalarType>,
        row: Option<(&Ident, baro_dsl::ir::Var)>,
    ) -> R<Reduce> {
        let usage = format!("expected `{}!(i in 0..len, order = ORDER, body)`", op.name());
        // Pre-order: this reduction's ordinal comes before any nested one's.
        self.spans.reduces.push(SpanRange::of(&r.order_tokens));
        let schedule = self.schedule(&r.order)?;
        // Over rows, the length may read the row: row j runs over its own `0..len(j)`.
        let bounds = match strip(&r.range) {
            syn::Expr::Range(range) => Some(self.with_scope(|lw| {
                if let Some((name, v)) = row {
                    let depth = lw.loop_depth;
                    lw.bind(name, Binding::Local { var: v, depth });
                }
                lw.range(range)
            })?),
            _ => None,
        };
        let len = match (strip(&r.range), bounds) {
            (syn::Expr::Range(range), Some((start, end))) => {
                if !matches!(&start.e, Expr::Const(c) if c.bits == 0) {
                    return Err(self.fail(
                        range,
                        format!(
                            "a reduction runs over `0..len`, found `{}`: shift the index in the body instead",
                            show(range)
                        ),
                    ));
                }
                if end.ty != ScalarType::INDEX {
                    return Err(self.fail(range, format!("a reduction's length has type {}: expected usize", end.ty)));
                }
                end.e
            }
            (other, _) => {
                return Err(self.fail(other, format!("{usage}: found `{}` where the range `0..len` goes", show(other))))
            }
        };
        let var = self.k.add_var(r.var.to_string(), ScalarType::INDEX, false);
        // `sum!(.., fma(x, w))`: each partial takes element i in as `fma(x_i, w_i, partial)`.
        let fused = match strip(&r.body) {
            syn::Expr::Call(c) if op == ReduceOp::Add && is_plain_call(c, "fma") && c.args.len() == 2 => Some(c),
            _ => None,
        };
        let op = if fused.is_some() { ReduceOp::FmaSum } else { op };
        let body = self.with_scope(|lw| {
            let depth = lw.loop_depth;
            if let Some((name, v)) = row {
                lw.bind(name, Binding::Local { var: v, depth });
            }
            lw.bind(&r.var, Binding::Local { var, depth });
            match fused {
                Some(c) => {
                    let a = lw.f32_arg(&c.args[0], "fma")?;
                    let b = lw.f32_arg(&c.args[1], "fma")?;
                    Ok(Typed { e: Expr::bin(BinOp::Mul, a, b), ty: ScalarType::F32 })
                }
                None => lw.expr(&r.body, hint),
            }
        })?;
        let ok = match op {
            ReduceOp::Add => body.ty.is_float() || body.ty.is_int(),
            ReduceOp::Max | ReduceOp::Min => body.ty == ScalarType::F32 || body.ty.is_int(),
            ReduceOp::FmaSum => body.ty == ScalarType::F32,
        };
        if !ok {
            return Err(self.fail(
                &r.body,
                format!(
                    "`{}!` over {}: expected f32 or an integer body (convert f16/bf16 with `.to_f32()`)",
                    op.name(),
                    body.ty
                ),
            ));
        }
        Ok(Reduce { op, ty: body.ty, schedule, var, len, body: body.e })
    }

    /// Parses and validates an ORDER expression.
    fn schedule(&mut self, e: &syn::Expr) -> R<Schedule> {
        let s = self.schedule_syntax(e)?;
        match s.validate() {
            Ok(()) => Ok(s),
            Err(err) => Err(self.fail(e, format!("invalid reduction order `{}`: {err}", show(e)))),
        }
    }

    fn schedule_syntax(&mut self, e: &syn::Expr) -> R<Schedule> {
        let expected = |lw: &mut Self, node: &syn::Expr| {
            lw.fail(node, format!("expected a reduction order ({ORDERS}), found `{}`", show(node)))
        };
        // Unwind the method chain: base call, then method names in order.
        let mut methods: Vec<&syn::ExprMethodCall> = Vec::new();
        let mut cur = strip(e);
        while let syn::Expr::MethodCall(m) = cur {
            methods.push(m);
            cur = strip(&m.receiver);
        }
        methods.reverse();
        if methods.iter().any(|m| !m.args.is_empty() || m.turbofish.is_some()) {
            return Err(expected(self, e));
        }
        let names: Vec<String> = methods.iter().map(|m| m.method.to_string()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        match cur {
            syn::Expr::Path(p) if p.path.is_ident("seq") && names.is_empty() => Ok(Schedule::Sequential),
            // Order-free: the verifier (`check_wellformed`) accepts it only where every order
            // gives one value (an integer sum proven not to overflow, an integer max/min).
            syn::Expr::Path(p) if p.path.is_ident("any") && names.is_empty() => Ok(Schedule::Any),
            syn::Expr::Call(c) => {
                let head = match &*c.func {
                    syn::Expr::Path(p) => p.path.get_ident().map(ToString::to_string).unwrap_or_default(),
                    _ => return Err(expected(self, e)),
                };
                let args: Vec<&syn::Expr> = c.args.iter().collect();
                match (head.as_str(), args.as_slice()) {
                    ("lanes", [n]) => {
                        let count = self.count(n)?;
                        let combine = match names.as_slice() {
                            ["strided", c] | [c] => Combine::from_name(c),
                            _ => None,
                        };
                        match combine {
                            Some(combine) => Ok(Schedule::Lanes { count, combine }),
                            None => Err(self.fail(e, format!("`lanes({count})` needs a combine: expected `lanes({count}).butterfly()`, `.pairwise()` or `.seq()` (optionally after `.strided()`), found `{}`", show(e)))),
                        }
                    }
                    ("chunked", [n]) => {
                        let size = self.count(n)?;
                        let combine = match names.as_slice() {
                            [] => Some(Combine::Sequential),
                            [c] => Combine::from_name(c),
                            _ => None,
                        };
                        match combine {
                            Some(combine) => Ok(Schedule::Chunked { size, combine }),
                            None => Err(expected(self, e)),
                        }
                    }
                    ("blocked", [n, inner]) if names.is_empty() => {
                        let block = self.count(n)?;
                        let across = self.schedule_syntax(inner)?;
                        Ok(Schedule::Blocked { block, across: Box::new(across) })
                    }
                    _ => Err(expected(self, e)),
                }
            }
            _ => Err(expected(self, e)),
        }
    }

    /// A count in an order: an integer literal.
    fn count(&mut self, n: &syn::Expr) -> R<u32> {
        match strip(n) {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => match i.base10_parse::<u32>() {
                Ok(v) => Ok(v),
                Err(_) => {
                    Err(self.fail(n, format!("count `{}`: expected an integer literal that fits in u32", show(n))))
                }
            },
            other => Err(self.fail(
                other,
                format!(
                    "count `{}`: expected an integer literal (orders are fixed when the kernel is written)",
                    show(other)
                ),
            )),
        }
    }
}
