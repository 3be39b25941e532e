//! The elements of a reduction over rows (`Stmt::LetRows`): for the current index, the
//! body once per row j, with everything that does not read the row computed once.
//!
//! The body is split where it starts to depend on the row: a sub-expression that does not
//! (a weight load, its unpacking, a block scale) becomes one `let` per element, shared by
//! every row; the rest is written once per row with the row replaced by the constant j. A
//! nested reduction that reads the row becomes a reduction over rows itself (one loop, one
//! partial per row). Nothing is reordered: each row's element is the same expression the
//! one-row reduction evaluates, only its shared parts are named once. Arms of a select are
//! never hoisted (an arm may load out of bounds where its condition is false): they are
//! written per row, their `let`s renamed per row so every variable keeps one definition.

use super::{Cx, ExpandError};
use crate::ir::{BinOp, Const, Expr, ReduceOp, Stmt, Var};
use std::collections::HashMap;

/// A sub-expression of the body: the same for every row, or one expression per row.
enum RowValue {
    Shared(Expr),
    PerRow(Vec<Expr>),
}

struct Rows {
    row: Var,
    n: usize,
    /// `let`s of the body whose value depends on the row: their variable per row.
    per_row: HashMap<Var, Vec<Expr>>,
    /// Where the per-row statements go when each row's update runs under its own guard (an
    /// element past some rows' lengths): one list per row. `None`: into the element's code.
    guarded: Option<Vec<Vec<Stmt>>>,
}

impl Rows {
    fn depends(&self, e: &Expr) -> bool {
        e.any(&|x| matches!(x, Expr::Var(v) if *v == self.row || self.per_row.contains_key(v)))
    }
}

fn trivial(e: &Expr) -> bool {
    matches!(e, Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_))
}

/// Arithmetic on leaves only (no load, reduction, shuffle or call): written out per row
/// rather than bound to a `let`. The lowering's CSE computes it once all the same, and an
/// index left whole keeps its form `a + c·i` in the loop variable, which the GPU lowering
/// needs to take the access out of the loop's bounds checks (a `let` defined in the loop
/// reads as a value the loop changes).
fn arithmetic(e: &Expr) -> bool {
    !e.any(&|x| {
        matches!(
            x,
            Expr::Load { .. } | Expr::Reduce(_) | Expr::ShuffleXor { .. } | Expr::Call { .. } | Expr::Let { .. }
        )
    })
}

impl Cx<'_> {
    /// The element of each of the `n` partials for the current index: the body itself (its
    /// reductions hoisted into `out`) without a row; with one, the body of row j for each j,
    /// its row-independent parts computed once into `out`. For an `fma_sum` each element is
    /// a product `a_j * b_j`.
    pub(super) fn items(
        &mut self,
        body: Expr,
        op: ReduceOp,
        row: Option<Var>,
        n: usize,
        out: &mut Vec<Stmt>,
    ) -> Result<Vec<Expr>, ExpandError> {
        let Some(row) = row else { return Ok(vec![self.expr(body, out)?]) };
        let mut rx = Rows { row, n, per_row: HashMap::new(), guarded: None };
        self.row_items(&mut rx, body, op, out)
    }

    /// `items` for an element that some rows do not reach (their length ends before it): the
    /// row-independent parts once into `out` (the longest row evaluates them here too), and
    /// for each row j, the statements its element needs, to run under that row's guard, and
    /// its element. A reduction in the body that reads the row is refused: it would run for
    /// every row, past the lengths of some.
    pub(super) fn items_guarded(
        &mut self,
        body: Expr,
        op: ReduceOp,
        row: Var,
        n: usize,
        out: &mut Vec<Stmt>,
    ) -> Result<(Vec<Expr>, Vec<Vec<Stmt>>), ExpandError> {
        let mut rx = Rows { row, n, per_row: HashMap::new(), guarded: Some(vec![Vec::new(); n]) };
        let items = self.row_items(&mut rx, body, op, out)?;
        Ok((items, rx.guarded.unwrap_or_default()))
    }

    /// The length of each row of a reduction over rows whose length reads the row (the row
    /// replaced by j); `None` when the length is the same for every row.
    pub(super) fn row_lengths(&mut self, len: &Expr, row: Var, n: usize) -> Result<Option<Vec<Expr>>, ExpandError> {
        if !len.any(&|x| matches!(x, Expr::Var(v) if *v == row)) {
            return Ok(None);
        }
        let rx = Rows { row, n, per_row: HashMap::new(), guarded: None };
        (0..n).map(|j| self.instance(&rx, len, j, &mut HashMap::new())).collect::<Result<Vec<_>, _>>().map(Some)
    }

    fn row_items(
        &mut self,
        rx: &mut Rows,
        body: Expr,
        op: ReduceOp,
        out: &mut Vec<Stmt>,
    ) -> Result<Vec<Expr>, ExpandError> {
        let n = rx.n;
        if op != ReduceOp::FmaSum {
            let v = self.row_value(rx, body, out)?;
            return self.per_row(v, n, out);
        }
        let mut e = body;
        while let Expr::Let { var, value, body } = e {
            self.row_let(rx, var, *value, out)?;
            e = *body;
        }
        let Expr::Binary { op: BinOp::Mul, lhs, rhs } = e else {
            return self
                .err(format!("an `fma_sum` element must be a product `a * b`, found `{}`", self.k.expr_text(&e)));
        };
        let a = self.row_value(rx, *lhs, out)?;
        let a = self.per_row(a, n, out)?;
        let b = self.row_value(rx, *rhs, out)?;
        let b = self.per_row(b, n, out)?;
        Ok(a.into_iter().zip(b).map(|(a, b)| Expr::bin(BinOp::Mul, a, b)).collect())
    }

    /// One expression per row; a shared value that is not a leaf is bound once to a `let`.
    fn per_row(&mut self, v: RowValue, n: usize, out: &mut Vec<Stmt>) -> Result<Vec<Expr>, ExpandError> {
        match v {
            RowValue::PerRow(xs) => Ok(xs),
            RowValue::Shared(e) if trivial(&e) || arithmetic(&e) => Ok(vec![e; n]),
            RowValue::Shared(e) => {
                let ty = match self.k.type_of(&e) {
                    Ok(t) => t,
                    Err(te) => return self.err(format!("in a reduction over rows: {te}")),
                };
                let t = self.k.add_var("shared", ty, false);
                out.push(Stmt::Let { var: t, value: e });
                Ok(vec![Expr::Var(t); n])
            }
        }
    }

    /// A `let` of the body: once if its value does not depend on the row, else once per row.
    fn row_let(&mut self, rx: &mut Rows, var: Var, value: Expr, out: &mut Vec<Stmt>) -> Result<(), ExpandError> {
        match self.row_value(rx, value, out)? {
            RowValue::Shared(x) => out.push(Stmt::Let { var, value: x }),
            RowValue::PerRow(xs) => {
                let decl = self.k.var(var).clone();
                let mut vars = Vec::with_capacity(xs.len());
                for (j, x) in xs.into_iter().enumerate() {
                    let v = self.k.add_var(format!("{}_r{j}", decl.name), decl.ty, false);
                    let stmt = Stmt::Let { var: v, value: x };
                    match &mut rx.guarded {
                        Some(g) => g[j].push(stmt),
                        None => out.push(stmt),
                    }
                    vars.push(Expr::Var(v));
                }
                rx.per_row.insert(var, vars);
            }
        }
        Ok(())
    }

    fn row_value(&mut self, rx: &mut Rows, e: Expr, out: &mut Vec<Stmt>) -> Result<RowValue, ExpandError> {
        if !rx.depends(&e) {
            return Ok(RowValue::Shared(self.expr(e, out)?));
        }
        let n = rx.n;
        let one = |cx: &mut Self, rx: &mut Rows, x: Expr, out: &mut Vec<Stmt>| -> Result<Vec<Expr>, ExpandError> {
            let v = cx.row_value(rx, x, out)?;
            cx.per_row(v, n, out)
        };
        let rows = match e {
            Expr::Var(v) if v == rx.row => (0..n).map(|j| Expr::c(Const::index(j as u64))).collect(),
            Expr::Var(v) => rx.per_row[&v].clone(),
            Expr::Let { var, value, body } => {
                self.row_let(rx, var, *value, out)?;
                return self.row_value(rx, *body, out);
            }
            Expr::Reduce(r) if rx.guarded.is_some() => {
                return self.err(format!(
                    "`{}` reads the row inside a reduction over rows whose length depends on the row: expected a body whose reductions do not read the row",
                    self.k.expr_text(&Expr::Reduce(r))
                ))
            }
            Expr::Reduce(r) => {
                let reds: Vec<Var> = (0..n).map(|_| self.k.add_var("red", r.ty, true)).collect();
                self.reduce(*r, Some(rx.row), &reds, out)?;
                reds.into_iter().map(Expr::Var).collect()
            }
            Expr::Select { cond, then, els } => {
                let c = one(self, rx, *cond, out)?;
                let mut rows = Vec::with_capacity(n);
                for (j, c) in c.into_iter().enumerate() {
                    let t = self.instance(rx, &then, j, &mut HashMap::new())?;
                    let f = self.instance(rx, &els, j, &mut HashMap::new())?;
                    rows.push(Expr::select(c, t, f));
                }
                rows
            }
            Expr::Load { buf, index } => one(self, rx, *index, out)?.into_iter().map(|i| Expr::load(buf, i)).collect(),
            Expr::Unary { op, arg } => one(self, rx, *arg, out)?.into_iter().map(|a| Expr::un(op, a)).collect(),
            Expr::Cast { to, arg } => one(self, rx, *arg, out)?.into_iter().map(|a| Expr::cast(to, a)).collect(),
            Expr::Bitcast { to, arg } => one(self, rx, *arg, out)?.into_iter().map(|a| Expr::bitcast(to, a)).collect(),
            Expr::Call { func, arg } => one(self, rx, *arg, out)?.into_iter().map(|a| Expr::call(func, a)).collect(),
            Expr::Binary { op, lhs, rhs } => {
                let a = one(self, rx, *lhs, out)?;
                let b = one(self, rx, *rhs, out)?;
                a.into_iter().zip(b).map(|(a, b)| Expr::bin(op, a, b)).collect()
            }
            Expr::Fma { a, b, c } => {
                let (a, b, c) = (one(self, rx, *a, out)?, one(self, rx, *b, out)?, one(self, rx, *c, out)?);
                a.into_iter().zip(b).zip(c).map(|((a, b), c)| Expr::fma(a, b, c)).collect()
            }
            Expr::Dot4 { kind, a, b, c } => {
                let (a, b, c) = (one(self, rx, *a, out)?, one(self, rx, *b, out)?, one(self, rx, *c, out)?);
                a.into_iter().zip(b).zip(c).map(|((a, b), c)| Expr::dot4(kind, a, b, c)).collect()
            }
            other => {
                return self.err(format!("`{}` in a reduction over rows: expected source IR", self.k.expr_text(&other)))
            }
        };
        Ok(RowValue::PerRow(rows))
    }

    /// `e` for row `j`, written out whole (an arm of a select: nothing hoisted), each `let`
    /// renamed for the row (`renamed` holds the renames in scope).
    fn instance(
        &mut self,
        rx: &Rows,
        e: &Expr,
        j: usize,
        renamed: &mut HashMap<Var, Var>,
    ) -> Result<Expr, ExpandError> {
        let sub = |cx: &mut Self, x: &Expr, renamed: &mut HashMap<Var, Var>| cx.instance(rx, x, j, renamed);
        Ok(match e {
            Expr::Var(v) if *v == rx.row => Expr::c(Const::index(j as u64)),
            Expr::Var(v) => match (renamed.get(v), rx.per_row.get(v)) {
                (Some(r), _) => Expr::Var(*r),
                (None, Some(xs)) => xs[j].clone(),
                (None, None) => e.clone(),
            },
            Expr::Const(_) | Expr::Param(_) | Expr::GroupId(_) => e.clone(),
            Expr::Let { var, value, body } => {
                let value = sub(self, value, renamed)?;
                let decl = self.k.var(*var).clone();
                let fresh = self.k.add_var(format!("{}_r{j}", decl.name), decl.ty, false);
                let was = renamed.insert(*var, fresh);
                let body = sub(self, body, renamed);
                match was {
                    Some(w) => renamed.insert(*var, w),
                    None => renamed.remove(var),
                };
                Expr::let_in(fresh, value, body?)
            }
            Expr::Load { buf, index } => Expr::load(*buf, sub(self, index, renamed)?),
            Expr::Unary { op, arg } => Expr::un(*op, sub(self, arg, renamed)?),
            Expr::Cast { to, arg } => Expr::cast(*to, sub(self, arg, renamed)?),
            Expr::Bitcast { to, arg } => Expr::bitcast(*to, sub(self, arg, renamed)?),
            Expr::Call { func, arg } => Expr::call(*func, sub(self, arg, renamed)?),
            Expr::Binary { op, lhs, rhs } => {
                let a = sub(self, lhs, renamed)?;
                Expr::bin(*op, a, sub(self, rhs, renamed)?)
            }
            Expr::Select { cond, then, els } => {
                let c = sub(self, cond, renamed)?;
                let t = sub(self, then, renamed)?;
                Expr::select(c, t, sub(self, els, renamed)?)
            }
            Expr::Fma { a, b, c } => {
                let (a, b) = (sub(self, a, renamed)?, sub(self, b, renamed)?);
                Expr::fma(a, b, sub(self, c, renamed)?)
            }
            Expr::Dot4 { kind, a, b, c } => {
                let (a, b) = (sub(self, a, renamed)?, sub(self, b, renamed)?);
                Expr::dot4(*kind, a, b, sub(self, c, renamed)?)
            }
            Expr::Reduce(_) | Expr::ShuffleXor { .. } => {
                return self.err(format!(
                    "`{}` inside an `if` whose condition depends on the row of a reduction over rows: bind the reduction with `let` before the `if`",
                    self.k.expr_text(e)
                ))
            }
        })
    }
}
