//! `matvec_bw`'s engine group on the host JIT with the `tiny` preset's shapes (every type of the
//! community mix, routed experts with top-k ids): every case is checked and timed with a
//! positive time on both sides, and a wrong kernel (another type's) fails the check instead of
//! reporting a number.

use crate::bandwidth::Filler;
use crate::matvec_cases::model_cases;
use crate::matvec_engine::{check, run_cases, EngineSetup};
use baro_dsl::runtime::Device;
use baro_engine::kernels::decode_matvec;
use baro_engine::model::TensorType;
use baro_engine::pack::{presets, QuantMix};

#[test]
fn engine_group_runs_on_the_tiny_shapes() {
    let dev = Device::host().expect("host device");
    let host = Device::host().expect("host device");
    let mut filler = Filler::new(&dev, 1 << 16).expect("filler");
    let cases = model_cases(&presets::tiny(), QuantMix::Community).expect("tiny shapes fit");
    let types: Vec<TensorType> = cases.iter().map(|c| c.ty).collect();
    for ty in [TensorType::F32, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K] {
        assert!(types.contains(&ty), "expected a {ty} case in {cases:?}");
    }
    let setup = EngineSetup { iters: 2, warmup: 1, l2_bytes: 1 << 16, max_sets: 2 };
    let (rows, checked) = run_cases(&dev, &host, &mut filler, &setup, &cases).expect("engine group on the host");
    assert_eq!(rows.len(), cases.len());
    assert!(checked > 0);
    for r in &rows {
        assert!(r.matvec_us > 0.0 && r.copy_us > 0.0, "{r:?}");
        assert_eq!(r.bytes, r.case.bytes());
        assert_eq!(r.kernel, decode_matvec(r.case.ty, r.case.cols).name);
    }
}

#[test]
fn another_types_kernel_fails_the_check() {
    let dev = Device::host().expect("host device");
    let cases = model_cases(&presets::tiny(), QuantMix::Community).expect("tiny shapes fit");
    let q8 = cases.iter().find(|c| c.ty == TensorType::Q8_0).expect("a Q8_0 case");
    let right = dev.compile(&decode_matvec(TensorType::Q8_0, q8.cols)).expect("compile");
    let wrong = dev.compile(&decode_matvec(TensorType::Q4_K, q8.cols)).expect("compile");
    let e = check(&dev, &dev, q8, &wrong, &right).expect_err("a Q4_K kernel on Q8_0 bytes passed the check");
    assert!(e.contains("self-check failed"), "{e}");
}
