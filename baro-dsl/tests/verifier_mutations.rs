//! Mutation testing of the sibling check (issue item 10): every arithmetic-changing rewrite
//! of a rows kernel is rejected, every arithmetic-preserving rewrite is accepted.

use baro_dsl::testkernels::pairs;
use baro_dsl::verify::mutate::{preserving_rewrites, reorderings};
use baro_dsl::verify::{check_sibling, check_wellformed};

#[test]
fn every_reordering_rejected_every_preserving_rewrite_accepted() {
    let (mut rejected, mut reorders) = (0, 0);
    let (mut accepted, mut rewrites) = (0, 0);
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (rows, m1) in pairs() {
        for (what, mutant) in reorderings(&rows) {
            reorders += 1;
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
    assert_eq!(rejected, reorders);
    assert_eq!(accepted, rewrites);
    for kind in ["rename every", "swap independent", "split loop", "wrap statement", "duplicate `let"] {
        assert!(kinds.get(kind).is_some_and(|n| *n > 0), "no `{kind}` rewrite was generated: {kinds:?}");
    }
}
