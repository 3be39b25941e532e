//! The HIP runtime (feature `hip`) through the one `Device` interface: device discovery, the
//! no-device errors, and, on a machine with an AMD GPU, buffers, streams, events, argument and
//! bounds errors, and every test kernel compared with the host byte for byte.
//!
//! A test that needs an AMD GPU is `#[ignore]`d, so the default run lists it as ignored instead
//! of passing it; the GPU tier runs them on a machine with one (`./dev test-gpu`, or
//! `cargo test -p baro-dsl --features hip --test it -- --ignored hip_runtime::`), where a missing GPU
//! fails the test with the reason. Nothing here has ever run on AMD hardware on baro's build
//! machines (there is none); those tests are written for a machine that has one.
#![cfg(feature = "hip")]

use baro_dsl::ir::{Access, Const, Kernel, ParamKind, ScalarType};
use baro_dsl::runtime::{hip, Device, DeviceArg, DeviceError, DeviceKind};
use baro_dsl::target::Target;
use baro_dsl::testkernels;
use half::{bf16, f16};

/// HIP device 0 for a GPU-tier test (`#[ignore]`d by default); no AMD GPU fails it, saying why.
fn amd_gpu(what: &str) -> Device {
    match hip::device_count() {
        Ok(0) => panic!("{what} needs an AMD GPU: HIP found none"),
        Ok(_) => Device::hip(0).unwrap_or_else(|e| panic!("an AMD GPU is present but hip device 0 does not open: {e}")),
        Err(e) => panic!("{what} needs an AMD GPU: no usable HIP runtime: {e}"),
    }
}

fn assert_unusable_runtime_message(e: &DeviceError) {
    let m = e.to_string();
    assert!(matches!(e, DeviceError::NoDriver { .. }), "{e:?}");
    assert!(
        m.starts_with("no HIP runtime: expected libamdhip64.so")
            || m.contains("expected the HIP runtime of ROCm 6 or newer (HIP 6.0.0), found HIP "),
        "{m}"
    );
}

#[test]
fn device_count_query_works() {
    match hip::device_count() {
        Ok(n) => {
            println!("hip devices: {n}");
            if !std::path::Path::new("/dev/kfd").exists() {
                assert_eq!(n, 0, "without the amdgpu kernel driver (/dev/kfd) HIP cannot see a GPU");
            }
        }
        Err(e) => {
            println!("no usable HIP runtime: {e}");
            assert_unusable_runtime_message(&e);
        }
    }
}

#[test]
fn runtime_version_needs_no_device() {
    match hip::runtime_version() {
        Ok(v) => {
            println!("hip runtime version {v} ({})", hip::version_text(v));
            assert!(v >= 50_000_000, "expected HIP 5.0 or newer (version >= 50000000), found {v}");
            assert_eq!(
                hip::check_version(v).is_ok(),
                hip::device_count().is_ok(),
                "the version check decides whether HIP is used"
            );
        }
        Err(e) => {
            println!("no HIP runtime library: {e}");
            assert_unusable_runtime_message(&e);
        }
    }
}

#[test]
fn opening_a_missing_device_is_a_clear_error() {
    let n = match hip::device_count() {
        Ok(n) => n,
        Err(e) => {
            assert_eq!(Device::hip(0).err(), Some(e));
            let best = Device::best_available().expect("the host is always available");
            assert_ne!(best.kind(), DeviceKind::Hip, "best_available chose HIP without a usable runtime");
            return;
        }
    };
    let Err(e) = Device::hip(n) else { panic!("hip device {n} opened, but HIP counts {n} devices") };
    assert_eq!(e, DeviceError::NoDevice { kind: DeviceKind::Hip, ordinal: n, count: n });
    assert_eq!(
        e.to_string(),
        format!("no hip device {n}: expected an ordinal below the device count, found {n} device(s)")
    );
    assert!(Device::open(DeviceKind::Hip, n).is_err());
    if n == 0 {
        let best = Device::best_available().expect("the host is always available");
        assert_ne!(best.kind(), DeviceKind::Hip, "best_available chose HIP without an AMD GPU");
    }
}

#[test]
#[ignore = "needs an AMD GPU: the GPU tier (./dev test-gpu)"]
fn device_reports_a_gfx_target() {
    let d = amd_gpu("device properties");
    assert_eq!(d.kind(), DeviceKind::Hip);
    assert!(matches!(d.target(), Target::Amdgpu { .. }), "found target {}", d.target());
    assert!(d.driver_version().starts_with("HIP runtime "), "{}", d.driver_version());
    println!("{} / {} / {}", d.name(), d.target(), d.driver_version());
}

#[test]
#[ignore = "needs an AMD GPU: the GPU tier (./dev test-gpu)"]
fn buffers_round_trip() {
    let d = amd_gpu("buffer round trips");
    let xs: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
    let b = d.upload(&xs).expect("upload f32");
    assert_eq!(d.read::<f32>(&b).expect("read f32"), xs);
    let hs: Vec<bf16> = xs.iter().map(|&x| bf16::from_f32(x)).collect();
    assert_eq!(d.read::<bf16>(&d.upload(&hs).unwrap()).unwrap(), hs);
    let qs: Vec<i8> = (0..77).map(|i| (i * 37 % 256) as u8 as i8).collect();
    assert_eq!(d.read::<i8>(&d.upload(&qs).unwrap()).unwrap(), qs);
    let z = d.alloc(ScalarType::F16, 33).expect("alloc");
    assert_eq!(d.read::<f16>(&z).unwrap(), vec![f16::ZERO; 33]);
    let empty = d.alloc(ScalarType::F32, 0).expect("an empty buffer");
    assert!(d.read::<f32>(&empty).unwrap().is_empty());
    let s = d.new_stream().expect("stream");
    let mut c = d.alloc(ScalarType::F32, 1000).unwrap();
    d.copy(&s, &b, &mut c).expect("device copy");
    s.synchronize().expect("sync");
    assert_eq!(d.read::<f32>(&c).unwrap(), xs);
    let mut short = d.alloc(ScalarType::F32, 3).unwrap();
    assert!(d.write(&mut short, &[1f32, 2.0]).is_err(), "a short write is refused");
}

#[test]
#[ignore = "needs an AMD GPU: the GPU tier (./dev test-gpu)"]
fn events_time_a_launch() {
    let d = amd_gpu("event timing");
    let k = d.compile(&testkernels::softmax()).expect("softmax compiles for this device");
    let x = d.upload(&vec![0.25f32; 4096]).unwrap();
    let mut y = d.alloc(ScalarType::F32, 4096).unwrap();
    let s = d.new_stream().unwrap();
    let (start, end) = (d.new_event().unwrap(), d.new_event().unwrap());
    start.record(&s).unwrap();
    d.launch(&s, &k, &mut [DeviceArg::buf(&x), DeviceArg::buf_mut(&mut y), 4096usize.into()]).expect("launch");
    end.record(&s).unwrap();
    s.synchronize().expect("the launch succeeds");
    let ms = start.elapsed_ms(&end).expect("elapsed time");
    assert!(ms >= 0.0 && ms.is_finite(), "{ms}");
    let host = Device::host().expect("host device");
    let hk = host.compile(&testkernels::softmax()).unwrap();
    let hx = host.upload(&vec![0.25f32; 4096]).unwrap();
    let mut hy = host.alloc(ScalarType::F32, 4096).unwrap();
    host.run(&hk, &mut [DeviceArg::buf(&hx), DeviceArg::buf_mut(&mut hy), 4096usize.into()]).unwrap();
    assert_eq!(d.read_bytes(&y).unwrap(), host.read_bytes(&hy).unwrap());
}

#[test]
#[ignore = "needs an AMD GPU: the GPU tier (./dev test-gpu)"]
fn argument_and_bounds_errors_match_the_host() {
    let d = amd_gpu("argument and bounds errors");
    let host = Device::host().expect("host device");
    let k = testkernels::matvec(); // (w: &[f32], x: &[f32], y: &mut [f32], k: usize, m: usize)
    let mut messages = Vec::new();
    for dev in [&host, &d] {
        let kern = dev.compile(&k).expect("matvec compiles");
        let (w, x) = (dev.alloc(ScalarType::F32, 64).unwrap(), dev.alloc(ScalarType::F32, 16).unwrap());
        let mut y = dev.alloc(ScalarType::F32, 4).unwrap();
        let wrong = dev.run(
            &kern,
            &mut [DeviceArg::buf(&w), DeviceArg::buf(&x), DeviceArg::buf(&y), 16usize.into(), 4usize.into()],
        );
        // k = 32 reads past x (16 elements).
        let oob = dev.run(
            &kern,
            &mut [DeviceArg::buf(&w), DeviceArg::buf(&x), DeviceArg::buf_mut(&mut y), 32usize.into(), 2usize.into()],
        );
        messages.push((wrong.expect_err("read-only y").to_string(), oob.expect_err("out of bounds").to_string()));
    }
    assert_eq!(messages[0], messages[1], "host and HIP report different errors");
    assert!(messages[0].1.contains("`x[16]` but `x` has 16 elements"), "{}", messages[0].1);
}

/// One kernel's launch inputs: a scalar per name, every buffer `BUF_LEN` elements long.
const BUF_LEN: usize = 8192;

enum Input {
    Buf { elem: ScalarType, writable: bool, bytes: Vec<u8> },
    Scalar(Const),
}

/// Ragged shapes: k and n not multiples of 32, an odd row count.
fn scalar_for(name: &str, ty: ScalarType) -> Const {
    match (name, ty) {
        ("k" | "n", ScalarType::U64) => Const::index(1031),
        ("m", ScalarType::U64) => Const::index(7),
        ("rows", ScalarType::U64) => Const::index(3),
        ("nb", ScalarType::U64) => Const::index(5),
        ("eps", ScalarType::F32) => Const::f32(1e-5),
        _ => panic!("test inputs: no value for scalar `{name}: {ty}`"),
    }
}

fn inputs(k: &Kernel, seed: u64) -> Vec<Input> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    k.params
        .iter()
        .map(|p| match &p.kind {
            ParamKind::Scalar(t) => Input::Scalar(scalar_for(&p.name, *t)),
            ParamKind::Buffer { elem, access } => {
                let mut bytes = Vec::with_capacity(BUF_LEN * elem.size_bytes());
                for _ in 0..BUF_LEN {
                    let unit = (next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0; // [-1, 1)
                    let v: Vec<u8> = match elem {
                        ScalarType::F32 => unit.to_le_bytes().to_vec(),
                        ScalarType::BF16 => bf16::from_f32(unit).to_le_bytes().to_vec(),
                        ScalarType::F16 => f16::from_f32(unit * 0.1).to_le_bytes().to_vec(),
                        ScalarType::Bool => vec![(next() & 1) as u8],
                        other => next().to_le_bytes()[..other.size_bytes()].to_vec(),
                    };
                    bytes.extend(v);
                }
                Input::Buf { elem: *elem, writable: *access == Access::ReadWrite, bytes }
            }
        })
        .collect()
}

/// Runs `k` on `dev` with `ins`; returns the bytes of every writable buffer afterwards.
fn run(dev: &Device, k: &Kernel, ins: &[Input]) -> Vec<Vec<u8>> {
    let kern = dev.compile(k).unwrap_or_else(|e| panic!("compile `{}` for {}: {e}", k.name, dev.target()));
    let mut bufs: Vec<_> = ins
        .iter()
        .map(|i| match i {
            Input::Buf { elem, bytes, .. } => Some(dev.upload_bytes(*elem, bytes).expect("upload")),
            Input::Scalar(_) => None,
        })
        .collect();
    let mut args: Vec<DeviceArg<'_>> = Vec::new();
    for (i, b) in ins.iter().zip(bufs.iter_mut()) {
        args.push(match (i, b) {
            (Input::Scalar(c), _) => DeviceArg::Scalar(*c),
            (Input::Buf { writable: true, .. }, Some(b)) => DeviceArg::buf_mut(b),
            (Input::Buf { .. }, Some(b)) => DeviceArg::buf(b),
            (Input::Buf { .. }, None) => unreachable!("every buffer input was uploaded"),
        });
    }
    dev.run(&kern, &mut args).unwrap_or_else(|e| panic!("run `{}` on {}: {e}", k.name, dev.target()));
    drop(args);
    ins.iter()
        .zip(&bufs)
        .filter_map(|(i, b)| match (i, b) {
            (Input::Buf { writable: true, .. }, Some(b)) => Some(dev.read_bytes(b).expect("read back")),
            _ => None,
        })
        .collect()
}

fn every_test_kernel() -> Vec<Kernel> {
    testkernels::pairs().into_iter().flat_map(|(rows, m1)| [m1, rows]).collect()
}

/// The inputs above really drive every kernel: each one writes its outputs on the host.
#[test]
fn parity_inputs_drive_every_kernel_on_the_host() {
    let host = Device::host().expect("host device");
    for (seed, k) in every_test_kernel().iter().enumerate() {
        let ins = inputs(k, 0x9e37_79b9 + seed as u64);
        let before: Vec<&Vec<u8>> = ins
            .iter()
            .filter_map(|i| if let Input::Buf { writable: true, bytes, .. } = i { Some(bytes) } else { None })
            .collect();
        let after = run(&host, k, &ins);
        assert_eq!(after.len(), before.len());
        assert!(after.iter().zip(&before).any(|(a, b)| a != *b), "kernel `{}` wrote nothing", k.name);
    }
}

#[test]
#[ignore = "needs an AMD GPU: the GPU tier (./dev test-gpu)"]
fn test_kernels_match_the_host_byte_for_byte() {
    let d = amd_gpu("host/HIP byte parity of the test kernels");
    let host = Device::host().expect("host device");
    let (mut compared, mut differing) = (0usize, 0usize);
    for (seed, k) in every_test_kernel().iter().enumerate() {
        let ins = inputs(k, 0x9e37_79b9 + seed as u64);
        let (want, got) = (run(&host, k, &ins), run(&d, k, &ins));
        let n: usize = want.iter().map(Vec::len).sum();
        let diff: usize = want
            .iter()
            .zip(&got)
            .map(|(a, b)| a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len()))
            .sum();
        println!("{:<28} on {}: {n} bytes compared, {diff} differ", k.name, d.target());
        compared += n;
        differing += diff;
    }
    assert!(compared > 0);
    assert_eq!(differing, 0, "{differing} of {compared} bytes differ between the host and {}", d.target());
}
