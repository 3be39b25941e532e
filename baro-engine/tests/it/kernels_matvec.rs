//! Host tests of the projection kernels: f32/f16/bf16 and Q8_0/Q4_K/Q5_K/Q6_K matvecs, byte
//! for byte against their same-order plain-Rust references, on ragged shapes, as plain
//! projections and as expert stacks (ids, x_stride); the quantized ones also against the dot of
//! `model::dequant`'s full dequantization within a tolerance (the factored unit sums differ
//! from dequant's element-wise values only by rounding); and the verifier on each kernel.

use crate::common;

use common::dev;

use baro::reference::{bits, Rng};
use baro_dsl::runtime::{Buffer, Device, DeviceArg as A};
use baro_dsl::verify::verify_kernel;
use baro_dsl::Kernel;
use baro_engine::engine::weight_arg;
use baro_engine::kernels::{matvec, quant};
use baro_engine::model::{dequant, TensorType};
use half::{bf16, f16};

fn run(d: &Device, k: &Kernel, args: &mut [A<'_>]) {
    let c = d.compile(k).unwrap_or_else(|e| panic!("{}: {e}", k.name));
    d.run(&c, args).unwrap_or_else(|e| panic!("{}: {e}", k.name));
}

/// Runs a matvec kernel with the shared argument order.
#[allow(clippy::too_many_arguments)]
fn matvec_run(
    d: &Device,
    k: &Kernel,
    x: &[f32],
    w: &Buffer,
    ids: &[u32],
    kk: usize,
    n: usize,
    x_stride: usize,
) -> Vec<f32> {
    let (xb, ib) = (d.upload(x).unwrap(), d.upload(ids).unwrap());
    let mut y = d.alloc(baro_dsl::ScalarType::F32, ids.len() * n).unwrap();
    run(
        d,
        k,
        &mut [
            A::buf(&xb),
            weight_arg(k, w),
            A::buf(&ib),
            A::buf_mut(&mut y),
            A::from(kk),
            A::from(n),
            A::from(x_stride),
            A::from(ids.len()),
        ],
    );
    d.read(&y).unwrap()
}

/// (ids, x_stride) cases: a plain projection, and three experts of a stack of 4 with shared
/// and per-expert inputs (in top-k order, not sorted).
fn slot_cases(k: usize) -> [(Vec<u32>, usize); 3] {
    [(vec![0], 0), (vec![3, 0, 2], 0), (vec![2, 3, 1], k)]
}

#[test]
fn float_matvecs_match_reference() {
    let d = dev();
    let mut rng = Rng::new(11);
    for (k, n) in [(1usize, 3usize), (31, 5), (33, 4), (2053, 7)] {
        let w32 = rng.vec_f32(4 * n * k);
        let wh: Vec<f16> = w32.iter().map(|&v| f16::from_f32(v)).collect();
        let wb: Vec<bf16> = w32.iter().map(|&v| bf16::from_f32(v)).collect();
        let wh32: Vec<f32> = wh.iter().map(|v| v.to_f32()).collect();
        let wb32: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();
        let bufs = [
            (matvec::matvec_f32(), d.upload(&w32).unwrap(), &w32),
            (matvec::matvec_f16(), d.upload(&wh).unwrap(), &wh32),
            (matvec::matvec_bf16(), d.upload(&wb).unwrap(), &wb32),
        ];
        for (ids, xs) in slot_cases(k) {
            let x = rng.vec_f32(3 * k);
            for (kern, wbuf, wf) in &bufs {
                let got = matvec_run(&d, kern, &x, wbuf, &ids, k, n, xs);
                assert_eq!(
                    bits(&got),
                    bits(&matvec::matvec_reference(&x, wf, &ids, k, n, xs)),
                    "{} k={k} n={n} ids={ids:?}",
                    kern.name
                );
            }
        }
    }
}

/// Random blocks of `ty` with sane f16 scales (a few zero and subnormal ones); every other
/// byte (packed scales, quants, high bits) uniformly random.
fn random_blocks(ty: TensorType, n_blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let bb = ty.block_bytes();
    let mut w: Vec<u8> = (0..n_blocks * bb).map(|_| rng.below(256) as u8).collect();
    let scale_at: &[usize] = match ty {
        TensorType::Q8_0 => &[0],
        TensorType::Q4_K | TensorType::Q5_K => &[0, 2],
        _ => &[bb - 2],
    };
    for b in 0..n_blocks {
        for &at in scale_at {
            let v = match rng.below(16) {
                0 => f16::from_bits(0),
                1 => f16::from_bits(0x8000 | rng.below(0x400) as u16),
                2 => f16::from_bits(rng.below(0x400) as u16),
                _ => f16::from_f32(rng.f32() / 32.0),
            };
            w[b * bb + at..b * bb + at + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    w
}

fn quant_cases() -> [(TensorType, Kernel); 4] {
    [
        (TensorType::Q8_0, quant::matvec_q8_0()),
        (TensorType::Q4_K, quant::matvec_q4_k()),
        (TensorType::Q5_K, quant::matvec_q5_k()),
        (TensorType::Q6_K, quant::matvec_q6_k()),
    ]
}

#[test]
fn quant_matvecs_match_reference_and_dequant() {
    let d = dev();
    let mut rng = Rng::new(12);
    let mut compared = 0;
    for (ty, kern) in quant_cases() {
        let bl = ty.block_len();
        // k: one block (fewer units than lanes), 3 blocks, units ragged past 32 lanes (33
        // Q8_0 blocks; 40 or 80 K-quant units), and the model's 2048 and 512.
        let ragged = if bl == 32 { 33 * 32 } else { 5 * 256 };
        for (k, n) in [(bl, 3usize), (bl * 3, 2), (ragged, 2), (2048, 5), (512, 3)] {
            let w = random_blocks(ty, 4 * n * k / bl, &mut rng);
            let wbuf = d.upload(&w).unwrap();
            let wf = dequant::to_f32(ty, &w);
            for (ids, xs) in slot_cases(k) {
                let x = rng.vec_f32(3 * k);
                let got = matvec_run(&d, &kern, &x, &wbuf, &ids, k, n, xs);
                let want = quant::matvec_quant_reference(ty, &x, &w, &ids, k, n, xs);
                assert_eq!(bits(&got), bits(&want), "{} k={k} n={n} ids={ids:?}", kern.name);
                for (s, &e) in ids.iter().enumerate() {
                    for o in 0..n {
                        let row = &wf[(e as usize * n + o) * k..][..k];
                        let xr = &x[s * xs..][..k];
                        let exact: f64 = row.iter().zip(xr).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
                        let mag: f64 = row.iter().zip(xr).map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs()).sum();
                        let err = (f64::from(got[s * n + o]) - exact).abs();
                        assert!(
                            err <= 1e-5 * mag + 1e-30,
                            "{} k={k} row {o} slot {s}: {} vs dequant dot {exact} (|Σ| {mag})",
                            kern.name,
                            got[s * n + o]
                        );
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 100, "{compared}");
}

#[test]
fn matvec_kernels_verify() {
    let mut ks = vec![matvec::matvec_f32(), matvec::matvec_f16(), matvec::matvec_bf16()];
    ks.extend(quant_cases().into_iter().map(|(_, k)| k));
    ks.extend([quant::matvec_q8_0_xs(), quant::matvec_q4_k_xs(), quant::matvec_q5_k_xs(), quant::matvec_q6_k_xs()]);
    for k in ks {
        let t = std::time::Instant::now();
        let proof = verify_kernel(&k).unwrap_or_else(|e| panic!("{}: {e:?}", k.name));
        assert!(proof.regions_checked > 0, "{}: no lane region checked", k.name);
        println!("{}: {} shapes, {} regions, {:?}", k.name, proof.shapes, proof.regions_checked, t.elapsed());
    }
}

/// Each rows sibling (one launch over `rows` (token, expert) pairs, 8 rows per workgroup)
/// against its m=1 kernel run once per row with that row's input and expert: byte for byte,
/// for every weight type, row counts below, at and across the tile of 8.
#[test]
fn matvec_rows_equal_m1_per_row() {
    let d = dev();
    let mut rng = Rng::new(13);
    let float = [
        (matvec::matvec_f32(), matvec::matvec_f32_rows()),
        (matvec::matvec_f16(), matvec::matvec_f16_rows()),
        (matvec::matvec_bf16(), matvec::matvec_bf16_rows()),
    ];
    let quant = [
        (TensorType::Q8_0, quant::matvec_q8_0(), quant::matvec_q8_0_rows()),
        (TensorType::Q4_K, quant::matvec_q4_k(), quant::matvec_q4_k_rows()),
        (TensorType::Q5_K, quant::matvec_q5_k(), quant::matvec_q5_k_rows()),
        (TensorType::Q6_K, quant::matvec_q6_k(), quant::matvec_q6_k_rows()),
    ];
    let (experts, n) = (4usize, 5usize);
    let mut cases: Vec<(Kernel, Kernel, usize, Buffer)> = Vec::new();
    for (i, (m1, rows)) in float.into_iter().enumerate() {
        let k = 67;
        let w = rng.vec_f32(experts * n * k);
        let buf = match i {
            0 => d.upload(&w).unwrap(),
            1 => d.upload(&w.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>()).unwrap(),
            _ => d.upload(&w.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>()).unwrap(),
        };
        cases.push((m1, rows, k, buf));
    }
    for (ty, m1, rows) in quant {
        let k = 2 * 256;
        cases.push((m1, rows, k, d.upload(&random_blocks(ty, experts * n * k / ty.block_len(), &mut rng)).unwrap()));
    }
    for (m1, rows_k, k, w) in &cases {
        for rows in [1usize, 7, 8, 9, 17] {
            let x = rng.vec_f32(rows * k);
            let ids: Vec<u32> = (0..rows).map(|_| rng.below(experts as u64) as u32).collect();
            let (xb, ib) = (d.upload(&x).unwrap(), d.upload(&ids).unwrap());
            let mut y = d.alloc(baro_dsl::ScalarType::F32, rows * n).unwrap();
            run(
                &d,
                rows_k,
                &mut [
                    A::buf(&xb),
                    weight_arg(rows_k, w),
                    A::buf(&ib),
                    A::buf_mut(&mut y),
                    A::from(*k),
                    A::from(n),
                    A::from(0usize),
                    A::from(1usize),
                    A::from(rows),
                ],
            );
            let got = d.read(&y).unwrap();
            let want: Vec<f32> =
                (0..rows).flat_map(|r| matvec_run(&d, m1, &x[r * k..][..*k], w, &ids[r..r + 1], *k, n, 0)).collect();
            assert_eq!(bits(&got), bits(&want), "{} vs {} rows={rows} k={k}", rows_k.name, m1.name);
        }
    }
}

/// The 8-row matvecs of one matrix (a reduction over rows per output) against the plain-Rust
/// references and against the serial rows kernels they replace, byte for byte: row counts
/// below, at and across the tile of 8 (not multiples of 8), f32 lengths that are not
/// multiples of 32 lanes, Q8_0 lengths not a multiple of 32 units per lane, outputs across
/// workgroups of 8, and matrix 2 of a stack (`ids[0]`).
#[test]
fn rows8_matvecs_equal_references_and_serial_rows() {
    let d = dev();
    let mut rng = Rng::new(15);
    let mut compared = 0;
    let (f32_8, f32_serial) = (matvec::matvec_f32_rows8(), matvec::matvec_f32_rows());
    let (q8_8, q8_serial) = (quant::matvec_q8_0_rows8(), quant::matvec_q8_0_xs_rows());
    let ty = TensorType::Q8_0;
    for (k, n, q8_units) in [(1usize, 3usize, 1usize), (33, 9, 3), (100, 17, 33), (1057, 5, 70)] {
        let w32 = rng.vec_f32(3 * n * k);
        let wf = d.upload(&w32).unwrap();
        let kq = q8_units * 32;
        let wq = random_blocks(ty, 3 * n * kq / ty.block_len(), &mut rng);
        let wqb = d.upload(&wq).unwrap();
        for rows in [1usize, 3, 7, 8, 9, 17] {
            for (kern, serial, w, kk) in [(&f32_8, &f32_serial, &wf, k), (&q8_8, &q8_serial, &wqb, kq)] {
                let x = rng.vec_f32(rows * kk);
                let ids = vec![2u32; rows];
                let (xb, ib) = (d.upload(&x).unwrap(), d.upload(&ids).unwrap());
                let mut out = Vec::new();
                for kern in [kern, serial] {
                    let mut y = d.alloc(baro_dsl::ScalarType::F32, rows * n).unwrap();
                    run(
                        &d,
                        kern,
                        &mut [
                            A::buf(&xb),
                            weight_arg(kern, w),
                            A::buf(&ib),
                            A::buf_mut(&mut y),
                            A::from(kk),
                            A::from(n),
                            A::from(0usize),
                            A::from(1usize),
                            A::from(rows),
                        ],
                    );
                    out.push(d.read(&y).unwrap());
                }
                let want: Vec<f32> = (0..rows)
                    .flat_map(|r| {
                        let xr = &x[r * kk..][..kk];
                        if kern.name == f32_8.name {
                            matvec::matvec_reference(xr, &w32, &[2], kk, n, 0)
                        } else {
                            quant::matvec_quant_reference(ty, xr, &wq, &[2], kk, n, 0)
                        }
                    })
                    .collect();
                assert_eq!(bits(&out[0]), bits(&want), "{} rows={rows} k={kk} n={n}: against the reference", kern.name);
                assert_eq!(
                    bits(&out[0]),
                    bits(&out[1]),
                    "{} rows={rows} k={kk} n={n}: against {}",
                    kern.name,
                    serial.name
                );
                compared += want.len();
            }
        }
    }
    assert_eq!(compared, 2 * (3 + 9 + 17 + 5) * (1 + 3 + 7 + 8 + 9 + 17));
}

/// The `_xs` matvecs (x staged in workgroup memory) against the plain ones, byte for byte: m = 1
/// as projections and expert stacks, and rows across the tile of 8, for every quantized type,
/// k from one block to `XS_MAX_K`; and a k past `XS_MAX_K` is a bounds error, not a result.
#[test]
fn staged_x_matvecs_equal_the_plain_ones() {
    let d = dev();
    let mut rng = Rng::new(14);
    let cases = [
        (
            TensorType::Q8_0,
            quant::matvec_q8_0(),
            quant::matvec_q8_0_xs(),
            quant::matvec_q8_0_rows(),
            quant::matvec_q8_0_xs_rows(),
        ),
        (
            TensorType::Q4_K,
            quant::matvec_q4_k(),
            quant::matvec_q4_k_xs(),
            quant::matvec_q4_k_rows(),
            quant::matvec_q4_k_xs_rows(),
        ),
        (
            TensorType::Q5_K,
            quant::matvec_q5_k(),
            quant::matvec_q5_k_xs(),
            quant::matvec_q5_k_rows(),
            quant::matvec_q5_k_xs_rows(),
        ),
        (
            TensorType::Q6_K,
            quant::matvec_q6_k(),
            quant::matvec_q6_k_xs(),
            quant::matvec_q6_k_rows(),
            quant::matvec_q6_k_xs_rows(),
        ),
    ];
    let mut compared = 0;
    for (ty, plain, xs, plain_rows, xs_rows) in &cases {
        let bl = ty.block_len();
        // n = 37 and 4103: several workgroups of outputs, the last one partial, with 8 and (from
        // quant::XS_WIDE_OUTPUTS outputs on) 16 outputs per `_xs` workgroup.
        for (k, n) in [(bl, 3usize), (bl, 37), (bl, quant::XS_WIDE_OUTPUTS + 7), (5 * 256, 2), (quant::XS_MAX_K, 2)] {
            let w = random_blocks(*ty, 4 * n * k / bl, &mut rng);
            let wbuf = d.upload(&w).unwrap();
            for (ids, stride) in slot_cases(k) {
                let x = rng.vec_f32(3 * k);
                let want = matvec_run(&d, plain, &x, &wbuf, &ids, k, n, stride);
                assert_eq!(
                    bits(&matvec_run(&d, xs, &x, &wbuf, &ids, k, n, stride)),
                    bits(&want),
                    "{} k={k} ids={ids:?}",
                    xs.name
                );
                compared += want.len();
            }
            for rows in [1usize, 9] {
                let x = rng.vec_f32(rows * k);
                let ids: Vec<u32> = (0..rows).map(|_| rng.below(4) as u32).collect();
                let (xb, ib) = (d.upload(&x).unwrap(), d.upload(&ids).unwrap());
                let mut got = Vec::new();
                for kern in [plain_rows, xs_rows] {
                    let mut y = d.alloc(baro_dsl::ScalarType::F32, rows * n).unwrap();
                    run(
                        &d,
                        kern,
                        &mut [
                            A::buf(&xb),
                            weight_arg(kern, &wbuf),
                            A::buf(&ib),
                            A::buf_mut(&mut y),
                            A::from(k),
                            A::from(n),
                            A::from(0usize),
                            A::from(1usize),
                            A::from(rows),
                        ],
                    );
                    got.push(d.read(&y).unwrap());
                }
                assert_eq!(bits(&got[1]), bits(&got[0]), "{} rows={rows} k={k}", xs_rows.name);
                compared += got[0].len();
            }
        }
        // One block past the staged array: the copy into it fails its bounds check.
        let k = quant::XS_MAX_K + 256;
        let wbuf = d.upload(&random_blocks(*ty, k / bl, &mut rng)).unwrap();
        let (xb, ib) = (d.upload(&rng.vec_f32(k)).unwrap(), d.upload(&[0u32]).unwrap());
        let mut y = d.alloc(baro_dsl::ScalarType::F32, 1).unwrap();
        let c = d.compile(xs).unwrap();
        let e = d
            .run(
                &c,
                &mut [
                    A::buf(&xb),
                    weight_arg(xs, &wbuf),
                    A::buf(&ib),
                    A::buf_mut(&mut y),
                    A::from(k),
                    A::from(1usize),
                    A::from(0usize),
                    A::from(1usize),
                ],
            )
            .expect_err("k past XS_MAX_K ran");
        // Which index is reported is the first failing iteration's: 4224 in source order, any
        // past it in the host's shuffled order (`BARO_HOST_ORDER`), the winning thread's on a GPU.
        let msg = e.to_string();
        let index = msg
            .split("wrote shared `xs[")
            .nth(1)
            .and_then(|t| t.split(']').next())
            .and_then(|i| i.parse::<usize>().ok());
        assert!(index.is_some_and(|i| i >= 4224) && msg.contains("but `xs` has 4224 elements"), "{}: {e}", xs.name);
    }
    assert!(compared > 400, "{compared}");
}

/// `kernels::decode_matvec` names a kernel of `decode()` for every type, the `_xs` one for a
/// quantized matrix up to `XS_MAX_K` columns and the plain one past it (what decode launches and
/// `matvec_bw` measures).
#[test]
fn decode_matvec_picks_a_decode_kernel_for_every_type() {
    use baro_engine::kernels::{decode_matvec, decode_matvec_name};
    for ty in TensorType::ALL {
        for cols in [ty.block_len(), quant::XS_MAX_K, quant::XS_MAX_K + 256] {
            let name = decode_matvec_name(ty, cols);
            assert_eq!(decode_matvec(ty, cols).name, name);
            let staged = ty.is_quantized() && cols <= quant::XS_MAX_K;
            assert_eq!(name.ends_with("_xs"), staged, "{ty} at {cols} columns: {name}");
        }
    }
}
