//! The verifier on the example sibling pairs and the negative controls of issue item 9.

use baro_dsl::testkernels::{negative_controls, verifier_pairs};
use baro_dsl::verify::{check_sibling, compare_rows_arithmetic, verify_kernel, SiblingError};

#[test]
fn every_kernel_verifies() {
    let mut kernels = Vec::new();
    for (rows, m1) in verifier_pairs() {
        kernels.push(rows);
        kernels.push(m1);
    }
    for (_, rows, _) in negative_controls() {
        kernels.push(rows);
    }
    for k in &kernels {
        let t = std::time::Instant::now();
        match verify_kernel(k) {
            Ok(p) => println!(
                "{}: {} shapes, {} lanes regions checked in {:?}",
                k.name,
                p.shapes,
                p.regions_checked,
                t.elapsed()
            ),
            Err(e) => panic!("{} failed: {}", k.name, e.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("\n")),
        }
    }
}

#[test]
fn every_pair_is_a_sibling() {
    for (rows, m1) in verifier_pairs() {
        let t = std::time::Instant::now();
        match check_sibling(&rows, &m1) {
            Ok(p) => {
                println!(
                    "{} ~ {}: {} shapes, {} outputs compared in {:?}",
                    rows.name,
                    m1.name,
                    p.shapes,
                    p.outputs,
                    t.elapsed()
                );
                assert!(p.shapes >= 8 && p.outputs > 0, "{} checked too little: {p:?}", rows.name);
            }
            Err(e) => panic!("{} rejected: {e}", rows.name),
        }
    }
}

#[test]
fn negative_controls_are_rejected() {
    for (what, rows, m1) in negative_controls() {
        let err = check_sibling(&rows, &m1).expect_err(what);
        println!("{what}: {err}");
        match (what, &err) {
            ("chunked", SiblingError::Schedule { reduce: 0, detail, .. }) => {
                assert_eq!(detail, "`chunked(8, seq)` here, `lanes(32, butterfly)` in `matvec`")
            }
            ("lanes64", SiblingError::Schedule { reduce: 0, detail, .. }) => {
                assert_eq!(detail, "lane count 64 here, 32 in `matvec`")
            }
            ("pairwise", SiblingError::Schedule { reduce: 0, detail, .. }) => {
                assert_eq!(detail, "combine `pairwise` here, `seq` in `matvec_seq_combine`")
            }
            ("swapped", SiblingError::Arithmetic(m)) => {
                assert_eq!(m.buffer, "y");
                assert_eq!((m.row, m.index, m.m1_index), (0, 0, 0));
                assert_eq!(m.location.store, Some(0));
                assert_eq!(m.location.reduce, Some(0));
                assert!(
                    m.first_difference.ends_with("m=1 has `x[0]·w[0]`, rows has `w[0]·x[0]`"),
                    "{}",
                    m.first_difference
                );
            }
            ("fused_order", SiblingError::Schedule { reduce: 0, detail, .. }) => {
                assert_eq!(detail, "`fma_sum` here, `sum` in `matvec`")
            }
            ("fused" | "unfused", SiblingError::Arithmetic(m)) => {
                assert_eq!(m.buffer, "y");
                assert_eq!((m.row, m.index, m.m1_index), (0, 0, 0));
                assert_eq!(m.location.store, Some(0));
                // The sums are the same node; the stored values differ at the root: one side
                // an fma node, the other an add (of a multiply), never equal to it.
                let (m1_side, rows_side) = m.first_difference.split_once(", rows has ").expect("two sides");
                let (fused_side, split_side) =
                    if what == "fused" { (rows_side, m1_side) } else { (m1_side, rows_side) };
                assert!(m1_side.starts_with("at the root: m=1 has `"), "{}", m.first_difference);
                assert!(fused_side.contains("`fma("), "{what}: {}", m.first_difference);
                assert!(!split_side.contains("fma(") && split_side.contains("`(("), "{what}: {}", m.first_difference);
            }
            _ => panic!("{what}: unexpected error {err:?}"),
        }
        // The schedule-level rejections also change the arithmetic itself.
        let arith = compare_rows_arithmetic(&rows, &m1).expect_err(what);
        let SiblingError::Arithmetic(m) = arith else { panic!("{what}: expected an arithmetic mismatch, got {arith}") };
        println!("{what} (arithmetic): {m}");
        assert_eq!(m.buffer, "y");
        assert!(m.first_difference.starts_with("at "), "{what}: {}", m.first_difference);
    }
}
