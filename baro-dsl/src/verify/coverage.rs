//! The guard against vacuous proofs: after a kernel has been executed for every shape, each
//! reduction must have run at least once with enough elements for its declared order to
//! matter, or the check compared nothing that depends on that order.
//!
//! Enough is 2 elements, and for a `lanes(L)` schedule more than L (every lane's partial is
//! non-empty, lane 0's holds two elements, and the combine adds several non-empty
//! partials); likewise more than one chunk for `chunked(size)` and more than one block for
//! `blocked(block, ..)`. A reduction whose length is a constant (no parameter reaches it) is
//! exempt once it has run: every launch then has the length that was checked. Every arm of
//! every `if` inside a reduction body must also have been taken by some shape (an arm never
//! taken was never compared). This module reads execution results and reports; it executes
//! nothing.

use super::lengths::{feeds, merge, Definitions, Feeds};
use super::ordinals::{children, reduces};
use super::report::{ErrorKind, Location, VerifyError};
use super::symbolic::Run;
use crate::ir::{Expr, Kernel, ParamId};
use crate::schedule::Schedule;
use std::collections::{HashMap, HashSet};

/// The longest length each reduction (by ordinal) ran with, over every run so far.
#[derive(Default)]
pub struct Coverage {
    longest: Vec<Option<u64>>,
    /// Arms taken by the `if`s of reduction bodies (see `Run::branches`).
    branches: HashMap<usize, u8>,
}

/// The `if`s (`Expr::Select`) inside `e`, in pre-order.
fn selects<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    if let Expr::Select { .. } = e {
        out.push(e);
    }
    for c in children(e) {
        selects(c, out);
    }
}

/// The smallest length that exercises `s`'s order, and why, in words.
fn needed(s: &Schedule) -> (u64, String) {
    match s {
        Schedule::Lanes { count, .. } if *count > 1 => (
            *count as u64 + 1,
            format!("it has more than {count} elements, so every lane's partial is non-empty and several are combined"),
        ),
        Schedule::Chunked { size, .. } if *size > 1 => {
            (*size as u64 + 1, format!("it has more than {size} elements, so several chunks are combined"))
        }
        Schedule::Blocked { block, .. } if *block > 1 => {
            (*block as u64 + 1, format!("it has more than {block} elements, so several blocks are combined"))
        }
        _ => (2, "it has at least 2 elements".to_string()),
    }
}

fn param_name(k: &Kernel, p: ParamId) -> &str {
    k.params.get(p.index()).map_or("?", |x| x.name.as_str())
}

/// `k ∈ {1, 3}, n ∈ {1, 3}`: the values each parameter took over `shapes`.
fn shapes_text(k: &Kernel, shapes: &[Vec<(ParamId, u64)>]) -> String {
    let mut axes: Vec<(ParamId, Vec<u64>)> = Vec::new();
    for (p, v) in shapes.iter().flatten() {
        match axes.iter_mut().find(|(q, _)| q == p) {
            Some((_, vs)) => vs.push(*v),
            None => axes.push((*p, vec![*v])),
        }
    }
    if axes.is_empty() {
        return "no integer parameters".to_string();
    }
    let parts: Vec<String> = axes
        .into_iter()
        .map(|(p, mut vs)| {
            vs.sort_unstable();
            vs.dedup();
            let vs: Vec<String> = vs.iter().map(u64::to_string).collect();
            format!("{} ∈ {{{}}}", param_name(k, p), vs.join(", "))
        })
        .collect();
    parts.join(", ")
}

impl Coverage {
    /// Takes the lengths one execution of the kernel ran its reductions with.
    pub fn add(&mut self, run: &Run) {
        if self.longest.len() < run.longest.len() {
            self.longest.resize(run.longest.len(), None);
        }
        for (slot, x) in self.longest.iter_mut().zip(&run.longest) {
            *slot = match (*slot, *x) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        for (e, arms) in &run.branches {
            *self.branches.entry(*e).or_insert(0) |= arms;
        }
    }

    /// Takes what another set of executions (other shapes of the same kernel) ran.
    pub fn merge(&mut self, other: Coverage) {
        if self.longest.len() < other.longest.len() {
            self.longest.resize(other.longest.len(), None);
        }
        for (slot, x) in self.longest.iter_mut().zip(other.longest) {
            *slot = match (*slot, x) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        for (e, arms) in other.branches {
            *self.branches.entry(e).or_insert(0) |= arms;
        }
    }

    /// One `Vacuous` error per arm of an `if` inside a reduction body of `k` that no shape
    /// took: the proof compared nothing computed through it.
    fn check_branches(&self, k: &Kernel, shapes: &[Vec<(ParamId, u64)>], errs: &mut Vec<VerifyError>) {
        let mut seen = HashSet::new();
        for (i, r) in reduces(k).iter().enumerate() {
            let mut found = Vec::new();
            selects(&r.body, &mut found);
            for (j, e) in found.into_iter().enumerate() {
                let key = e as *const Expr as usize;
                if !seen.insert(key) {
                    continue;
                }
                let Expr::Select { cond, .. } = e else { continue };
                let taken = self.branches.get(&key).copied().unwrap_or(0);
                for (bit, arm) in [(1u8, "then"), (2, "else")] {
                    if taken & bit != 0 {
                        continue;
                    }
                    errs.push(VerifyError {
                        kernel: k.name.clone(),
                        location: Location { stmt_path: Vec::new(), reduce: Some(i as u32), store: None },
                        kind: ErrorKind::Vacuous,
                        message: format!(
                            "the `{arm}` arm of `if {}` (branch {j} of reduction #{i}, `{}` {}) never ran, so the check compared nothing computed through it: expected a shape taking it, found none over the {} tried ({}); list values that take it with verify(...) in the #[kernel] attribute",
                            k.expr_text(cond),
                            r.schedule,
                            r.op.name(),
                            if shapes.len() == 1 { "1 shape".to_string() } else { format!("{} shapes", shapes.len()) },
                            shapes_text(k, shapes),
                        ),
                    });
                }
            }
        }
    }

    /// One `Vacuous` error per reduction of `k` that never ran with enough elements over
    /// `shapes` (the shapes `k` was executed for).
    pub fn check(&self, k: &Kernel, shapes: &[Vec<(ParamId, u64)>]) -> Result<(), Vec<VerifyError>> {
        let defs = Definitions::of(k);
        let rs = reduces(k);
        let mut any = Feeds::new();
        for r in &rs {
            merge(&mut any, feeds(&defs, &r.len).0);
        }
        let mut errs = Vec::new();
        for (i, r) in rs.iter().enumerate() {
            let longest = self.longest.get(i).copied().flatten();
            let (need, why) = needed(&r.schedule);
            let (fed, constant) = feeds(&defs, &r.len);
            let ok = match longest {
                Some(n) => n >= need || constant,
                None => false,
            };
            if ok {
                continue;
            }
            let found = match longest {
                Some(n) => format!("found at most {n} element{}", if n == 1 { "" } else { "s" }),
                None => "found that it never ran (an enclosing loop or reduction was always empty)".to_string(),
            };
            let params: Vec<ParamId> =
                if fed.is_empty() { any.keys().copied().collect() } else { fed.keys().copied().collect() };
            let listed: Vec<&(ParamId, Vec<u64>)> =
                k.verify_shapes.values.iter().filter(|(p, _)| params.contains(p)).collect();
            let limited = if !params.is_empty() && listed.len() == params.len() {
                let l: Vec<String> = listed
                    .iter()
                    .map(|(p, vs)| {
                        format!(
                            "{} = [{}]",
                            param_name(k, *p),
                            vs.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                        )
                    })
                    .collect();
                format!("the values listed with verify({}) cannot give it {need} elements; ", l.join(", "))
            } else {
                String::new()
            };
            let suggest = match params.first() {
                Some(p) => param_name(k, *p).to_string(),
                None => "param".to_string(),
            };
            errs.push(VerifyError {
                kernel: k.name.clone(),
                location: Location { stmt_path: Vec::new(), reduce: Some(i as u32), store: None },
                kind: ErrorKind::Vacuous,
                message: format!(
                    "reduction #{i} (`{}` {}) never ran with {need} or more elements, so the check compared nothing that depends on its order: expected a shape where {why}, {found} over the {} tried ({}); {limited}list larger values with verify({suggest} = [...]) in the #[kernel] attribute",
                    r.schedule,
                    r.op.name(),
                    if shapes.len() == 1 { "1 shape".to_string() } else { format!("{} shapes", shapes.len()) },
                    shapes_text(k, shapes),
                ),
            });
        }
        if errs.is_empty() {
            self.check_branches(k, shapes, &mut errs);
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}
