//! The conformance routine of `bench/` (every example and `testkernels` pair on ragged
//! shapes, compared byte for byte), run host JIT against host JIT so the routine itself is
//! tested in CI; and proof that its comparison sees a one-bit difference.

#[allow(dead_code)]
#[path = "../../bench/src/conformance.rs"]
mod conformance;

use baro_dsl::runtime::{Device, DeviceArg};
use baro_dsl::{testkernels, ScalarType};
use conformance::{count_differing, families, run_all, table, totals};

#[test]
fn every_kernel_host_vs_host_is_identical() {
    let (a, b) = (Device::host().unwrap(), Device::host().unwrap());
    let outcomes = run_all(&a, &b, true, 7, |_| {});
    let kernels: usize = families(true).iter().map(|f| f.kernels.len()).sum();
    assert_eq!(kernels, 32, "examples (18) and testkernels (14) kernels");
    assert_eq!(outcomes.len(), kernels * 2, "two quick shapes per kernel");
    let t = table(&outcomes);
    assert!(outcomes.iter().all(|o| o.passed()), "{t}");
    let (compared, differing) = totals(&outcomes);
    assert!(compared > 10_000, "{compared} bytes compared\n{t}");
    assert_eq!(differing, 0);
    assert!(t.contains("examples/matvec_bf16_rows") && t.contains("testkernels/q8_dot_rows"), "{t}");
}

#[test]
fn the_comparison_counts_single_bit_and_length_differences() {
    let a = [1u8, 2, 3, 4];
    assert_eq!(count_differing(&a, &a), 0);
    assert_eq!(count_differing(&a, &[1, 2, 3, 5]), 1);
    assert_eq!(count_differing(&a, &[1, 2]), 2);
}

/// Two kernels that differ only in the order of the lane combine produce different bytes on
/// the same inputs: the byte comparison is strict enough to see an order change.
#[test]
fn a_different_summation_order_is_seen_as_different_bytes() {
    let d = Device::host().unwrap();
    let (k, m) = (4099usize, 33usize);
    let mut rng = baro::reference::Rng::new(5);
    let (w, x) = (rng.vec_f32(k * m), rng.vec_f32(k));
    let mut outs = Vec::new();
    for kernel in [testkernels::matvec(), testkernels::matvec_seq_combine()] {
        let c = d.compile(&kernel).unwrap();
        let (wb, xb) = (d.upload(&w).unwrap(), d.upload(&x).unwrap());
        let mut y = d.alloc(ScalarType::F32, m).unwrap();
        d.run(&c, &mut [DeviceArg::buf(&wb), DeviceArg::buf(&xb), DeviceArg::buf_mut(&mut y), k.into(), m.into()])
            .unwrap();
        outs.push(d.read_bytes(&y).unwrap());
    }
    assert!(count_differing(&outs[0], &outs[1]) > 0, "butterfly and sequential combines gave identical bytes");
}

#[test]
fn bounds_errors_read_the_same_on_both_devices() {
    let (a, b) = (Device::host().unwrap(), Device::host().unwrap());
    let m = conformance::error_parity(&a, &b, 3).unwrap();
    assert_eq!(m[..2], vec!["kernel `matvec` wrote `y[3]` but `y` has 3 elements"; 2]);
    assert_eq!(m[2], "kernel `matvec` read `x[39]` but `x` has 39 elements");
}
