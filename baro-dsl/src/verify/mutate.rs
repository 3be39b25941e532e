//! Mutation testing of the sibling check (issue item 10): systematic rewrites of a rows
//! kernel that change its floating-point arithmetic (every one must be rejected), rewrites
//! that preserve it exactly (every one must be accepted), and rewrites that only a model of
//! concurrency, full-size shapes or the memory-accumulation rule can tell apart (races,
//! changes on full lane blocks, full row tiles or the tail, accumulation through memory;
//! every one must be rejected).
//!
//! Each function returns new kernels and never changes its input. Test support: nothing in
//! the verification pipeline calls this module.

use super::ordinals::reduces;
use crate::ir::{BinOp, Buf, Const, Expr, Kernel, Reduce, ReduceOp, ScalarType, Stmt, Var};
use crate::schedule::{Combine, Schedule};
use std::collections::HashSet;

/// Sites of each preserving rewrite tried per kernel (they need a full check each).
const MAX_SITES: usize = 3;

fn children_mut(e: &mut Expr) -> Vec<&mut Expr> {
    match e {
        Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_) => Vec::new(),
        Expr::Load { index, .. } => vec![index],
        Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Call { arg, .. } => {
            vec![arg]
        }
        Expr::Binary { lhs, rhs, .. } => vec![lhs, rhs],
        Expr::Select { cond, then, els } => vec![cond, then, els],
        Expr::Fma { a, b, c } | Expr::Dot4 { a, b, c, .. } => vec![a, b, c],
        Expr::Let { value, body, .. } => vec![value, body],
        Expr::Reduce(r) => vec![&mut r.len, &mut r.body],
        Expr::ShuffleXor { value, .. } => vec![value],
    }
}

fn stmt_exprs_mut(s: &mut Stmt) -> Vec<&mut Expr> {
    match s {
        Stmt::Let { value, .. } | Stmt::Assign { value, .. } | Stmt::LetRows { value, .. } => vec![value],
        Stmt::Store { index, value, .. } => vec![index, value],
        Stmt::For { start, end, step, .. } => vec![start, end, step],
        Stmt::If { cond, .. } | Stmt::Check { cond, .. } => vec![cond],
        Stmt::ParFor { end, .. } => vec![end],
        Stmt::MmaI8(m) => m.exprs_mut().into(),
        Stmt::Lanes { .. } | Stmt::Barrier => Vec::new(),
    }
}

fn stmt_blocks_mut(s: &mut Stmt) -> Vec<&mut Vec<Stmt>> {
    match s {
        Stmt::For { body, .. } | Stmt::ParFor { body, .. } | Stmt::Lanes { body, .. } => vec![body],
        Stmt::If { then_body, else_body, .. } => vec![then_body, else_body],
        _ => Vec::new(),
    }
}

/// Calls `f` on every expression (pre-order) of every statement of `body`.
fn walk_exprs(body: &mut [Stmt], f: &mut dyn FnMut(&mut Expr)) {
    fn expr(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
        f(e);
        for c in children_mut(e) {
            expr(c, f);
        }
    }
    for s in body {
        for e in stmt_exprs_mut(s) {
            expr(e, f);
        }
        for b in stmt_blocks_mut(s) {
            walk_exprs(b, f);
        }
    }
}

/// Calls `f` on every block (pre-order), the kernel body first.
fn walk_blocks(body: &mut Vec<Stmt>, f: &mut dyn FnMut(&mut Vec<Stmt>)) {
    f(body);
    for s in body.iter_mut() {
        for b in stmt_blocks_mut(s) {
            walk_blocks(b, f);
        }
    }
}

/// For each expression site where `site` returns a mutation, a copy of `k` with it applied.
/// Given the kernel and an expression, the mutations of that expression (description, new expression).
type ExprSite<'a> = &'a dyn Fn(&Kernel, &Expr) -> Vec<(String, Expr)>;
/// Rewrites `block` at `pos` in place (adding variables to the kernel), returning a description.
type BlockSite<'a> = &'a dyn Fn(&mut Kernel, &mut Vec<Stmt>, usize) -> Option<String>;

fn expr_mutants(k: &Kernel, site: ExprSite) -> Vec<(String, Kernel)> {
    let mut scratch = k.clone();
    let mut found: Vec<(usize, String, Expr)> = Vec::new();
    let mut n = 0;
    walk_exprs(&mut scratch.body, &mut |e| {
        for (what, new) in site(k, e) {
            found.push((n, what, new));
        }
        n += 1;
    });
    found
        .into_iter()
        .map(|(at, what, new)| {
            let mut m = k.clone();
            let mut i = 0;
            let mut new = Some(new);
            walk_exprs(&mut m.body, &mut |e| {
                if i == at {
                    if let Some(x) = new.take() {
                        *e = x;
                    }
                }
                i += 1;
            });
            (what, m)
        })
        .collect()
}

fn is_float(k: &Kernel, e: &Expr) -> bool {
    k.type_of(e).is_ok_and(|t| t.is_float())
}

fn schedule_alternatives(s: &Schedule) -> Vec<Schedule> {
    let mut v = Vec::new();
    let combines = [Combine::Sequential, Combine::Butterfly, Combine::Pairwise];
    match s {
        Schedule::Lanes { count, combine } => {
            v.push(Schedule::lanes(count * 2, *combine));
            if *count >= 2 {
                v.push(Schedule::lanes(count / 2, *combine));
            }
            v.extend(combines.iter().filter(|c| *c != combine).map(|c| Schedule::lanes(*count, *c)));
        }
        Schedule::Chunked { size, combine } => {
            v.extend(combines.iter().filter(|c| *c != combine).map(|c| Schedule::Chunked { size: *size, combine: *c }));
        }
        _ => {}
    }
    v.push(Schedule::Sequential);
    v.push(Schedule::Chunked { size: 8, combine: Combine::Sequential });
    v.push(Schedule::Blocked { block: 4, across: Box::new(Schedule::Sequential) });
    v.retain(|x| x != s && x.validate().is_ok() && (1..=70).any(|k| x.expand(k) != s.expand(k)));
    v
}

/// Rewrites of `k` (a rows kernel) that change its arithmetic; each must be rejected.
pub fn reorderings(k: &Kernel) -> Vec<(String, Kernel)> {
    let mut out = expr_mutants(k, &|k, e| match e {
        Expr::Binary { op: op @ (BinOp::Add | BinOp::Mul), lhs, rhs } if lhs != rhs && is_float(k, e) => {
            vec![(
                format!("swap the operands of a float {}", op.name()),
                Expr::bin(*op, (**rhs).clone(), (**lhs).clone()),
            )]
        }
        _ => Vec::new(),
    });
    out.extend(expr_mutants(k, &|k, e| match e {
        Expr::Binary { op: op @ (BinOp::Add | BinOp::Mul), lhs, rhs } if is_float(k, e) => match &**lhs {
            Expr::Binary { op: inner, lhs: a, rhs: b } if inner == op => {
                let c = (**rhs).clone();
                vec![(
                    format!("reassociate a float {}", op.name()),
                    Expr::bin(*op, (**a).clone(), Expr::bin(*op, (**b).clone(), c)),
                )]
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }));
    out.extend(expr_mutants(k, &|k, e| match e {
        // fma is f32 only: an f16/bf16 multiply-add has no fused form to mutate into.
        Expr::Binary { op: BinOp::Add, lhs, rhs } if k.type_of(e) == Ok(ScalarType::F32) => match &**lhs {
            Expr::Binary { op: BinOp::Mul, lhs: a, rhs: b } => {
                vec![(
                    "contract a float multiply-add into an fma".to_string(),
                    Expr::fma((**a).clone(), (**b).clone(), (**rhs).clone()),
                )]
            }
            _ => Vec::new(),
        },
        Expr::Fma { a, b, c } => vec![(
            "split an fma into a multiply and an add".to_string(),
            Expr::bin(BinOp::Add, Expr::bin(BinOp::Mul, (**a).clone(), (**b).clone()), (**c).clone()),
        )],
        // An f32 sum of products and an `fma_sum` of the same products: never the same.
        Expr::Reduce(r)
            if r.ty == ScalarType::F32
                && matches!(r.body, Expr::Binary { op: BinOp::Mul, .. })
                && matches!(r.op, ReduceOp::Add | ReduceOp::FmaSum) =>
        {
            let (op, what) = if r.op == ReduceOp::Add {
                (ReduceOp::FmaSum, "fuse a sum of products into an fma_sum")
            } else {
                (ReduceOp::Add, "unfuse an fma_sum into a sum of products")
            };
            vec![(what.to_string(), Expr::Reduce(Box::new(Reduce { op, ..(**r).clone() })))]
        }
        _ => Vec::new(),
    }));
    out.extend(expr_mutants(k, &|_, e| match e {
        Expr::Reduce(r) => schedule_alternatives(&r.schedule)
            .into_iter()
            .map(|s| {
                let what = format!("reduction `{}` declared `{s}`", r.schedule);
                (what, Expr::Reduce(Box::new(Reduce { schedule: s, ..(**r).clone() })))
            })
            .collect(),
        _ => Vec::new(),
    }));
    out
}

/// Every variable read anywhere in `s`, and every variable `s` defines or assigns.
fn var_sets(s: &Stmt) -> (HashSet<Var>, HashSet<Var>) {
    let mut reads = HashSet::new();
    let mut writes = HashSet::new();
    let mut one = vec![s.clone()];
    walk_exprs(&mut one, &mut |e| match e {
        Expr::Var(v) => {
            reads.insert(*v);
        }
        Expr::Let { var, .. } => {
            writes.insert(*var);
        }
        Expr::Reduce(r) => {
            writes.insert(r.var);
        }
        _ => {}
    });
    fn defs(s: &mut Stmt, w: &mut HashSet<Var>) {
        match s {
            Stmt::Let { var, .. } | Stmt::Assign { var, .. } | Stmt::For { var, .. } | Stmt::ParFor { var, .. } => {
                w.insert(*var);
            }
            Stmt::LetRows { vars, row, .. } => {
                w.extend(vars.iter().copied());
                w.insert(*row);
            }
            Stmt::Lanes { lane, implements, .. } => {
                w.insert(*lane);
                if let Some(i) = implements {
                    w.extend(i.results.iter().copied());
                }
            }
            _ => {}
        }
        for b in stmt_blocks_mut(s) {
            for x in b.iter_mut() {
                defs(x, w);
            }
        }
    }
    defs(&mut one[0], &mut writes);
    (reads, writes)
}

/// Buffers `s` loads from and stores to.
fn buf_sets(s: &Stmt) -> (HashSet<Buf>, HashSet<Buf>) {
    let mut loads = HashSet::new();
    let mut stores = HashSet::new();
    let mut one = vec![s.clone()];
    walk_exprs(&mut one, &mut |e| {
        if let Expr::Load { buf, .. } = e {
            loads.insert(*buf);
        }
    });
    fn st(s: &Stmt, out: &mut HashSet<Buf>) {
        if let Stmt::Store { buf, .. } = s {
            out.insert(*buf);
        }
        for b in super::ordinals::stmt_blocks(s) {
            for x in b {
                st(x, out);
            }
        }
    }
    st(s, &mut stores);
    (loads, stores)
}

fn independent(a: &Stmt, b: &Stmt) -> bool {
    let barrier = |s: &Stmt| matches!(s, Stmt::Barrier | Stmt::Lanes { .. });
    if barrier(a) || barrier(b) {
        return false;
    }
    let has_reduce = |s: &Stmt| !reduces(&Kernel { body: vec![s.clone()], ..Kernel::new("") }).is_empty();
    if has_reduce(a) && has_reduce(b) {
        return false;
    }
    let (ra, wa) = var_sets(a);
    let (rb, wb) = var_sets(b);
    let (la, sa) = buf_sets(a);
    let (lb, sb) = buf_sets(b);
    wa.is_disjoint(&rb)
        && wa.is_disjoint(&wb)
        && wb.is_disjoint(&ra)
        && sa.is_disjoint(&lb)
        && sa.is_disjoint(&sb)
        && sb.is_disjoint(&la)
}

/// For each (block, position) where `site` rewrites the block, a copy of `k` with it applied.
fn block_mutants(k: &Kernel, site: BlockSite) -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    let mut n_blocks = 0;
    walk_blocks(&mut k.clone().body, &mut |_| n_blocks += 1);
    for bi in 0..n_blocks {
        let mut probe = k.clone();
        let mut len = 0;
        let mut j = 0;
        walk_blocks(&mut probe.body, &mut |b| {
            if j == bi {
                len = b.len();
            }
            j += 1;
        });
        for pos in 0..len {
            let mut m = k.clone();
            let mut body = std::mem::take(&mut m.body);
            let mut j = 0;
            let mut what = None;
            walk_blocks(&mut body, &mut |b| {
                if j == bi {
                    what = site(&mut m, b, pos);
                }
                j += 1;
            });
            m.body = body;
            if let Some(w) = what {
                out.push((w, m));
                if out.len() >= MAX_SITES {
                    return out;
                }
            }
        }
    }
    out
}

/// Replaces every use and definition of the variables in `map` inside `stmts`.
fn subst_vars(stmts: &mut [Stmt], map: &dyn Fn(Var) -> Option<Var>) {
    fn stmt(s: &mut Stmt, map: &dyn Fn(Var) -> Option<Var>) {
        match s {
            Stmt::Let { var, .. } | Stmt::Assign { var, .. } | Stmt::For { var, .. } | Stmt::ParFor { var, .. } => {
                if let Some(v) = map(*var) {
                    *var = v;
                }
            }
            Stmt::Lanes { lane, .. } => {
                if let Some(v) = map(*lane) {
                    *lane = v;
                }
            }
            _ => {}
        }
        for b in stmt_blocks_mut(s) {
            for x in b.iter_mut() {
                stmt(x, map);
            }
        }
    }
    walk_exprs(stmts, &mut |e| match e {
        Expr::Var(v) | Expr::Let { var: v, .. } => {
            if let Some(n) = map(*v) {
                *v = n;
            }
        }
        Expr::Reduce(r) => {
            if let Some(n) = map(r.var) {
                r.var = n;
            }
        }
        _ => {}
    });
    for s in stmts {
        stmt(s, map);
    }
}

fn fresh(k: &mut Kernel, v: Var, suffix: &str) -> Var {
    let d = k.var(v).clone();
    k.add_var(format!("{}_{suffix}", d.name), d.ty, d.mutable)
}

/// Variables defined anywhere in `body` (statements and expressions) and variables assigned.
fn defined_and_assigned(body: &[Stmt]) -> (HashSet<Var>, HashSet<Var>) {
    let (mut defined, mut assigned) = (HashSet::new(), HashSet::new());
    fn walk(b: &[Stmt], d: &mut HashSet<Var>, a: &mut HashSet<Var>) {
        for s in b {
            match s {
                Stmt::Let { var, .. } | Stmt::For { var, .. } | Stmt::ParFor { var, .. } => {
                    d.insert(*var);
                }
                Stmt::Lanes { lane, .. } => {
                    d.insert(*lane);
                }
                Stmt::Assign { var, .. } => {
                    a.insert(*var);
                }
                _ => {}
            }
            for blk in super::ordinals::stmt_blocks(s) {
                walk(blk, d, a);
            }
        }
    }
    walk(body, &mut defined, &mut assigned);
    walk_exprs(&mut body.to_vec(), &mut |e| match e {
        Expr::Let { var, .. } => {
            defined.insert(*var);
        }
        Expr::Reduce(r) => {
            defined.insert(r.var);
        }
        _ => {}
    });
    (defined, assigned)
}

/// Rewrites of `k` that keep its arithmetic exactly; each must be accepted.
pub fn preserving_rewrites(k: &Kernel) -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    let mut renamed = k.clone();
    for (i, d) in renamed.vars.iter_mut().enumerate() {
        d.name = format!("{}_renamed{i}", d.name);
    }
    out.push(("rename every variable".to_string(), renamed));
    out.extend(block_mutants(k, &|_, b, pos| {
        (pos + 1 < b.len() && independent(&b[pos], &b[pos + 1])).then(|| {
            b.swap(pos, pos + 1);
            format!("swap independent statements {pos} and {}", pos + 1)
        })
    }));
    out.extend(block_mutants(k, &|k, b, pos| {
        let Stmt::For { var, start, end, step, body } = b[pos].clone() else { return None };
        let (var, start, end, step, body) = (&var, &start, &end, &step, &body);
        if *step != Expr::index(1) {
            return None;
        }
        let (mut inner_set, assigned) = defined_and_assigned(body);
        inner_set.insert(*var);
        if !assigned.is_subset(&inner_set) {
            return None;
        }
        let ty = k.var(*var).ty;
        let mid = k.add_var("mid", ty, false);
        let mut renames: Vec<(Var, Var)> = Vec::new();
        let mut inner: Vec<Var> = inner_set.into_iter().collect();
        inner.sort();
        for v in &inner {
            renames.push((*v, fresh(k, *v, "split")));
        }
        let mut second = body.clone();
        subst_vars(&mut second, &|v| renames.iter().find(|(a, _)| *a == v).map(|(_, b)| *b));
        let var2 = renames.iter().find(|(a, _)| a == var).map_or(*var, |(_, b)| *b);
        let hi = Expr::bin(BinOp::Max, end.clone(), start.clone());
        let mid_value = Expr::bin(
            BinOp::Add,
            start.clone(),
            Expr::bin(BinOp::Div, Expr::bin(BinOp::Sub, hi, start.clone()), Expr::c(Const::new(ty, 2))),
        );
        let first =
            Stmt::For { var: *var, start: start.clone(), end: Expr::Var(mid), step: step.clone(), body: body.clone() };
        let second = Stmt::For { var: var2, start: Expr::Var(mid), end: end.clone(), step: step.clone(), body: second };
        b.splice(pos..=pos, [Stmt::Let { var: mid, value: mid_value }, first, second]);
        Some(format!("split loop `{}` at its midpoint", k.var(*var).name))
    }));
    out.extend(block_mutants(k, &|_, b, pos| {
        if matches!(b[pos], Stmt::Let { .. } | Stmt::LetRows { .. }) {
            return None;
        }
        let s = b[pos].clone();
        b[pos] = Stmt::If { cond: Expr::c(Const::bool(true)), then_body: vec![s], else_body: Vec::new() };
        Some(format!("wrap statement {pos} in `if true`"))
    }));
    out.extend(block_mutants(k, &|k, b, pos| {
        let Stmt::Let { var, value } = &b[pos] else { return None };
        if k.var(*var).mutable || value.any(&|e| matches!(e, Expr::Reduce(_) | Expr::ShuffleXor { .. })) {
            return None;
        }
        let (var, value) = (*var, value.clone());
        let copy = fresh(k, var, "dup");
        subst_vars(&mut b[pos + 1..], &|v| (v == var).then_some(copy));
        b.insert(pos + 1, Stmt::Let { var: copy, value });
        Some(format!("duplicate `let {}` and use the copy", k.var(var).name))
    }));
    out
}

/// Replaces the `n`th store (pre-order) of `body` by what `f` makes of it; whether it did.
fn replace_store(body: &mut Vec<Stmt>, n: &mut usize, f: &mut dyn FnMut(Stmt) -> Vec<Stmt>) -> bool {
    let mut i = 0;
    while i < body.len() {
        if let Stmt::Store { .. } = body[i] {
            if *n == 0 {
                let s = body.remove(i);
                let new = f(s);
                for (j, x) in new.into_iter().enumerate() {
                    body.insert(i + j, x);
                }
                return true;
            }
            *n -= 1;
        }
        for b in stmt_blocks_mut(&mut body[i]) {
            if replace_store(b, n, f) {
                return true;
            }
        }
        i += 1;
    }
    false
}

fn count_stores(body: &[Stmt]) -> usize {
    body.iter()
        .map(|s| {
            usize::from(matches!(s, Stmt::Store { .. }))
                + super::ordinals::stmt_blocks(s).iter().map(|b| count_stores(b)).sum::<usize>()
        })
        .sum()
}

/// Rewrites one store (adding variables to the kernel): a description and what replaces it.
type StoreSite<'a> = &'a dyn Fn(&mut Kernel, Stmt) -> Option<(String, Vec<Stmt>)>;

/// For every store of `k`, the kernel with `f` applied to it (`None`: that store is left out).
fn store_mutants(k: &Kernel, f: StoreSite) -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    for at in 0..count_stores(&k.body) {
        let mut m = k.clone();
        let mut body = std::mem::take(&mut m.body);
        let mut what = None;
        let mut n = at;
        replace_store(&mut body, &mut n, &mut |s| match f(&mut m, s.clone()) {
            Some((w, new)) => {
                what = Some(w);
                new
            }
            None => vec![s],
        });
        m.body = body;
        if let Some(w) = what {
            out.push((w, m));
        }
    }
    out
}

/// The first float `+`/`*` with distinct operands in `e` (pre-order), its operands swapped
/// where `cond` holds: a change of order that only shows on shapes where `cond` is true.
fn swap_where(k: &Kernel, e: &Expr, cond: &Expr) -> Option<Expr> {
    let mut done = false;
    let mut out = e.clone();
    fn go(k: &Kernel, e: &mut Expr, cond: &Expr, done: &mut bool) {
        if *done {
            return;
        }
        let float = is_float(k, e);
        if let Expr::Binary { op: op @ (BinOp::Add | BinOp::Mul), lhs, rhs } = &*e {
            if lhs != rhs && float {
                let swapped = Expr::bin(*op, (**rhs).clone(), (**lhs).clone());
                *e = Expr::Select { cond: Box::new(cond.clone()), then: Box::new(swapped), els: Box::new(e.clone()) };
                *done = true;
                return;
            }
        }
        for c in children_mut(e) {
            go(k, c, cond, done);
        }
    }
    go(k, &mut out, cond, &mut done);
    done.then_some(out)
}

/// The constant c of a grid axis `(p + c − 1) / c` over the sibling's rows parameter: the
/// row tile.
fn row_tile(k: &Kernel) -> Option<u64> {
    let rows = k.sibling.as_ref()?.rows;
    k.grid.iter().find_map(|g| match g {
        Expr::Binary { op: BinOp::Div, lhs, rhs } => match (&**lhs, &**rhs) {
            (Expr::Binary { op: BinOp::Add, lhs: p, .. }, Expr::Const(c)) if **p == Expr::Param(rows) && c.bits > 1 => {
                Some(c.bits)
            }
            _ => None,
        },
        _ => None,
    })
}

/// Rewrites of `k` (a rows kernel) that keep every final value the same when the kernel is
/// run one unit after another on the old default shapes, but change what a GPU computes or
/// what a full-size shape computes; each must be rejected. By class (the first word):
/// - `race`: a store repeated by two `par` iterations, or every workgroup doubled (two
///   workgroups write each element);
/// - `full-block`: an operand swap in a lane-parallel reduction only when its length is a
///   multiple of the lane count;
/// - `full-tile`: an operand swap in a store's value only when the row count fills the row
///   tile;
/// - `tail`: an operand swap only when the row count is a full tile plus a partial one;
/// - `memory`: a stored float reduction rewritten as accumulation into the output element.
pub fn concurrency_and_shape_mutants(k: &Kernel) -> Vec<(String, Kernel)> {
    let mut out = store_mutants(k, &|m, s| {
        let Stmt::Store { buf, index, value } = s else { return None };
        let ty = m.buf_elem(buf)?;
        let tmp = m.add_var("race_value", ty, false);
        let d = m.add_var("race_dup", crate::ir::ScalarType::INDEX, false);
        Some((
            "race: a store repeated by two par iterations".to_string(),
            vec![
                Stmt::Let { var: tmp, value },
                Stmt::ParFor {
                    var: d,
                    end: Expr::index(2),
                    team: None,
                    body: vec![Stmt::Store { buf, index, value: Expr::Var(tmp) }],
                },
            ],
        ))
    });
    if !k.grid.is_empty() {
        let mut m = k.clone();
        m.grid[0] = Expr::bin(BinOp::Mul, m.grid[0].clone(), Expr::index(2));
        // A marker first (walk_exprs descends into what `f` made), then the real division.
        let marker = Expr::GroupId(u8::MAX);
        walk_exprs(&mut m.body, &mut |e| {
            if *e == Expr::GroupId(0) {
                *e = marker.clone();
            }
        });
        walk_exprs(&mut m.body, &mut |e| {
            if *e == marker {
                *e = Expr::bin(BinOp::Div, Expr::GroupId(0), Expr::index(2));
            }
        });
        out.push(("race: every workgroup doubled along axis 0".to_string(), m));
    }
    out.extend(expr_mutants(k, &|k, e| match e {
        Expr::Reduce(r) => {
            let lanes = match &r.schedule {
                Schedule::Lanes { count, .. } if *count > 1 => *count as u64,
                _ => return Vec::new(),
            };
            let cond = Expr::bin(BinOp::Eq, Expr::bin(BinOp::Rem, r.len.clone(), Expr::index(lanes)), Expr::index(0));
            match swap_where(k, &r.body, &cond) {
                Some(body) => vec![(
                    format!("full-block: operands swapped only when the length is a multiple of {lanes}"),
                    Expr::Reduce(Box::new(Reduce { body, ..(**r).clone() })),
                )],
                None => Vec::new(),
            }
        }
        _ => Vec::new(),
    }));
    if let (Some(t), Some(sib)) = (row_tile(k), &k.sibling) {
        let rows = Expr::Param(sib.rows);
        let rem = Expr::bin(BinOp::Rem, rows.clone(), Expr::index(t));
        let full = Expr::bin(BinOp::Eq, rem.clone(), Expr::index(0));
        let tail = Expr::bin(
            BinOp::And,
            Expr::bin(BinOp::Gt, rows, Expr::index(t)),
            Expr::bin(BinOp::Ne, rem, Expr::index(0)),
        );
        for (class, cond) in [("full-tile", full), ("tail", tail)] {
            out.extend(store_mutants(k, &|m, s| {
                let Stmt::Store { buf, index, value } = s else { return None };
                let value = swap_where(m, &value, &cond)?;
                let when = if class == "tail" {
                    format!("a full tile of {t} plus a partial one")
                } else {
                    format!("a multiple of the tile, {t}")
                };
                Some((
                    format!("{class}: operands swapped only when the row count is {when}"),
                    vec![Stmt::Store { buf, index, value }],
                ))
            }));
        }
    }
    out.extend(store_mutants(k, &|m, s| {
        let Stmt::Store { buf, index, value: Expr::Reduce(r) } = s else { return None };
        if !r.ty.is_float() || r.op != crate::ir::ReduceOp::Add {
            return None;
        }
        let zero = Expr::Const(crate::lanes::identity(r.op, r.ty));
        let acc = Expr::bin(BinOp::Add, Expr::load(buf, index.clone()), r.body.clone());
        let _ = m; // the loop reuses the reduction's variable: nothing new to declare
        Some((
            format!("memory: `{}` sum rewritten as accumulation into the output element", r.schedule),
            vec![
                Stmt::Store { buf, index: index.clone(), value: zero },
                Stmt::For {
                    var: r.var,
                    start: Expr::index(0),
                    end: r.len.clone(),
                    step: Expr::index(1),
                    body: vec![Stmt::Store { buf, index, value: acc }],
                },
            ],
        ))
    }));
    out
}
