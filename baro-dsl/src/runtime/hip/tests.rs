//! Unit tests of the HIP runtime's parts that need no AMD GPU: error wording, the code-object
//! check before `hipModuleLoadData`, the no-device error of a real `hipModuleLoadData`, the
//! argument checks and the kernel-argument layout. Launches are tested in `tests/hip_*.rs`.
//! The tests that call into HIP itself use whatever `libamdhip64` the machine has, old
//! versions included (Debian's 5.2 answers these calls), and say so when there is none.

use std::mem::ManuallyDrop;

use super::*;
use crate::cache::CompileCache;
use crate::ir::{Const, ScalarType};
use crate::options::CompileOptions;
use crate::runtime::backend::AnyHandle;
use crate::runtime::buffer::Buffer;
use crate::runtime::Device;
use crate::testkernels;

/// A HIP buffer with a made-up address: enough for argument layout, never freed or launched.
fn fake(elem: ScalarType, len: usize, addr: usize) -> ManuallyDrop<Buffer> {
    let mem = AnyHandle::new(DeviceKind::Hip, HipMem { ptr: addr as ffi::DevicePtr, device: 0 });
    ManuallyDrop::new(Buffer::new(elem, len, mem))
}

/// The smallest AMDGPU shared object `code_object::check` accepts (headers only).
/// How many AMD GPUs the installed library (any version) sees, or `None` after printing why
/// the calls into HIP cannot be shown: no `libamdhip64` at all.
fn raw_device_count(what: &str) -> Option<usize> {
    match library::library() {
        Ok(hip) => Some(count_devices(hip).expect("hipGetDeviceCount")),
        Err(e) => {
            println!("no HIP runtime library: skipping {what} ({e})");
            None
        }
    }
}

fn tiny_code_object() -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[16..18].copy_from_slice(&3u16.to_le_bytes());
    b[18..20].copy_from_slice(&224u16.to_le_bytes());
    b
}

#[test]
fn driver_errors_name_the_call_and_the_code() {
    let e = check("hipModuleLoadData", 101).unwrap_err();
    assert_eq!(e.to_string(), "hipModuleLoadData failed: error 101 (hipErrorInvalidDevice)");
    let e = check("hipMalloc", 4242).unwrap_err();
    assert_eq!(e.to_string(), "hipMalloc failed: error 4242 (a code HIP 5.2 does not name)");
    assert_eq!(check("hipInit", 0), Ok(()));
}

#[test]
fn named_codes_are_named_and_others_are_not() {
    for (code, name) in [
        (0, "hipSuccess"),
        (100, "hipErrorNoDevice"),
        (101, "hipErrorInvalidDevice"),
        (200, "hipErrorInvalidImage"),
        (999, "hipErrorUnknown"),
    ] {
        assert_eq!(ffi::code_name(code), Some(name));
    }
    for code in [-1, 10, 102, 6000, i32::MIN, i32::MAX] {
        assert_eq!(ffi::code_name(code), None, "code {code}");
    }
}

#[test]
fn text_that_is_not_a_code_object_never_reaches_hip() {
    let ptx = b"//\n.version 8.0\n.target sm_90\n.address_size 64\n";
    match load_module(ptx) {
        Err(LoadError::Image(m)) => assert!(m.starts_with("expected an ELF code object"), "{m}"),
        Err(LoadError::Hip(e)) => panic!("PTX reached HIP: {e}"),
        Ok(_) => panic!("PTX loaded as a code object"),
    }
}

#[test]
fn module_load_without_a_device_is_a_clear_error() {
    let Some(count) = raw_device_count("the no-device error of hipModuleLoadData") else { return };
    if count > 0 {
        println!("an AMD GPU is present: the no-device error of hipModuleLoadData cannot be shown");
        return;
    }
    match load_module(&tiny_code_object()) {
        Err(LoadError::Hip(e @ DeviceError::Driver { call: "hipModuleLoadData", .. })) => {
            let m = e.to_string();
            assert!(m.starts_with("hipModuleLoadData failed: error "), "{m}");
            assert!(!m.contains("error 0 "), "{m}");
        }
        Err(LoadError::Hip(e)) => panic!("expected a hipModuleLoadData error, found {e}"),
        Err(LoadError::Image(m)) => panic!("the header-only code object was rejected before HIP: {m}"),
        Ok(_) => panic!("a module loaded with no AMD GPU present"),
    }
}

#[test]
fn opening_a_missing_device_says_so() {
    if let Err(e) = library::runtime() {
        // No usable runtime: opening any device says why, the same words as the loader.
        assert_eq!(HipDevice::new(0).err(), Some(e.clone()));
        assert_eq!(device_count().err(), Some(e));
        return;
    }
    let count = device_count().expect("hipGetDeviceCount");
    let Err(e) = HipDevice::new(count) else { panic!("hip device {count} opened, but HIP counts {count} devices") };
    assert_eq!(e, DeviceError::NoDevice { kind: DeviceKind::Hip, ordinal: count, count });
    assert!(HipDevice::new(usize::MAX).is_err());
}

/// The same wrong launch on the host device and through the HIP checks gives the same message.
#[test]
fn argument_checks_match_the_host() {
    let k = testkernels::matvec(); // (w: &[f32], x: &[f32], y: &mut [f32], k: usize, m: usize)
    let host = Device::host().expect("host device");
    let hk = host.compile(&k).expect("matvec compiles");
    let (w, x, wb) = (
        host.alloc(ScalarType::F32, 6).unwrap(),
        host.alloc(ScalarType::F32, 3).unwrap(),
        host.alloc(ScalarType::BF16, 6).unwrap(),
    );
    let mut y = host.alloc(ScalarType::F32, 2).unwrap();
    let idx = |v: u64| DeviceArg::Scalar(Const::index(v));
    let u32_3 = || DeviceArg::Scalar(Const::new(ScalarType::U32, 3));
    let mut cases: Vec<Vec<DeviceArg<'_>>> = vec![
        vec![DeviceArg::Buf(&w), DeviceArg::Buf(&x), idx(3)],
        vec![DeviceArg::Buf(&wb), DeviceArg::Buf(&x), DeviceArg::Buf(&w), idx(3), idx(2)],
        vec![DeviceArg::Buf(&w), DeviceArg::Buf(&x), DeviceArg::Buf(&x), idx(3), idx(2)],
        vec![DeviceArg::Buf(&w), DeviceArg::Buf(&x), DeviceArg::BufMut(&mut y), u32_3(), idx(2)],
    ];
    let expected = [
        "kernel `matvec` takes 5 arguments, found 3",
        "argument `w` (#0): expected &[f32], found &[bf16]",
        "argument `y` (#2): the kernel writes it, expected &mut [f32], found &[f32]",
        "argument `k` (#3): expected usize, found u32",
    ];
    for (args, want) in cases.iter_mut().zip(expected) {
        let on_host = host.run(&hk, args).expect_err("the host rejects it").to_string();
        let on_hip = prepare(&k, args, 32).expect_err("the hip checks reject it").to_string();
        assert_eq!(on_host, want);
        assert_eq!(on_hip, want);
    }
}

#[test]
fn host_buffers_are_refused_after_the_shared_checks() {
    let k = testkernels::softmax(); // (x: &[f32], y: &mut [f32], n: usize)
    let host = Device::host().expect("host device");
    let x = host.alloc(ScalarType::F32, 4).unwrap();
    let mut y = host.alloc(ScalarType::F32, 4).unwrap();
    let args = [DeviceArg::Buf(&x), DeviceArg::BufMut(&mut y), DeviceArg::Scalar(Const::index(4))];
    let e = prepare(&k, &args, 32).unwrap_err().to_string();
    assert_eq!(e, "launch argument: expected a hip buffer at #0, found a host buffer");
}

#[test]
fn kernel_words_follow_the_abi() {
    let k = testkernels::rmsnorm(false); // (x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32)
    let (x, w) = (fake(ScalarType::F32, 10, 0x1000), fake(ScalarType::F32, 5, 0x2000));
    let mut y = fake(ScalarType::F32, 10, 0x3000);
    let not_canonical = Const { ty: ScalarType::F32, bits: 0xffff_ffff_3f80_0000 }; // 1.0f32 with junk above
    let args = [
        DeviceArg::Buf(&x),
        DeviceArg::Buf(&w),
        DeviceArg::BufMut(&mut y),
        DeviceArg::Scalar(Const::index(5)),
        DeviceArg::Scalar(not_canonical),
    ];
    let Packed { words, lens, grid } = prepare(&k, &args, 32).expect("arguments match");
    // (address, element count) per buffer, one canonical word per scalar; the record's
    // address is appended by the queue at launch.
    assert_eq!(words, vec![0x1000, 10, 0x2000, 5, 0x3000, 10, 5, 0x3f80_0000]);
    assert_eq!(lens, vec![10, 5, 10, 0, 0]);
    assert_eq!(grid, [1, 1, 1]);
}

#[test]
fn grids_beyond_hip_work_item_limits_are_refused() {
    let k = testkernels::matvec(); // grid = (m)
    let (w, x) = (fake(ScalarType::F32, 1, 0x1000), fake(ScalarType::F32, 1, 0x2000));
    let mut y = fake(ScalarType::F32, 1, 0x3000);
    let m = u64::from(u32::MAX) / 64 + 1;
    let args = [
        DeviceArg::Buf(&w),
        DeviceArg::Buf(&x),
        DeviceArg::BufMut(&mut y),
        DeviceArg::Scalar(Const::index(1)),
        DeviceArg::Scalar(Const::index(m)),
    ];
    let e = prepare(&k, &args, 64).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("kernel `matvec` grid axis 0: expected at most {} workgroups on this device, found {m}", m - 1)
    );
    assert!(prepare(&k, &args, 32).is_ok(), "the same grid fits with 32 threads per workgroup");
}

/// Real code objects from `compile_gpu` (gfx1100 and the wave64 gfx942) pass the bounds check
/// HIP's loader relies on, and without a GPU a real object gets the clear load error.
#[test]
fn linked_code_objects_pass_the_check_and_fail_cleanly_without_a_device() {
    let (options, cache) = (CompileOptions::default(), CompileCache::new(None));
    let no_device = raw_device_count("loading real code objects without a GPU") == Some(0);
    for arch in ["gfx1100", "gfx942"] {
        let target = Target::Amdgpu { arch: arch.into() };
        for (rows, m1) in testkernels::pairs() {
            for k in [m1, rows] {
                let a = compile_gpu(&k, &target, &options, &cache)
                    .unwrap_or_else(|e| panic!("`{}` for {arch}: {e}", k.name));
                assert_eq!(code_object::check(&a.image), Ok(()), "`{}` for {arch}", k.name);
                if no_device {
                    let e = load_module(&a.image).err().map(|e| match e {
                        LoadError::Hip(e) => e.to_string(),
                        LoadError::Image(m) => format!("rejected before HIP: {m}"),
                    });
                    let e = e.expect("no module loads without a GPU");
                    assert!(e.starts_with("hipModuleLoadData failed: error "), "{e}");
                }
            }
        }
    }
    if no_device {
        let a =
            compile_gpu(&testkernels::matvec(), &Target::Amdgpu { arch: "gfx1100".into() }, &options, &cache).unwrap();
        if let Err(LoadError::Hip(e)) = load_module(&a.image) {
            println!("without an AMD GPU: {e}");
        }
    }
}
