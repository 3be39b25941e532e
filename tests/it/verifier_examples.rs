//! The verifier on the macro-built example pairs (the kernels users copy from): every kernel
//! verifies, every rows sibling is proven, every systematic reordering of a rows kernel's
//! arithmetic is rejected and every order-preserving rewrite accepted.

#[path = "../../examples/matvec.rs"]
mod matvec;
#[path = "../../examples/matvec_half.rs"]
mod matvec_half;
#[path = "../../examples/q8_dot.rs"]
mod q8_dot;
#[path = "../../examples/rmsnorm.rs"]
mod rmsnorm;
#[path = "../../examples/softmax.rs"]
mod softmax;

use baro::dsl::verify::mutate::{preserving_rewrites, reorderings};
use baro::dsl::verify::{check_sibling, default_shapes, verify_kernel, SiblingError};
use baro::dsl::Kernel;

fn pairs() -> Vec<(Kernel, Kernel)> {
    vec![
        (matvec::matvec_rows(), matvec::matvec()),
        (matvec_half::matvec_f16_rows(), matvec_half::matvec_f16()),
        (matvec_half::matvec_bf16_rows(), matvec_half::matvec_bf16()),
        (rmsnorm::rmsnorm_rows(), rmsnorm::rmsnorm()),
        (rmsnorm::rmsnorm_zc_rows(), rmsnorm::rmsnorm_zc()),
        (softmax::softmax_rows(), softmax::softmax()),
        (q8_dot::q8_matvec_rows(), q8_dot::q8_matvec()),
    ]
}

#[test]
fn every_example_kernel_and_sibling_is_proven() {
    for (rows, m1) in pairs() {
        for k in [&rows, &m1] {
            let proof = verify_kernel(k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
            assert!(proof.regions_checked > 0, "{}: no lane region was checked", k.name);
        }
        let proof = check_sibling(&rows, &m1).unwrap_or_else(|e| panic!("{}: {e}", rows.name));
        assert!(proof.outputs > 0 && proof.shapes > 1, "{}: {proof:?}", rows.name);
        println!("{} ~ {}: {} outputs over {} shapes", rows.name, m1.name, proof.outputs, proof.shapes);
    }
}

#[test]
fn mutations_of_example_siblings() {
    let (mut rejected, mut reorders, mut accepted, mut rewrites) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for (rows, m1) in pairs() {
        for (what, mutant) in reorderings(&rows) {
            reorders += 1;
            match check_sibling(&mutant, &m1) {
                Err(SiblingError::Invalid(e)) => {
                    failures.push(format!("{}: reordering `{what}` is malformed: {e:?}", rows.name))
                }
                Err(_) => rejected += 1,
                Ok(_) => failures.push(format!("{}: reordering `{what}` was accepted", rows.name)),
            }
        }
        for (what, mutant) in preserving_rewrites(&rows) {
            rewrites += 1;
            match check_sibling(&mutant, &m1) {
                Ok(_) => accepted += 1,
                Err(e) => failures.push(format!("{}: preserving rewrite `{what}` was rejected: {e}", rows.name)),
            }
        }
    }
    println!(
        "example pairs: reorderings rejected {rejected}/{reorders}, preserving rewrites accepted {accepted}/{rewrites}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(reorders >= 7 * 4 && rewrites >= 7 * 3, "too few mutants: {reorders} reorderings, {rewrites} rewrites");
}

/// `nb = k / 32` is a let-bound, divided reduction length: the default shapes must give it
/// lengths ragged against 32 lanes, never only empty reductions (the q8 pair once passed
/// with k ∈ {1, 3}, nb = 0, comparing nothing).
#[test]
fn q8_default_shapes_run_non_empty_reductions() {
    for k in [q8_dot::q8_matvec_rows(), q8_dot::q8_matvec()] {
        let kp = k.param_by_name("k").expect("q8 has a k parameter");
        let mut ks: Vec<u64> =
            default_shapes(&k).iter().filter_map(|s| s.iter().find(|(p, _)| *p == kp).map(|(_, v)| *v)).collect();
        ks.sort_unstable();
        ks.dedup();
        let nbs: Vec<u64> = ks.iter().map(|k| k / 32).collect();
        println!("{}: k over {ks:?}, nb over {nbs:?}", k.name);
        assert!(nbs.iter().all(|&nb| nb > 0), "{}: an empty reduction among nb = {nbs:?}", k.name);
        assert!(nbs.iter().any(|&nb| nb > 32), "{}: no shape runs more blocks than lanes: nb = {nbs:?}", k.name);
        assert!(ks.iter().any(|k| k % 32 != 0), "{}: every k in {ks:?} is a multiple of 32", k.name);
    }
    let t = std::time::Instant::now();
    let proof = check_sibling(&q8_dot::q8_matvec_rows(), &q8_dot::q8_matvec()).expect("q8 pair");
    println!("q8 check_sibling: {proof:?} in {:?}", t.elapsed());
}
