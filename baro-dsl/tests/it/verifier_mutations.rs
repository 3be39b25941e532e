//! Mutation testing of the sibling check (issue item 10): every arithmetic-changing rewrite
//! of a rows kernel is rejected, every arithmetic-preserving rewrite is accepted.

use baro_dsl::testkernels::verifier_pairs;
use baro_dsl::verify::mutate::{concurrency_and_shape_mutants, preserving_rewrites, reorderings};
use baro_dsl::verify::{check_sibling, check_wellformed, ErrorKind};

#[test]
fn every_reordering_rejected_every_preserving_rewrite_accepted() {
    let (mut rejected, mut reorders) = (0, 0);
    let (mut accepted, mut rewrites) = (0, 0);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    let mut reorder_kinds = std::collections::BTreeSet::<String>::new();
    for (rows, m1) in verifier_pairs() {
        for (what, mutant) in reorderings(&rows) {
            reorders += 1;
            reorder_kinds.insert(what.clone());
            match check_sibling(&mutant, &m1) {
                Err(_) => rejected += 1,
                Ok(_) => println!("NOT rejected: {} / {what}", rows.name),
            }
        }
        for (what, mutant) in preserving_rewrites(&rows) {
            rewrites += 1;
            let kind: String = what.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
            *kinds.entry(kind).or_default() += 1;
            if let Err(e) = check_wellformed(&mutant) {
                println!("malformed rewrite {} / {what}: {:?}", rows.name, e);
                continue;
            }
            match check_sibling(&mutant, &m1) {
                Ok(_) => accepted += 1,
                Err(e) => println!("NOT accepted: {} / {what}: {e}", rows.name),
            }
        }
    }
    println!("reorderings rejected {rejected}/{reorders}");
    println!("preserving rewrites accepted {accepted}/{rewrites} ({kinds:?})");
    assert!(reorders >= 40, "too few reorderings: {reorders}");
    // An fma is never `a·b + c`: fusing a multiply-add and splitting an fma are both rejected.
    for kind in [
        "contract a float multiply-add into an fma",
        "split an fma into a multiply and an add",
        "fuse a sum of products into an fma_sum",
        "unfuse an fma_sum into a sum of products",
    ] {
        assert!(reorder_kinds.contains(kind), "no `{kind}` mutant was generated: {reorder_kinds:?}");
    }
    assert_eq!(rejected, reorders);
    assert_eq!(accepted, rewrites);
    for kind in ["rename every", "swap independent", "split loop", "wrap statement", "duplicate `let"] {
        assert!(kinds.get(kind).is_some_and(|n| *n > 0), "no `{kind}` rewrite was generated: {kinds:?}");
    }
}

/// Races, changes only on full lane blocks / full row tiles / the tail, and accumulation
/// through memory: each class is generated and every mutant is rejected (by the race model,
/// the derived shapes, branch coverage or the memory rule). The per-class table is printed.
#[test]
fn concurrency_and_shape_mutants_are_rejected() {
    let mut table = std::collections::BTreeMap::<String, (usize, usize)>::new();
    let mut survivors = Vec::new();
    for (rows, m1) in verifier_pairs() {
        for (what, mutant) in concurrency_and_shape_mutants(&rows) {
            let class = what.split(':').next().unwrap_or("?").to_string();
            if class == "memory" {
                // The sibling check also rejects these for a missing reduction (the m=1
                // kernel has it); the memory rule must reject them on its own.
                let slot = table.entry("memory-rule".to_string()).or_default();
                slot.1 += 1;
                match check_wellformed(&mutant) {
                    Err(e) if e.iter().any(|x| x.kind == ErrorKind::UndeclaredReduction) => slot.0 += 1,
                    _ => survivors.push(format!("{} / {what} (well-formed)", rows.name)),
                }
            }
            let slot = table.entry(class).or_default();
            slot.1 += 1;
            match check_sibling(&mutant, &m1) {
                Err(_) => slot.0 += 1,
                Ok(_) => survivors.push(format!("{} / {what}", rows.name)),
            }
        }
    }
    for (class, (killed, total)) in &table {
        println!("{class:>10}: killed {killed}/{total}");
    }
    for s in &survivors {
        println!("NOT rejected: {s}");
    }
    for class in ["race", "full-block", "full-tile", "tail", "memory"] {
        assert!(table.get(class).is_some_and(|(_, n)| *n > 0), "no `{class}` mutant was generated: {table:?}");
    }
    assert!(survivors.is_empty(), "{} mutants not rejected", survivors.len());
}
