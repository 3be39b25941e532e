//! The CUDA runtime (feature `cuda`). Without a driver, opening a device is the clear error
//! "no CUDA driver (libcuda.so.1) found", never a panic. With a GPU, a kernel runs and matches
//! the host byte for byte: that test is `#[ignore]`d by default and run by the GPU tier
//! (`./dev test-gpu`), where a missing GPU fails it (the H200 machine, which has no Rust
//! toolchain, runs the conformance binary instead). So are the launch-graph checks of
//! `device_graph` on a GPU: CUDA graphs built, updated and rebuilt, and bounds errors read
//! from a graph's own error records.
#![cfg(feature = "cuda")]

use baro_dsl::runtime::cuda;
use baro_dsl::runtime::{Device, DeviceArg, DeviceError};
use baro_dsl::{testkernels, ScalarType};

#[test]
fn no_driver_is_a_clear_error_not_a_panic() {
    let r = std::panic::catch_unwind(|| Device::cuda(0).map(|d| d.name()));
    let r = r.expect("Device::cuda panicked");
    if cuda::driver_present() {
        // A machine with a driver: either a device or a clear "no cuda device 0".
        if let Err(e) = r {
            assert!(matches!(e, DeviceError::NoDevice { .. } | DeviceError::Driver { .. }), "{e}");
        }
    } else {
        assert_eq!(r.unwrap_err().to_string(), "no CUDA driver (libcuda.so.1) found");
        assert_eq!(cuda::device_count().unwrap_err().to_string(), "no CUDA driver (libcuda.so.1) found");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: the GPU tier (./dev test-gpu)"]
fn a_kernel_on_the_gpu_matches_the_host() {
    let gpu = Device::cuda(0).unwrap_or_else(|e| panic!("this test needs an NVIDIA GPU: {e}"));
    let host = Device::host().unwrap();
    let (k, m) = (1031usize, 7usize);
    let w: Vec<f32> = (0..k * m).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 37.0).collect();
    let x: Vec<f32> = (0..k).map(|i| ((i * 104_729 % 997) as f32 - 498.0) / 91.0).collect();
    let mut outs = Vec::new();
    for d in [&host, &gpu] {
        let kern = d.compile(&testkernels::matvec()).unwrap();
        let (wb, xb) = (d.upload(&w).unwrap(), d.upload(&x).unwrap());
        let mut y = d.alloc(ScalarType::F32, m).unwrap();
        d.run(&kern, &mut [DeviceArg::buf(&wb), DeviceArg::buf(&xb), DeviceArg::buf_mut(&mut y), k.into(), m.into()])
            .unwrap();
        outs.push(d.read_bytes(&y).unwrap());
        // The same bounds error as the host, through the error record.
        let e = d
            .run(
                &kern,
                &mut [
                    DeviceArg::buf(&wb),
                    DeviceArg::buf(&xb),
                    DeviceArg::buf_mut(&mut y),
                    2usize.into(),
                    (m + 1).into(),
                ],
            )
            .unwrap_err();
        assert_eq!(e.to_string(), format!("kernel `matvec` wrote `y[{m}]` but `y` has {m} elements"));
    }
    assert_eq!(outs[0], outs[1]);
}

fn gpu() -> Device {
    Device::cuda(0).unwrap_or_else(|e| panic!("this test needs an NVIDIA GPU: {e}"))
}

#[test]
#[ignore = "needs an NVIDIA GPU: the GPU tier (./dev test-gpu)"]
fn cuda_graph_replays_equal_direct_launches() {
    super::device_graph::replay_matches_direct_launches(&gpu());
}

#[test]
#[ignore = "needs an NVIDIA GPU: the GPU tier (./dev test-gpu)"]
fn a_bounds_error_inside_a_cuda_graph_names_the_kernel() {
    super::device_graph::replay_reports_bounds_errors(&gpu());
}

#[test]
#[ignore = "needs an NVIDIA GPU: the GPU tier (./dev test-gpu)"]
fn the_matrix_step_on_the_gpu_matches_the_host() {
    // sm_80+: `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32` per step; the host: loops of
    // dot4. Both forms (uniform code, a team of 32 per tile), 1–4 steps, 1–2 tiles, random
    // words with the edge bytes and, at 4 steps, a tile of all −128 (the largest sum).
    let gpu = gpu();
    let host = Device::host().unwrap();
    for team in [false, true] {
        let kernels = [&host, &gpu].map(|d| d.compile(&testkernels::mma_tiles(team)).unwrap());
        for steps in 1..=testkernels::MMA_MAX_STEPS as usize {
            for tiles in 1..=testkernels::MMA_MAX_TILES as usize {
                let (a, b) = super::int_mma::inputs(31 * steps as u64 + tiles as u64, tiles, steps, steps == 4);
                let want = super::int_mma::reference(&a, &b, tiles, steps);
                let mut outs = Vec::new();
                for (d, kern) in [&host, &gpu].into_iter().zip(&kernels) {
                    let (ab, bb) = (d.upload(&a).unwrap(), d.upload(&b).unwrap());
                    let mut y = d.alloc(ScalarType::I32, tiles * 128).unwrap();
                    d.run(
                        kern,
                        &mut [
                            DeviceArg::buf(&ab),
                            DeviceArg::buf(&bb),
                            DeviceArg::buf_mut(&mut y),
                            tiles.into(),
                            steps.into(),
                        ],
                    )
                    .unwrap();
                    outs.push(d.read::<i32>(&y).unwrap());
                }
                assert_eq!(outs[0], want, "host, team {team}, {tiles} tiles of {steps} steps");
                assert_eq!(outs[1], want, "{}, team {team}, {tiles} tiles of {steps} steps", gpu.name());
            }
        }
    }
}
