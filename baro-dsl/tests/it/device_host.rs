//! The one runtime interface on the host device: buffers, launches through `Device`, the
//! same argument errors as a direct host launch, bounds errors, events, and device choice.

use baro_dsl::ir::Const;
use baro_dsl::runtime::{Arg, Device, DeviceArg, DeviceError, DeviceKind, HostRuntime};
use baro_dsl::{testkernels, ScalarType};
use half::{bf16, f16};

fn host() -> Device {
    Device::host().expect("host device")
}

#[test]
fn buffers_round_trip_every_element_type() {
    let d = host();
    let f = [1.5f32, -0.0, f32::MIN_POSITIVE / 2.0, f32::NAN];
    let b = d.upload(&f).unwrap();
    assert_eq!((b.elem(), b.len(), b.byte_len(), b.device_kind()), (ScalarType::F32, 4, 16, DeviceKind::Host));
    let back: Vec<u32> = d.read::<f32>(&b).unwrap().iter().map(|v| v.to_bits()).collect();
    assert_eq!(back, f.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let h = [f16::from_f32(0.1), f16::from_f32(-3.0), f16::from_f32(65504.0)];
    assert_eq!(d.read::<f16>(&d.upload(&h).unwrap()).unwrap(), h);
    let bh = [bf16::from_f32(1e30), bf16::from_f32(-1e-30)];
    assert_eq!(d.read::<bf16>(&d.upload(&bh).unwrap()).unwrap(), bh);
    let i = [-128i8, 0, 127];
    assert_eq!(d.read::<i8>(&d.upload(&i).unwrap()).unwrap(), i);
    let bools = [true, false, true];
    assert_eq!(d.read::<bool>(&d.upload(&bools).unwrap()).unwrap(), bools);
    let z = d.alloc(ScalarType::U32, 5).unwrap();
    assert_eq!(d.read::<u32>(&z).unwrap(), vec![0; 5]);
    let empty = d.alloc(ScalarType::F32, 0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(d.read_bytes(&empty).unwrap(), Vec::<u8>::new());
}

#[test]
fn buffer_misuse_is_an_error_that_says_what_was_expected() {
    let d = host();
    let mut b = d.upload(&[1.0f32, 2.0]).unwrap();
    assert_eq!(d.read::<i32>(&b).unwrap_err().to_string(), "buffer element type: expected i32, found f32");
    assert_eq!(d.write_bytes(&mut b, &[0u8; 7]).unwrap_err().to_string(), "write: expected 8 bytes, found 7 bytes");
    assert_eq!(
        d.upload_bytes(ScalarType::F32, &[0u8; 6]).unwrap_err().to_string(),
        "upload: expected a multiple of 4 bytes (one f32), found 6 bytes"
    );
    let mut flags = d.alloc(ScalarType::Bool, 2).unwrap();
    d.write_bytes(&mut flags, &[1, 2]).unwrap();
    assert_eq!(d.read::<bool>(&flags).unwrap_err().to_string(), "bool buffer: expected bytes 0 or 1, found byte 2");
    let mut small = d.alloc(ScalarType::F32, 1).unwrap();
    assert_eq!(
        d.copy(d.default_stream(), &b, &mut small).unwrap_err().to_string(),
        "copy: expected 8 bytes in the destination, found 4 bytes"
    );
    let mut same = d.alloc(ScalarType::F32, 2).unwrap();
    d.copy(d.default_stream(), &b, &mut same).unwrap();
    assert_eq!(d.read::<f32>(&same).unwrap(), vec![1.0, 2.0]);
}

/// A matvec through `Device` equals the direct host launch, byte for byte.
#[test]
fn launch_through_device_matches_the_host_runtime() {
    let d = host();
    let (k, m) = (67usize, 5usize);
    let x: Vec<f32> = (0..k).map(|i| (i as f32 * 0.37).sin()).collect();
    let w: Vec<f32> = (0..k * m).map(|i| (i as f32 * 0.11).cos()).collect();
    let kernel = testkernels::matvec(); // (w, x, y, k, m)
    let compiled = d.compile(&kernel).unwrap();
    assert_eq!(compiled.name(), "matvec");
    let (wb, xb) = (d.upload(&w).unwrap(), d.upload(&x).unwrap());
    let mut yb = d.alloc(ScalarType::F32, m).unwrap();
    d.run(&compiled, &mut [DeviceArg::buf(&wb), DeviceArg::buf(&xb), DeviceArg::buf_mut(&mut yb), k.into(), m.into()])
        .unwrap();
    let got: Vec<u32> = d.read::<f32>(&yb).unwrap().iter().map(|v| v.to_bits()).collect();

    let rt = HostRuntime::new().unwrap();
    let mut y = vec![0.0f32; m];
    rt.compile(&kernel)
        .unwrap()
        .launch(&mut [Arg::buf(&w), Arg::buf(&x), Arg::buf_mut(&mut y), Arg::from(k), Arg::from(m)])
        .unwrap();
    assert_eq!(got, y.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    assert!(got.iter().any(|&b| b != 0), "the kernel wrote nothing");
}

#[test]
fn argument_errors_match_the_host_messages() {
    let d = host();
    let compiled = d.compile(&testkernels::matvec()).unwrap();
    let w = d.upload(&[0.0f32; 8]).unwrap();
    let x = d.upload(&[0.0f32; 4]).unwrap();
    let mut y = d.alloc(ScalarType::F32, 2).unwrap();
    let yi = d.alloc(ScalarType::I32, 2).unwrap();
    let yr = d.alloc(ScalarType::F32, 2).unwrap();
    let launch_err = |args: &mut [DeviceArg<'_>]| d.run(&compiled, args).unwrap_err().to_string();
    assert_eq!(launch_err(&mut [DeviceArg::buf(&w)]), "kernel `matvec` takes 5 arguments, found 1");
    assert_eq!(
        launch_err(&mut [DeviceArg::buf(&w), DeviceArg::buf(&x), DeviceArg::buf(&yr), 4usize.into(), 2usize.into()]),
        "argument `y` (#2): the kernel writes it, expected &mut [f32], found &[f32]"
    );
    assert_eq!(
        launch_err(&mut [DeviceArg::buf(&w), DeviceArg::buf(&x), DeviceArg::buf(&yi), 4usize.into(), 2usize.into()]),
        "argument `y` (#2): expected &mut [f32], found &[i32]"
    );
    assert_eq!(
        launch_err(&mut [
            DeviceArg::buf(&w),
            DeviceArg::buf(&x),
            DeviceArg::buf_mut(&mut y),
            4u32.into(),
            2usize.into()
        ]),
        "argument `k` (#3): expected usize, found u32"
    );
    assert_eq!(
        launch_err(&mut [
            DeviceArg::buf(&w),
            DeviceArg::buf(&x),
            DeviceArg::buf_mut(&mut y),
            DeviceArg::scalar(Const::f32(1.0)),
            2usize.into()
        ]),
        "argument `k` (#3): expected usize, found f32"
    );
    // y has 2 elements, the grid asks for 3 outputs: the kernel's bounds check reports it.
    assert_eq!(
        launch_err(&mut [
            DeviceArg::buf(&w),
            DeviceArg::buf(&x),
            DeviceArg::buf_mut(&mut y),
            2usize.into(),
            3usize.into()
        ]),
        "kernel `matvec` wrote `y[2]` but `y` has 2 elements"
    );
    assert_eq!(d.read::<f32>(&y).unwrap(), vec![0.0, 0.0], "a failed host launch modified a buffer");
}

#[test]
fn host_streams_and_events() {
    let d = host();
    let s = d.new_stream().unwrap();
    let (a, b) = (d.new_event().unwrap(), d.new_event().unwrap());
    assert!(a.elapsed_ms(&b).unwrap_err().to_string().contains("expected two recorded events"));
    a.record(&s).unwrap();
    b.record(&s).unwrap();
    s.synchronize().unwrap();
    let ms = a.elapsed_ms(&b).unwrap();
    assert!((0.0..1000.0).contains(&ms), "{ms}");
    let mut p = d.alloc_pinned(16).unwrap();
    p.as_mut_slice().unwrap()[3] = 7;
    assert_eq!((p.len(), p.as_slice().unwrap()[3]), (16, 7));
}

#[test]
fn device_choice_and_unbuilt_backends() {
    #[cfg(not(feature = "hip"))]
    assert_eq!(
        Device::hip(0).err().map(|e| e.to_string()).as_deref(),
        Some("hip support is not built into this binary: expected a build with `--features baro-dsl/hip`")
    );
    assert_eq!("gpu".parse::<DeviceKind>().unwrap_err(), DeviceError::UnknownKind { found: "gpu".into() });
    let best = Device::best_available().unwrap();
    if Device::cuda(0).is_err() {
        assert_eq!(best.kind(), DeviceKind::Host);
        assert!(best.name().starts_with("host"), "{}", best.name());
    } else {
        assert_eq!(best.kind(), DeviceKind::Cuda);
    }
}
