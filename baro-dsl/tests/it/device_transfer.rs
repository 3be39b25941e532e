//! Transfers for expert staging through the one runtime interface: byte ranges of pinned host
//! memory copied into byte ranges of device buffers on a stream (range checks with what was
//! expected and what was found), cross-stream ordering with `Stream::wait_event`, the
//! allocation counter and the memory query. Runs on the host; with `BARO_TEST_DEVICE=cuda`
//! (a build with `--features cuda`) or `hip` the same tests run on a GPU.

use baro_dsl::runtime::{Device, DeviceKind};
use baro_dsl::ScalarType;

fn dev() -> Device {
    match std::env::var("BARO_TEST_DEVICE").as_deref() {
        Ok("cuda") => Device::cuda(0),
        Ok("hip") => Device::hip(0),
        _ => Device::host(),
    }
    .expect("test device")
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn pinned_ranges_land_in_buffer_ranges_and_nowhere_else() {
    let d = dev();
    let mut p = d.alloc_pinned(1000).unwrap();
    let src = pattern(1000, 7);
    p.as_mut_slice().unwrap().copy_from_slice(&src);
    let mut b = d.alloc(ScalarType::U8, 300).unwrap();
    let s = d.new_stream().unwrap();
    d.copy_from_pinned(&s, &p, 100, &mut b, 10, 50).unwrap();
    d.copy_from_pinned(&s, &p, 999, &mut b, 299, 1).unwrap();
    d.copy_from_pinned(&s, &p, 0, &mut b, 300, 0).unwrap();
    s.synchronize().unwrap();
    let got = d.read_bytes(&b).unwrap();
    let mut want = vec![0u8; 300];
    want[10..60].copy_from_slice(&src[100..150]);
    want[299] = src[999];
    assert_eq!(got, want);
}

#[test]
fn copies_into_a_typed_buffer_are_by_bytes() {
    let d = dev();
    let vals = [1.5f32, -2.25, 3.0, f32::NAN];
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut p = d.alloc_pinned(bytes.len()).unwrap();
    p.as_mut_slice().unwrap().copy_from_slice(&bytes);
    let mut b = d.alloc(ScalarType::F32, 6).unwrap();
    d.copy_from_pinned(d.default_stream(), &p, 4, &mut b, 8, 12).unwrap();
    d.default_stream().synchronize().unwrap();
    let got: Vec<u32> = d.read::<f32>(&b).unwrap().iter().map(|v| v.to_bits()).collect();
    let want: Vec<u32> = [0.0, 0.0, -2.25, 3.0, f32::NAN, 0.0].iter().map(|v: &f32| v.to_bits()).collect();
    assert_eq!(got, want);
}

#[test]
fn ranges_outside_either_side_are_errors_that_say_what_was_expected() {
    let d = dev();
    let p = d.alloc_pinned(64).unwrap();
    let mut b = d.alloc(ScalarType::U8, 32).unwrap();
    let s = d.default_stream();
    assert_eq!(
        d.copy_from_pinned(s, &p, 60, &mut b, 0, 8).unwrap_err().to_string(),
        "copy source: expected a range within the 64 bytes of pinned memory, found bytes 60..68"
    );
    assert_eq!(
        d.copy_from_pinned(s, &p, 0, &mut b, 30, 4).unwrap_err().to_string(),
        "copy destination: expected a range within the 32 bytes in the buffer, found bytes 30..34"
    );
    assert_eq!(
        d.copy_from_pinned(s, &p, usize::MAX, &mut b, 0, 2).unwrap_err().to_string(),
        format!(
            "copy source: expected a range within the 64 bytes of pinned memory, found bytes {}..{}",
            usize::MAX,
            usize::MAX as u128 + 2
        )
    );
    assert_eq!(d.read_bytes(&b).unwrap(), vec![0u8; 32], "a rejected copy writes nothing");
}

#[test]
fn a_compute_stream_waits_for_a_copy_stream_through_an_event() {
    let d = dev();
    let n = 1 << 20;
    let src = pattern(n, 3);
    let mut p = d.alloc_pinned(n).unwrap();
    p.as_mut_slice().unwrap().copy_from_slice(&src);
    let (copy, compute) = (d.new_stream().unwrap(), d.new_stream().unwrap());
    let staged = d.new_event().unwrap();
    let mut slot = d.alloc(ScalarType::U8, n).unwrap();
    let mut out = d.alloc(ScalarType::U8, n).unwrap();
    d.copy_from_pinned(&copy, &p, 0, &mut slot, 0, n).unwrap();
    staged.record(&copy).unwrap();
    compute.wait_event(&staged).unwrap();
    d.copy(&compute, &slot, &mut out).unwrap();
    compute.synchronize().unwrap();
    assert_eq!(d.read_bytes(&out).unwrap(), src);
    // An event never recorded is already complete.
    let never = d.new_event().unwrap();
    compute.wait_event(&never).unwrap();
    compute.synchronize().unwrap();
}

#[test]
fn allocations_are_counted_and_host_memory_is_not_queried() {
    let d = dev();
    let before = d.allocated_bytes();
    let _a = d.alloc(ScalarType::F32, 10).unwrap();
    let _b = d.upload(&[1u8, 2, 3, 4, 5, 6]).unwrap();
    assert_eq!(d.allocated_bytes() - before, 46);
    match d.kind() {
        DeviceKind::Host => assert_eq!(d.memory_info().unwrap(), None),
        _ => {
            let m = d.memory_info().unwrap().expect("a gpu reports its memory");
            assert!(m.free <= m.total && m.total > 0, "{m:?}");
        }
    }
}
