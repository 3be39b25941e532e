//! `verify_kernel`: well-formedness, then, for every default shape, execution of the expanded
//! kernel (checking each `Lanes` region against the schedule it `implements`) and of the
//! source kernel (each reduction built directly from its schedule's tree, every access
//! checked for races); the two must write identical DAGs, which proves the expansion
//! implements every declared schedule.
//!
//! Every reduction must have run with enough elements for its order to matter on some shape
//! (`coverage`), or the kernel is rejected as `Vacuous` rather than passed on an empty proof.
//! It never changes the kernel and never panics on a malformed one.

use super::coverage::Coverage;
use super::dag::Dag;
use super::ordinals::reduces;
use super::report::{ErrorKind, KernelProof, Location, VerifyError};
use super::shapes::{default_shapes, each_shape};
use super::symbolic::{execute, Run, RunConfig};
use super::{check_wellformed, wellformed};
use crate::ir::{Kernel, ParamId};
use crate::lanes;

fn shape_text(k: &Kernel, shape: &[(ParamId, u64)]) -> String {
    let parts: Vec<String> = shape
        .iter()
        .map(|(p, v)| format!("{} = {v}", k.params.get(p.index()).map_or("?", |x| x.name.as_str())))
        .collect();
    parts.join(", ")
}

fn in_shape(mut e: VerifyError, k: &Kernel, shape: &[(ParamId, u64)]) -> VerifyError {
    if !shape.is_empty() {
        e.message = format!("{} (shape {})", e.message, shape_text(k, shape));
    }
    e
}

/// Verifies one kernel; see the module docs.
pub fn verify_kernel(k: &Kernel) -> Result<KernelProof, Vec<VerifyError>> {
    check_wellformed(k)?;
    let x = lanes::expand(k).map_err(|e| {
        vec![VerifyError {
            kernel: k.name.clone(),
            location: Location::default(),
            kind: ErrorKind::Unsupported,
            message: e.message,
        }]
    })?;
    check_expanded(k, &x)
}

/// The second half of `verify_kernel`: `x`, an expansion of the well-formed kernel `k`, writes
/// on every default shape what `k` means, and each of its `Lanes` regions computes the
/// reduction (for a reduction over rows, each row's) it claims. Public so that tests can hand
/// it an expansion they altered.
pub fn check_expanded(k: &Kernel, x: &Kernel) -> Result<KernelProof, Vec<VerifyError>> {
    let x = x.clone();
    let mut errs = wellformed::check(&x, false);
    if !errs.is_empty() {
        for e in &mut errs {
            e.message = format!("expanded IR (a bug in baro's expansion): {}", e.message);
        }
        return Err(errs);
    }
    let compare_source = !reduces(k).is_empty();
    let shapes = default_shapes(k);
    let mut regions_checked = 0;
    let mut coverage = Coverage::default();
    // Each shape on its own DAG, side by side; read back in shape order (the first error is
    // the first failing shape's, as in sequence).
    let per_shape = each_shape(&shapes, |shape| {
        let cfg = RunConfig {
            scalars: shape,
            offsets: &[],
            check_implements: true,
            memory: None,
            check_races: false,
            aliases: None,
        };
        let mut dag = Dag::new();
        let code = execute(&x, &mut dag, &cfg).map_err(|e| vec![in_shape(e, k, shape)])?;
        let mut covered = Coverage::default();
        if compare_source {
            // The source run also checks for races (the expanded code's lane protocol is the
            // lowering's, not modelled).
            let source = RunConfig { check_races: true, ..cfg };
            let meaning = execute(k, &mut dag, &source).map_err(|e| vec![in_shape(e, k, shape)])?;
            compare(k, &mut dag, &meaning, &code).map_err(|e| vec![in_shape(e, k, shape)])?;
            covered.add(&meaning);
        }
        Ok::<_, Vec<VerifyError>>((code.regions_checked, covered))
    });
    for result in per_shape {
        let (regions, covered) = result?;
        regions_checked += regions;
        coverage.merge(covered);
    }
    if compare_source {
        coverage.check(k, &shapes)?;
    }
    Ok(KernelProof { shapes: shapes.len(), regions_checked })
}

/// Executes the source kernel over its default shapes with the race check only (no schedule
/// or coverage check): for kernels no sibling check runs. The number of shapes run, or the
/// first error; an `Unsupported` error means the executor cannot model the kernel (a store
/// index or a branch from loaded data), which callers must report as not checked.
pub fn check_races(k: &Kernel) -> Result<usize, Vec<VerifyError>> {
    check_wellformed(k)?;
    let shapes = default_shapes(k);
    for result in each_shape(&shapes, |shape| {
        execute(k, &mut Dag::new(), &RunConfig::shape(shape, true)).map(|_| ()).map_err(|e| vec![in_shape(e, k, shape)])
    }) {
        result?;
    }
    Ok(shapes.len())
}

/// The source run (`meaning`) and the expanded run (`code`) must write the same elements
/// with the same nodes.
fn compare(k: &Kernel, dag: &mut Dag, meaning: &Run, code: &Run) -> Result<(), VerifyError> {
    // An order-free integer sum (`order = any`) means every tree; its code picks one.
    let any_order = reduces(k).iter().any(|r| r.schedule.is_order_free());
    let mut memo = std::collections::HashMap::new();
    let fail = |store: u32, reduce: Option<u32>, message: String| VerifyError {
        kernel: k.name.clone(),
        location: Location { stmt_path: Vec::new(), reduce, store: Some(store) },
        kind: ErrorKind::ScheduleNotImplemented,
        message,
    };
    for (key, want) in &meaning.outputs {
        let buf = dag.name_str(key.0).to_string();
        match code.outputs.get(key) {
            None => {
                return Err(fail(
                    want.store,
                    None,
                    format!("expanded code never writes {buf}[{}], which the source writes", key.1),
                ))
            }
            Some(got)
                if got.node != want.node
                    && !(any_order
                        && dag.canonical_int_sums(got.node, &mut memo)
                            == dag.canonical_int_sums(want.node, &mut memo)) =>
            {
                let reduce = meaning.reduce_of.get(&want.node).copied();
                let diff = dag.describe_difference(want.node, got.node, "the schedule", "the expanded code");
                return Err(fail(
                    got.store,
                    reduce,
                    format!(
                        "expanded code does not compute the declared schedule for {buf}[{}]: first difference {diff}\n  expected: {}\n  found:    {}",
                        key.1,
                        dag.show(want.node, 16),
                        dag.show(got.node, 16)
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((key, got)) = code.outputs.iter().find(|(key, _)| !meaning.outputs.contains_key(key)) {
        return Err(fail(
            got.store,
            None,
            format!("expanded code writes {}[{}], which the source never writes", dag.name_str(key.0), key.1),
        ));
    }
    Ok(())
}
