//! Expansion of reductions into explicit code: `Expr::Reduce` becomes sequential loops and
//! `Stmt::Lanes` SIMT regions with xor shuffles, exactly as the declared schedule says (an
//! order-free `any`, proven the same in every order, gets the tree chosen here, recorded in
//! its region like a declared one).
//!
//! Every lowering consumes only expanded IR, and the verifier executes the expanded IR and
//! checks it against the schedule each region `implements`. This pass never reorders
//! anything a kernel author wrote; it only makes the declared order explicit.

use crate::ir::{BinOp, Const, Expr, Implements, Kernel, Reduce, ReduceOp, ScalarType, Stmt, Var};
use crate::schedule::{Combine, Schedule};

mod rows;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}`: {message}")]
pub struct ExpandError {
    pub kernel: String,
    pub message: String,
}

/// The starting value of every partial of `op` over `ty`: `+0.0`/0 for sums, −∞/MIN for
/// max, +∞/MAX for min.
pub fn identity(op: ReduceOp, ty: ScalarType) -> Const {
    use ScalarType as T;
    match op {
        ReduceOp::Add | ReduceOp::FmaSum => Const::zero(ty),
        ReduceOp::Max => match ty {
            T::F32 => Const::f32(f32::NEG_INFINITY),
            T::F16 => Const::new(ty, 0xfc00),
            T::BF16 => Const::new(ty, 0xff80),
            t if t.is_signed() => Const::new(t, 1u64 << (t.bits() - 1)),
            t => Const::zero(t),
        },
        ReduceOp::Min => match ty {
            T::F32 => Const::f32(f32::INFINITY),
            T::F16 => Const::new(ty, 0x7c00),
            T::BF16 => Const::new(ty, 0x7f80),
            t if t.is_signed() => Const::new(t, (1u64 << (t.bits() - 1)) - 1),
            t => Const::new(t, u64::MAX),
        },
    }
}

/// Lanes an order-free reduction (`Schedule::Any`) in uniform code is spread over: the
/// narrowest wave of the supported targets, so the region is one wave or part of one on every
/// target. Any count gives the same value; this one is a speed choice.
const ANY_LANES: u32 = 32;

/// An order-free reduction at most this long (by its length's range) stays a sequential
/// loop: a lane region's shuffles would cost more than they save.
const ANY_SEQUENTIAL_MAX: i128 = 64;

/// Returns a copy of `kernel` with every reduction expanded. Idempotent on expanded IR.
pub fn expand(kernel: &Kernel) -> Result<Kernel, ExpandError> {
    let mut k = kernel.clone();
    let body = std::mem::take(&mut k.body);
    let mut cx = Cx { k: &mut k, in_lanes: false, in_par: None };
    let body = cx.block(body)?;
    k.body = body;
    Ok(k)
}

struct Cx<'a> {
    k: &'a mut Kernel,
    in_lanes: bool,
    /// Inside a `par` loop: its team (`None` inside a loop without one).
    in_par: Option<Option<u32>>,
}

impl Cx<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, ExpandError> {
        Err(ExpandError { kernel: self.k.name.clone(), message: message.into() })
    }

    fn block(&mut self, stmts: Vec<Stmt>) -> Result<Vec<Stmt>, ExpandError> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            self.stmt(s, &mut out)?;
        }
        Ok(out)
    }

    /// Expands one statement, appending hoisted reductions and the statement to `out`.
    fn stmt(&mut self, s: Stmt, out: &mut Vec<Stmt>) -> Result<(), ExpandError> {
        let s = match s {
            Stmt::Let { var, value } => Stmt::Let { var, value: self.expr(value, out)? },
            Stmt::LetRows { vars, row, value } => {
                let Expr::Reduce(r) = value else {
                    return self.err(format!(
                        "the value of a `let [..] = rows(..)` is `{}`: expected a reduction",
                        self.k.expr_text(&value)
                    ));
                };
                let ty = r.ty;
                let reds: Vec<Var> = vars.iter().map(|_| self.k.add_var("red", ty, true)).collect();
                self.reduce(*r, Some(row), &reds, out)?;
                for (v, red) in vars.into_iter().zip(reds) {
                    out.push(Stmt::Let { var: v, value: Expr::Var(red) });
                }
                return Ok(());
            }
            Stmt::Assign { var, value } => Stmt::Assign { var, value: self.expr(value, out)? },
            Stmt::Store { buf, index, value } => {
                let index = self.expr(index, out)?;
                Stmt::Store { buf, index, value: self.expr(value, out)? }
            }
            Stmt::For { var, start, end, step, body } => {
                let start = self.expr(start, out)?;
                let end = self.expr(end, out)?;
                let step = self.expr(step, out)?;
                Stmt::For { var, start, end, step, body: self.block(body)? }
            }
            Stmt::If { cond, then_body, else_body } => {
                let cond = self.expr(cond, out)?;
                Stmt::If { cond, then_body: self.block(then_body)?, else_body: self.block(else_body)? }
            }
            Stmt::ParFor { var, end, team, body } => {
                let end = self.expr(end, out)?;
                let was = std::mem::replace(&mut self.in_par, Some(team));
                let body = self.block(body);
                self.in_par = was;
                Stmt::ParFor { var, end, team, body: body? }
            }
            Stmt::Lanes { lane, count, implements, body } => {
                let was = std::mem::replace(&mut self.in_lanes, true);
                let body = self.block(body);
                self.in_lanes = was;
                Stmt::Lanes { lane, count, implements, body: body? }
            }
            Stmt::Barrier => Stmt::Barrier,
            Stmt::Check { id, cond } => Stmt::Check { id, cond: self.expr(cond, out)? },
            Stmt::MmaI8(m) => Stmt::MmaI8(Box::new(m.map_exprs(|e| self.expr(e, out))?)),
        };
        out.push(s);
        Ok(())
    }

    /// Rewrites `e`, hoisting each reduction in it into statements appended to `out` and
    /// replacing it by the variable holding its result.
    fn expr(&mut self, e: Expr, out: &mut Vec<Stmt>) -> Result<Expr, ExpandError> {
        if !e.any(&|x| matches!(x, Expr::Reduce(_))) {
            return Ok(e);
        }
        Ok(match e {
            Expr::Reduce(r) => {
                let result = self.k.add_var("red", r.ty, true);
                self.reduce(*r, None, &[result], out)?;
                Expr::Var(result)
            }
            Expr::Let { .. } => {
                return self.err(
                    "a reduction inside a `let` expression cannot be expanded: bind it with a `let` statement first",
                )
            }
            Expr::Load { buf, index } => Expr::load(buf, self.expr(*index, out)?),
            Expr::Unary { op, arg } => Expr::un(op, self.expr(*arg, out)?),
            Expr::Binary { op, lhs, rhs } => {
                let l = self.expr(*lhs, out)?;
                Expr::bin(op, l, self.expr(*rhs, out)?)
            }
            Expr::Select { cond, then, els } => {
                let c = self.expr(*cond, out)?;
                let t = self.expr(*then, out)?;
                Expr::select(c, t, self.expr(*els, out)?)
            }
            Expr::Fma { a, b, c } => {
                let a = self.expr(*a, out)?;
                let b = self.expr(*b, out)?;
                Expr::fma(a, b, self.expr(*c, out)?)
            }
            Expr::Dot4 { kind, a, b, c } => {
                let a = self.expr(*a, out)?;
                let b = self.expr(*b, out)?;
                Expr::dot4(kind, a, b, self.expr(*c, out)?)
            }
            Expr::Cast { to, arg } => Expr::cast(to, self.expr(*arg, out)?),
            Expr::Bitcast { to, arg } => Expr::bitcast(to, self.expr(*arg, out)?),
            Expr::Call { func, arg } => Expr::call(func, self.expr(*arg, out)?),
            Expr::ShuffleXor { value, mask } => Expr::ShuffleXor { value: Box::new(self.expr(*value, out)?), mask },
            leaf => leaf,
        })
    }

    /// The update of the partial `acc` by one element `item`: `acc op item`, or for an
    /// `FmaSum` `fma(a, b, acc)` of the product `item = a * b`, whose expression `let`s
    /// become statements in `out` (the element's own bindings, just before its update).
    fn accumulate(&self, op: ReduceOp, acc: Var, item: Expr, out: &mut Vec<Stmt>) -> Result<Expr, ExpandError> {
        if op != ReduceOp::FmaSum {
            return Ok(Expr::bin(op.bin_op(), Expr::Var(acc), item));
        }
        match item {
            Expr::Binary { op: BinOp::Mul, lhs, rhs } => Ok(Expr::fma(*lhs, *rhs, Expr::Var(acc))),
            Expr::Let { var, value, body } => {
                out.push(Stmt::Let { var, value: *value });
                self.accumulate(op, acc, *body, out)
            }
            other => self
                .err(format!("an `fma_sum` element must be a product `a * b`, found `{}`", self.k.expr_text(&other))),
        }
    }

    /// Emits statements that leave `op` over the reduction in `results[0]`, or, for a
    /// reduction over rows (`row` set), the reduction with `row` = j in `results[j]`: one
    /// loop over the elements updating one partial per row, each partial's operations in
    /// exactly its declared order.
    fn reduce(&mut self, r: Reduce, row: Option<Var>, results: &[Var], out: &mut Vec<Stmt>) -> Result<(), ExpandError> {
        if let Err(e) = r.schedule.validate() {
            return self.err(e.to_string());
        }
        let zero = Expr::Const(identity(r.op, r.ty));
        let per_row_len = row.is_some_and(|row| r.len.any(&|x| matches!(x, Expr::Var(v) if *v == row)));
        if per_row_len && !matches!(r.schedule, Schedule::Sequential | Schedule::Lanes { .. } | Schedule::Any) {
            return self.err(format!(
                "a reduction over rows whose length depends on the row, in order `{}`: expected `seq` or `lanes(..)`, whose rows can share one loop over the elements and each stop at its own length",
                r.schedule
            ));
        }
        match r.schedule.clone() {
            Schedule::Any => {
                // Every order gives one value here (the verifier proved it), so this picks the
                // fastest tree it can: lanes where the sum is long and lanes are free (uniform
                // code, or a `par` team), a sequential loop otherwise. The region records the
                // tree it chose; the verifier checks the code against that tree.
                let short = crate::verify::range::Ranges::of(self.k).expr(&r.len).hi <= ANY_SEQUENTIAL_MAX;
                let schedule = match (self.in_lanes, self.in_par) {
                    (false, None) if !short => Schedule::lanes(ANY_LANES, Combine::Butterfly),
                    (false, Some(Some(team))) if !short => Schedule::lanes(team, Combine::Butterfly),
                    _ => Schedule::Sequential,
                };
                self.reduce(Reduce { schedule, ..r }, row, results, out)?;
            }
            Schedule::Sequential => {
                for &result in results {
                    out.push(Stmt::Let { var: result, value: zero.clone() });
                }
                self.element_loops(&r, row, results, Expr::index(0), 1, out)?;
            }
            Schedule::Chunked { size, combine } => {
                if combine != Combine::Sequential {
                    return self.err(format!(
                        "schedule `{}` is not lowered yet: a chunked reduction combines its chunks sequentially (`chunked({size}, seq)`)",
                        r.schedule
                    ));
                }
                // chunk j: c = (0 + a[j*size]) + ...; total = c0, then total = total + c_j.
                let len = self.k.add_var("len", ScalarType::INDEX, false);
                out.push(Stmt::Let { var: len, value: r.len.clone() });
                for &result in results {
                    out.push(Stmt::Let { var: result, value: zero.clone() });
                }
                let j = self.k.add_var("chunk", ScalarType::INDEX, false);
                let parts: Vec<Var> = results.iter().map(|_| self.k.add_var("part", r.ty, true)).collect();
                let size_e = Expr::index(size as u64);
                let n_chunks = Expr::bin(
                    BinOp::Max,
                    Expr::bin(
                        BinOp::Div,
                        Expr::bin(BinOp::Add, Expr::Var(len), Expr::index(size as u64 - 1)),
                        size_e.clone(),
                    ),
                    Expr::index(1),
                );
                let mut inner = Vec::new();
                self.update(&r, row, &parts, &mut inner)?;
                let chunk_start = Expr::bin(BinOp::Mul, Expr::Var(j), size_e.clone());
                let chunk_end =
                    Expr::bin(BinOp::Min, Expr::bin(BinOp::Add, chunk_start.clone(), size_e), Expr::Var(len));
                let mut body: Vec<Stmt> = parts.iter().map(|&c| Stmt::Let { var: c, value: zero.clone() }).collect();
                body.push(Stmt::For {
                    var: r.var,
                    start: chunk_start,
                    end: chunk_end,
                    step: Expr::index(1),
                    body: inner,
                });
                body.push(Stmt::If {
                    cond: Expr::bin(BinOp::Eq, Expr::Var(j), Expr::index(0)),
                    then_body: results
                        .iter()
                        .zip(&parts)
                        .map(|(&res, &c)| Stmt::Assign { var: res, value: Expr::Var(c) })
                        .collect(),
                    else_body: results
                        .iter()
                        .zip(&parts)
                        .map(|(&res, &c)| Stmt::Assign {
                            var: res,
                            value: Expr::bin(r.op.bin_op(), Expr::Var(res), Expr::Var(c)),
                        })
                        .collect(),
                });
                out.push(Stmt::For { var: j, start: Expr::index(0), end: n_chunks, step: Expr::index(1), body });
            }
            Schedule::Blocked { block, across } => {
                // A reduction over blocks (by `across`) of sequential per-block reductions.
                // Over rows, the per-block reduction reads the row too and becomes one over
                // rows itself (`rows::items`), so a block's weights are unpacked once.
                let b = self.k.add_var("block", ScalarType::INDEX, false);
                let jv = self.k.add_var("in_block", ScalarType::INDEX, false);
                let bsz = Expr::index(block as u64);
                let start = Expr::bin(BinOp::Mul, Expr::Var(b), bsz.clone());
                let end = Expr::bin(BinOp::Min, Expr::bin(BinOp::Add, start.clone(), bsz.clone()), r.len.clone());
                let inner = Reduce {
                    op: r.op,
                    ty: r.ty,
                    schedule: Schedule::Sequential,
                    var: jv,
                    len: Expr::bin(BinOp::Sub, end, start.clone()),
                    body: Expr::let_in(r.var, Expr::bin(BinOp::Add, start, Expr::Var(jv)), r.body),
                };
                let n_blocks = Expr::bin(BinOp::Div, Expr::bin(BinOp::Add, r.len, Expr::index(block as u64 - 1)), bsz);
                // Block sums are combined by additions; only elements are fused into partials.
                let across_op = if r.op == ReduceOp::FmaSum { ReduceOp::Add } else { r.op };
                let outer = Reduce {
                    op: across_op,
                    ty: r.ty,
                    schedule: *across,
                    var: b,
                    len: n_blocks,
                    body: Expr::Reduce(Box::new(inner)),
                };
                self.reduce(outer, row, results, out)?;
            }
            Schedule::Lanes { count, combine } => {
                if self.in_lanes {
                    return self.err(format!(
                        "a `{}` reduction inside another lane-parallel reduction: inner reductions must be sequential, chunked or blocked over a sequential schedule",
                        r.schedule
                    ));
                }
                match self.in_par {
                    Some(None) => {
                        return self.err(format!(
                            "a `{}` reduction inside a `par` loop whose iterations have one lane each: give the loop a team of {count} lanes (`par_team(0..n, {count})`)",
                            r.schedule
                        ))
                    }
                    Some(Some(team)) if team != count => {
                        return self.err(format!("a `{}` reduction inside a `par` loop of teams of {team} lanes: expected the team's lane count, {team}", r.schedule))
                    }
                    _ => {}
                }
                for &result in results {
                    out.push(Stmt::Let { var: result, value: zero.clone() });
                }
                let lane = self.k.add_var("lane", ScalarType::INDEX, false);
                let parts: Vec<Var> = results.iter().map(|_| self.k.add_var("partial", r.ty, true)).collect();
                let mut body: Vec<Stmt> = parts.iter().map(|&p| Stmt::Let { var: p, value: zero.clone() }).collect();
                let was = std::mem::replace(&mut self.in_lanes, true);
                let looped = self.element_loops(&r, row, &parts, Expr::Var(lane), count, &mut body);
                self.in_lanes = was;
                looped?;
                let shuffle = |p: Var, m: u32| Expr::ShuffleXor { value: Box::new(Expr::Var(p)), mask: m };
                let op = r.op.bin_op();
                let masks: Vec<u32> = match combine {
                    Combine::Butterfly => {
                        std::iter::successors(Some(count / 2), |m| Some(m / 2)).take_while(|&m| m > 0).collect()
                    }
                    Combine::Pairwise => {
                        std::iter::successors(Some(1u32), |m| Some(m * 2)).take_while(|&m| m < count).collect()
                    }
                    Combine::Sequential => Vec::new(),
                };
                let lane0 = Expr::bin(BinOp::Eq, Expr::Var(lane), Expr::index(0));
                // Each row's partials are combined in the declared order; the rows' steps are
                // interleaved (independent, so their latencies overlap).
                let finals = if combine == Combine::Sequential {
                    // Lane 0 reads lane j's partial through mask j, in lane order.
                    let qs: Vec<Var> = results.iter().map(|_| self.k.add_var("combined", r.ty, true)).collect();
                    for (&q, &p) in qs.iter().zip(&parts) {
                        body.push(Stmt::Let { var: q, value: Expr::Var(p) });
                    }
                    for j in 1..count {
                        for (&q, &p) in qs.iter().zip(&parts) {
                            body.push(Stmt::Assign { var: q, value: Expr::bin(op, Expr::Var(q), shuffle(p, j)) });
                        }
                    }
                    qs
                } else {
                    for m in masks {
                        for &p in &parts {
                            body.push(Stmt::Assign { var: p, value: Expr::bin(op, Expr::Var(p), shuffle(p, m)) });
                        }
                    }
                    parts
                };
                let then_body = results
                    .iter()
                    .zip(&finals)
                    .map(|(&res, &q)| Stmt::Assign { var: res, value: Expr::Var(q) })
                    .collect();
                body.push(Stmt::If { cond: lane0, then_body, else_body: vec![] });
                let implements = Implements { results: results.to_vec(), row, reduce: Box::new(r) };
                out.push(Stmt::Lanes { lane, count, implements: Some(implements), body });
            }
        }
        Ok(())
    }

    /// Appends to `out` the loop over the elements, `for i in (start..len).step_by(step)`,
    /// updating `parts`. Over rows whose lengths differ (the length reads the row), two loops
    /// continuing one progression of indices: below the shortest row's length every row
    /// takes every element; from there to the longest row's, row j's update runs under `if i
    /// < len_j`. So each row's partial takes exactly its own elements, in increasing order,
    /// which is its one-row reduction's order (the same elements, for `lanes`, per lane).
    fn element_loops(
        &mut self,
        r: &Reduce,
        row: Option<Var>,
        parts: &[Var],
        start: Expr,
        step: u32,
        out: &mut Vec<Stmt>,
    ) -> Result<(), ExpandError> {
        let step_e = Expr::index(step as u64);
        let lens = match row {
            Some(row) => self.row_lengths(&r.len, row, parts.len())?,
            None => None,
        };
        let (Some(row), Some(lens)) = (row, lens) else {
            let mut body = Vec::new();
            self.update(r, row, parts, &mut body)?;
            out.push(Stmt::For { var: r.var, start, end: r.len.clone(), step: step_e, body });
            return Ok(());
        };
        let bound = |cx: &mut Self, name: &str, value: Expr, out: &mut Vec<Stmt>| {
            let v = cx.k.add_var(name, ScalarType::INDEX, false);
            out.push(Stmt::Let { var: v, value });
            Expr::Var(v)
        };
        let lens: Vec<Expr> = lens.into_iter().map(|l| bound(self, "row_len", l, out)).collect();
        let fold = |op| lens.iter().cloned().reduce(|a, b| Expr::bin(op, a, b)).unwrap_or(Expr::index(0));
        let (shortest, longest) = (fold(BinOp::Min), fold(BinOp::Max));
        let shortest = bound(self, "shortest", shortest, out);
        let longest = bound(self, "longest", longest, out);
        let mut body = Vec::new();
        self.update(r, Some(row), parts, &mut body)?;
        out.push(Stmt::For { var: r.var, start: start.clone(), end: shortest.clone(), step: step_e.clone(), body });
        // The first index of the progression at or past the shortest length.
        let from = Expr::bin(BinOp::Max, shortest, start.clone());
        let tail_start = if step == 1 {
            from
        } else {
            let ahead = Expr::bin(BinOp::Sub, from, start.clone());
            let steps =
                Expr::bin(BinOp::Div, Expr::bin(BinOp::Add, ahead, Expr::index(step as u64 - 1)), step_e.clone());
            Expr::bin(BinOp::Add, start, Expr::bin(BinOp::Mul, steps, step_e.clone()))
        };
        // The second loop is a copy of the element: its variables are renamed, each defined once.
        let tail = self.renamed(r);
        let mut body = Vec::new();
        let (items, guarded) = self.items_guarded(tail.body.clone(), tail.op, row, parts.len(), &mut body)?;
        for ((&p, item), (len, mut then_body)) in parts.iter().zip(items).zip(lens.into_iter().zip(guarded)) {
            let value = self.accumulate(tail.op, p, item, &mut then_body)?;
            then_body.push(Stmt::Assign { var: p, value });
            let cond = Expr::bin(BinOp::Lt, Expr::Var(tail.var), len);
            body.push(Stmt::If { cond, then_body, else_body: vec![] });
        }
        out.push(Stmt::For { var: tail.var, start: tail_start, end: longest, step: step_e, body });
        Ok(())
    }

    /// `r` with a fresh element variable, and fresh variables for the `let`s and reductions
    /// of its body.
    fn renamed(&mut self, r: &Reduce) -> Reduce {
        let mut map = std::collections::HashMap::new();
        let var = self.fresh_like(r.var);
        map.insert(r.var, var);
        let mut body = r.body.clone();
        self.rename_bound(&mut body, &mut map);
        Reduce { var, body, ..r.clone() }
    }

    fn fresh_like(&mut self, v: Var) -> Var {
        let d = self.k.var(v).clone();
        self.k.add_var(d.name, d.ty, d.mutable)
    }

    fn rename_bound(&mut self, e: &mut Expr, map: &mut std::collections::HashMap<Var, Var>) {
        let scoped = |cx: &mut Self, var: &mut Var, body: &mut Expr, map: &mut std::collections::HashMap<Var, Var>| {
            let fresh = cx.fresh_like(*var);
            let was = map.insert(*var, fresh);
            cx.rename_bound(body, map);
            match was {
                Some(w) => map.insert(*var, w),
                None => map.remove(var),
            };
            *var = fresh;
        };
        match e {
            Expr::Var(v) => {
                if let Some(n) = map.get(v) {
                    *v = *n;
                }
            }
            Expr::Let { var, value, body } => {
                self.rename_bound(value, map);
                scoped(self, var, body, map);
            }
            Expr::Reduce(r) => {
                self.rename_bound(&mut r.len, map);
                let Reduce { var, body, .. } = &mut **r;
                scoped(self, var, body, map);
            }
            _ => e.for_each_child_mut(|c| self.rename_bound(c, map)),
        }
    }

    /// Appends to `body` the update of each partial in `parts` by the current element (the
    /// element of its row, for a reduction over rows).
    fn update(&mut self, r: &Reduce, row: Option<Var>, parts: &[Var], body: &mut Vec<Stmt>) -> Result<(), ExpandError> {
        let items = self.items(r.body.clone(), r.op, row, parts.len(), body)?;
        for (&p, item) in parts.iter().zip(items) {
            let value = self.accumulate(r.op, p, item, body)?;
            body.push(Stmt::Assign { var: p, value });
        }
        Ok(())
    }
}
