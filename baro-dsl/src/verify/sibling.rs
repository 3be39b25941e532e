//! The rows-vs-m=1 sibling check: row `r` of a rows kernel must compute exactly (same DAG,
//! same operand order) what its m=1 kernel computes on row `r`.
//!
//! First the declared schedules are compared (the rows kernel may repeat the m=1 sequence of
//! reductions, e.g. once per row statement); then both kernels are executed for every default
//! shape of the rows kernel in one DAG arena, the m=1 kernel once per row with its row-strided
//! buffers offset by `r * stride`, and every written element is compared by node identity.
//! Both kernels run as written (reductions built from their schedule trees): `verify_kernel`
//! separately proves the expanded code computes those trees. Every reduction of the rows
//! kernel must have run with enough elements for its order to matter on some shape
//! (`coverage`), or the check fails (`Invalid`, kind `Vacuous`) instead of passing on an empty
//! comparison. A rows kernel's `check!(a == b)` on two input elements (`ids[r0 + r] ==
//! ids[r0]`: a tile of rows shares one expert) is a precondition of every launch that
//! succeeds, so both kernels run with those elements read as one leaf (`check_aliases`): the
//! proof holds under the checked precondition, and a launch that breaks it fails. Nothing
//! here changes a kernel.

use super::coverage::Coverage;
use super::dag::{Dag, Name, Node, NodeId, Op};
use super::ordinals::reduces;
use super::report::{ErrorKind, Location, Mismatch, SiblingError, SiblingProof, VerifyError};
use super::shapes::{default_shapes, each_shape};
use super::symbolic::{eval_uniform, execute, Run, RunConfig, Value, Written};
use super::wellformed;
use crate::ir::{Access, BinOp, Kernel, ParamId, ParamKind, Reduce, ReduceOp, Sibling};
use crate::schedule::Schedule;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Checks that `rows` is an order-preserving sibling of `m1`: declaration, schedules, then
/// arithmetic on every default shape.
pub fn check_sibling(rows: &Kernel, m1: &Kernel) -> Result<SiblingProof, SiblingError> {
    preconditions(rows, m1)?;
    check_schedules(rows, m1)?;
    arithmetic(rows, m1)
}

/// The arithmetic comparison alone, skipping the schedule-level check (used to show that a
/// reordering the schedule check already rejects also changes the computed expressions).
pub fn compare_rows_arithmetic(rows: &Kernel, m1: &Kernel) -> Result<SiblingProof, SiblingError> {
    preconditions(rows, m1)?;
    arithmetic(rows, m1)
}

fn invalid(k: &Kernel, message: String) -> SiblingError {
    SiblingError::Invalid(vec![VerifyError {
        kernel: k.name.clone(),
        location: Location::default(),
        kind: ErrorKind::Malformed,
        message,
    }])
}

fn preconditions(rows: &Kernel, m1: &Kernel) -> Result<(), SiblingError> {
    let Some(sib) = &rows.sibling else {
        return Err(invalid(
            rows,
            format!("kernel `{}` declares no sibling: expected `sibling of {}`", rows.name, m1.name),
        ));
    };
    if sib.of != m1.name {
        return Err(invalid(
            rows,
            format!("kernel `{}` is declared a sibling of `{}`, checked against `{}`", rows.name, sib.of, m1.name),
        ));
    }
    let mut errs = wellformed::check(rows, true);
    errs.extend(wellformed::check(m1, true));
    for p in &m1.params {
        let found = rows.params.iter().find(|q| q.name == p.name);
        let ok = match (found.map(|q| &q.kind), &p.kind) {
            (Some(ParamKind::Buffer { elem: a, .. }), ParamKind::Buffer { elem: b, .. }) => a == b,
            (Some(a), b) => a == b,
            (None, _) => false,
        };
        if !ok {
            errs.push(VerifyError {
                kernel: rows.name.clone(),
                location: Location::default(),
                kind: ErrorKind::Malformed,
                message: format!(
                    "parameter `{}` of `{}` has no parameter of the same name and kind in the rows kernel",
                    p.name, m1.name
                ),
            });
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(SiblingError::Invalid(errs))
    }
}

/// How two schedules differ, in words ("lane count 64 here, 32 in `matvec`").
fn schedule_difference(a: &Schedule, b: &Schedule, m1: &str) -> Option<String> {
    use Schedule as S;
    match (a, b) {
        _ if a == b => None,
        (S::Lanes { count: c1, combine: k1 }, S::Lanes { count: c2, combine: k2 }) => Some(if c1 != c2 {
            format!("lane count {c1} here, {c2} in `{m1}`")
        } else {
            format!("combine `{}` here, `{}` in `{m1}`", k1.name(), k2.name())
        }),
        (S::Chunked { size: s1, combine: k1 }, S::Chunked { size: s2, combine: k2 }) => Some(if s1 != s2 {
            format!("chunk size {s1} here, {s2} in `{m1}`")
        } else {
            format!("combine `{}` here, `{}` in `{m1}`", k1.name(), k2.name())
        }),
        (S::Blocked { block: b1, across: x1 }, S::Blocked { block: b2, across: x2 }) => {
            if b1 != b2 {
                Some(format!("block size {b1} here, {b2} in `{m1}`"))
            } else {
                schedule_difference(x1, x2, m1).map(|d| format!("across blocks: {d}"))
            }
        }
        _ => Some(format!("`{a}` here, `{b}` in `{m1}`")),
    }
}

fn reduce_difference(a: &Reduce, b: &Reduce, m1: &str) -> Option<String> {
    if a.op != b.op {
        return Some(format!("`{}` here, `{}` in `{m1}`", a.op.name(), b.op.name()));
    }
    if a.ty != b.ty {
        return Some(format!("type {} here, {} in `{m1}`", a.ty, b.ty));
    }
    schedule_difference(&a.schedule, &b.schedule, m1)
}

/// Whether `body` holds a matrix step (`Stmt::MmaI8`).
fn has_mma(body: &[crate::ir::Stmt]) -> bool {
    body.iter().any(|s| {
        matches!(s, crate::ir::Stmt::MmaI8(_)) || super::ordinals::stmt_blocks(s).into_iter().any(|b| has_mma(b))
    })
}

fn check_schedules(rows: &Kernel, m1: &Kernel) -> Result<(), SiblingError> {
    // A rows kernel's matrix step stands in for the m = 1 kernel's order-free integer sums
    // (each element of the step is such a sum, `symbolic::mma_i8`): those have no order to
    // compare, so they leave both lists, and the arithmetic check compares their values.
    let steps = has_mma(&rows.body);
    let keep = |x: &&Reduce| !(steps && x.schedule == Schedule::Any && x.ty.is_int() && x.op == ReduceOp::Add);
    let r: Vec<&Reduce> = reduces(rows).into_iter().filter(keep).collect();
    let m: Vec<&Reduce> = reduces(m1).into_iter().filter(keep).collect();
    if m.is_empty() {
        return match r.first() {
            None => Ok(()),
            Some(x) => Err(SiblingError::Schedule {
                reduce: 0,
                rows_schedule: x.schedule.to_string(),
                m1_schedule: "none".to_string(),
                detail: format!("the rows kernel has {} reductions, `{}` has none", r.len(), m1.name),
            }),
        };
    }
    for (i, a) in r.iter().enumerate() {
        let b = m[i % m.len()];
        if let Some(detail) = reduce_difference(a, b, &m1.name) {
            return Err(SiblingError::Schedule {
                reduce: i as u32,
                rows_schedule: a.schedule.to_string(),
                m1_schedule: b.schedule.to_string(),
                detail,
            });
        }
    }
    if !r.len().is_multiple_of(m.len()) || r.is_empty() {
        let at = (r.len() / m.len()) * m.len();
        return Err(SiblingError::Schedule {
            reduce: at as u32,
            rows_schedule: r.get(at).map_or_else(|| "none".to_string(), |x| x.schedule.to_string()),
            m1_schedule: m[at % m.len()].schedule.to_string(),
            detail: format!(
                "the rows kernel has {} reductions, `{}` has {}: expected a whole number of repetitions",
                r.len(),
                m1.name,
                m.len()
            ),
        });
    }
    Ok(())
}

/// A race on carried state says so: the rows must step it one after another.
fn carry_note(mut e: VerifyError, carried: &[String]) -> VerifyError {
    if e.kind == ErrorKind::Race {
        if let Some(name) = carried.iter().find(|n| e.message.starts_with(&format!("race on {n}["))) {
            e.message = format!("{}; `{name}` is carried state (`carry({name})`): rows must step it one after another, in one unit, never in concurrent ones", e.message);
        }
    }
    e
}

fn as_invalid(e: VerifyError) -> SiblingError {
    SiblingError::Invalid(vec![e])
}

/// The reduction (ordinal in the rows kernel) the first difference sits in, if any: the
/// deepest reduction value on the path from the stored node down to the difference.
fn reduce_at(dag: &Dag, run: &Run, root: NodeId, other: NodeId) -> Option<u32> {
    let mut found = run.reduce_of.get(&root).copied();
    if let Some((path, _, _)) = dag.first_difference(other, root) {
        let mut n = root;
        for i in path {
            match dag.node(n).children().nth(i) {
                Some(c) => n = c,
                None => break,
            }
            if let Some(r) = run.reduce_of.get(&n) {
                found = Some(*r);
            }
        }
    }
    found
}

/// The counterexample for output `buf[index]` (row `row`): `want` is the m=1 kernel's node,
/// `got` what the rows kernel stored there, if anything.
#[allow(clippy::too_many_arguments)]
fn mismatch(
    dag: &Dag,
    rows_run: &Run,
    shape: Vec<(String, u64)>,
    buf: String,
    row: u64,
    index: u64,
    m1_index: u64,
    want: NodeId,
    got: Option<&Written>,
) -> SiblingError {
    let (rows_expr, first_difference, location) = match got {
        Some(g) => (
            dag.show(g.node, 16),
            dag.describe_difference(want, g.node, "m=1", "rows"),
            Location { stmt_path: Vec::new(), reduce: reduce_at(dag, rows_run, g.node, want), store: Some(g.store) },
        ),
        None => {
            ("(not written)".to_string(), format!("the rows kernel never writes {buf}[{index}]"), Location::default())
        }
    };
    SiblingError::Arithmetic(Box::new(Mismatch {
        shape,
        buffer: buf,
        row,
        index,
        m1_index,
        m1_expr: dag.show(want, 16),
        rows_expr,
        first_difference,
        location,
    }))
}

/// The input elements that the rows kernel's `check!`s make equal: every checked condition
/// that is `a == b` of two initial elements of one read-only buffer joins their classes, and
/// each element of a class maps to the class's lowest index.
fn check_aliases(rows: &Kernel, dag: &Dag, checks: &[NodeId]) -> HashMap<(Name, u64), u64> {
    fn root(parent: &HashMap<(Name, u64), u64>, buf: Name, mut i: u64) -> u64 {
        while let Some(&p) = parent.get(&(buf, i)) {
            i = p;
        }
        i
    }
    let read_only = |buf: Name| {
        rows.params
            .iter()
            .any(|p| p.name == dag.name_str(buf) && matches!(p.kind, ParamKind::Buffer { access: Access::Read, .. }))
    };
    let mut parent: HashMap<(Name, u64), u64> = HashMap::new();
    for &n in checks {
        let Node::Op { op: Op::Bin(BinOp::Eq), args, .. } = dag.node(n) else { continue };
        let (Node::Leaf { buf: a, index: i }, Node::Leaf { buf: b, index: j }) = (dag.node(args[0]), dag.node(args[1]))
        else {
            continue;
        };
        if a != b || !read_only(*a) {
            continue;
        }
        let (ri, rj) = (root(&parent, *a, *i), root(&parent, *a, *j));
        if ri != rj {
            parent.insert((*a, ri.max(rj)), ri.min(rj));
        }
    }
    parent.keys().map(|&(buf, i)| ((buf, i), root(&parent, buf, i))).collect()
}

fn arithmetic(rows: &Kernel, m1: &Kernel) -> Result<SiblingProof, SiblingError> {
    let Some(sib) = &rows.sibling else {
        return Err(invalid(rows, "no sibling declared".to_string()));
    };
    let shapes = default_shapes(rows);
    let mut outputs = 0;
    let mut coverage = Coverage::default();
    // Each shape is an execution of its own (its own DAG); they run side by side and are read
    // back in shape order, so the error reported is the first shape's, as one after another.
    for result in each_shape(&shapes, |shape| arithmetic_shape(rows, m1, sib, shape)) {
        let (n, c) = result?;
        outputs += n;
        coverage.merge(c);
    }
    coverage.check(rows, &shapes).map_err(SiblingError::Invalid)?;
    Ok(SiblingProof { shapes: shapes.len(), outputs })
}

/// One shape of `arithmetic`: the rows kernel's run against `m1` row by row. The number of
/// outputs compared and the reductions' coverage of this shape.
fn arithmetic_shape(
    rows: &Kernel,
    m1: &Kernel,
    sib: &Sibling,
    shape: &[(ParamId, u64)],
) -> Result<(usize, Coverage), SiblingError> {
    let shape_named: Vec<(String, u64)> = shape.iter().map(|(p, v)| (rows.param(*p).name.clone(), *v)).collect();
    let n_rows = shape.iter().find(|(p, _)| *p == sib.rows).map_or(1, |(_, v)| *v);
    let m1_base: Vec<(ParamId, u64)> =
        shape.iter().filter_map(|(p, v)| m1.param_by_name(&rows.param(*p).name).map(|q| (q, *v))).collect();
    let mut strides: Vec<(ParamId, u64)> = Vec::new();
    for (p, e) in &sib.row_strides {
        let s = eval_uniform(rows, shape, e).map_err(as_invalid)?;
        if let Some(q) = m1.param_by_name(&rows.param(*p).name) {
            strides.push((q, s));
        }
    }
    let mut steps: Vec<(ParamId, u64)> = Vec::new();
    for (p, e) in &sib.row_steps {
        let s = eval_uniform(rows, shape, e).map_err(as_invalid)?;
        if let Some(q) = m1.param_by_name(&rows.param(*p).name) {
            steps.push((q, s));
        }
    }
    let mut dag = Dag::new();
    let carried: HashSet<Name> = sib.carried.iter().map(|p| dag.name(&rows.param(*p).name)).collect();
    let cfg = RunConfig::shape(shape, true);
    let carried_names: Vec<String> = sib.carried.iter().map(|p| rows.param(*p).name.clone()).collect();
    let first = execute(rows, &mut dag, &cfg).map_err(|e| as_invalid(carry_note(e, &carried_names)))?;
    // The rows kernel's `check!` equalities hold in every launch that succeeds: both runs
    // read one leaf for the elements they make equal, so the comparison is the proof under
    // that precondition (and without a check, elements stay distinct).
    let aliases = check_aliases(rows, &dag, &first.checks);
    let rows_run = if aliases.is_empty() {
        first
    } else {
        execute(rows, &mut dag, &RunConfig { aliases: Some(&aliases), ..cfg }).map_err(as_invalid)?
    };
    let mut covered = HashSet::new();
    // The state the next row starts from, and where each carried element was last written.
    let mut state: HashMap<(Name, u64), Value> = HashMap::new();
    let mut carried_final: BTreeMap<(Name, u64), (u64, NodeId)> = BTreeMap::new();
    for r in 0..n_rows {
        let offsets: Vec<(ParamId, u64)> = strides.iter().map(|(q, s)| (*q, r.wrapping_mul(*s))).collect();
        let m1_scalars: Vec<(ParamId, u64)> = m1_base
            .iter()
            .map(|&(q, v)| {
                (q, steps.iter().find(|(p, _)| *p == q).map_or(v, |(_, s)| v.wrapping_add(r.wrapping_mul(*s))))
            })
            .collect();
        let memory = (!carried.is_empty()).then_some(&state);
        let cfg = RunConfig {
            scalars: &m1_scalars,
            offsets: &offsets,
            check_implements: false,
            memory,
            check_races: true,
            aliases: (!aliases.is_empty()).then_some(&aliases),
        };
        let m1_run = execute(m1, &mut dag, &cfg).map_err(as_invalid)?;
        for (key, want) in &m1_run.outputs {
            covered.insert(*key);
            if carried.contains(&key.0) {
                carried_final.insert(*key, (r, want.node));
                continue;
            }
            let buf = dag.name_str(key.0).to_string();
            let off = m1.param_by_name(&buf).and_then(|q| offsets.iter().find(|(p, _)| *p == q)).map_or(0, |(_, o)| *o);
            let got = rows_run.outputs.get(key);
            if got.is_some_and(|g| g.node == want.node) {
                continue;
            }
            return Err(mismatch(&dag, &rows_run, shape_named, buf, r, key.1, key.1.wrapping_sub(off), want.node, got));
        }
        state = m1_run.memory.into_iter().filter(|(k, _)| carried.contains(&k.0)).collect();
    }
    for (key, (r, want)) in &carried_final {
        let got = rows_run.outputs.get(key);
        if got.is_some_and(|g| g.node == *want) {
            continue;
        }
        let buf = dag.name_str(key.0).to_string();
        return Err(mismatch(&dag, &rows_run, shape_named, buf, *r, key.1, key.1, *want, got));
    }
    if let Some((key, got)) = rows_run.outputs.iter().find(|(k, _)| !covered.contains(*k)) {
        let buf = dag.name_str(key.0).to_string();
        let stride = m1.param_by_name(&buf).and_then(|q| strides.iter().find(|(p, _)| *p == q)).map_or(0, |(_, s)| *s);
        let row = key.1.checked_div(stride).unwrap_or(0);
        return Err(SiblingError::Arithmetic(Box::new(Mismatch {
            shape: shape_named,
            buffer: buf.clone(),
            row,
            index: key.1,
            m1_index: key.1.wrapping_sub(row * stride),
            m1_expr: "(not written)".to_string(),
            rows_expr: dag.show(got.node, 16),
            first_difference: format!("the rows kernel writes {buf}[{}], which no row of `{}` writes", key.1, m1.name),
            location: Location { stmt_path: Vec::new(), reduce: None, store: Some(got.store) },
        })));
    }
    let mut coverage = Coverage::default();
    coverage.add(&rows_run);
    Ok((rows_run.outputs.len(), coverage))
}
