//! The integer matrix step (`Stmt::MmaI8`, `mma_i8`): a 16×8 i32 tile of workgroup memory
//! set to the exact product of two int8 tiles (u32 words) of workgroup memory. The host JIT
//! computes exactly the plain-Rust integers (random words and the edge bytes −128, −1, 0, 127,
//! a tile of all −128 at the largest step count); the text form round-trips; the verifier
//! rejects a step count it cannot bound and a step that not the whole wave runs, and executes
//! the step symbolically; sm_90 PTX holds `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32`
//! and the gfx1100 code object `v_wmma_i32_16x16x16_iu8` (offline: nothing runs on a GPU here).
#![cfg(feature = "llvm")]

use crate::gpu_codegen_common::{check_args, parse_kernels, run_tool, tool};
use crate::host_common::*;

use baro_dsl::cache::CompileCache;
use baro_dsl::compile::compile_gpu;
use baro_dsl::ir::{Expr, Kernel, MmaI8, ParamId, Stmt};
use baro_dsl::options::CompileOptions;
use baro_dsl::runtime::Arg;
use baro_dsl::target::Target;
use baro_dsl::testkernels::{mma_tiles, mma_tiles_with, MMA_MAX_STEPS, MMA_MAX_TILES};
use baro_dsl::verify::{check_races, check_wellformed, ErrorKind};

/// The PTX instruction sm_80+ runs per step.
pub const PTX_MMA: &str = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";

/// `y[128 j + 8 m + n] = Σ_k A_j[m][k] · B[k][n]` in i64, written independently of
/// `MmaI8::reference`: bytes unpacked once, summed as wide integers, narrowed at the end
/// (the verifier proved no sum leaves i32).
pub fn reference(a: &[u32], b: &[u32], tiles: usize, steps: usize) -> Vec<i32> {
    let kw = 8 * steps;
    let bytes = |w: u32| w.to_le_bytes().map(|x| x as i8 as i64);
    let mut y = Vec::new();
    for j in 0..tiles {
        for m in 0..16 {
            for n in 0..8 {
                let mut s = 0i64;
                for w in 0..kw {
                    let (x, z) = (bytes(a[(j * 16 + m) * kw + w]), bytes(b[n * kw + w]));
                    s += (0..4).map(|i| x[i] * z[i]).sum::<i64>();
                }
                assert!(i32::try_from(s).is_ok(), "the reference sum {s} leaves i32");
                y.push(s as i32);
            }
        }
    }
    y
}

/// Random tiles for `tiles` outputs of `steps` steps: a third of the words from the edge
/// bytes; with `all_min`, every byte −128 (the largest sum, 32 · steps · 16384).
pub fn inputs(seed: u64, tiles: usize, steps: usize, all_min: bool) -> (Vec<u32>, Vec<u32>) {
    let edge = [0x80u8, 0xff, 0x00, 0x7f, 0x01, 0x81];
    let mut rng = Rng(seed | 1);
    let mut word = |i: usize| -> u32 {
        match (all_min, i % 3) {
            (true, _) => 0x8080_8080,
            (false, 0) => u32::from_le_bytes([0, 1, 2, 3].map(|j| edge[(rng.next() as usize + j) % edge.len()])),
            _ => rng.next() as u32,
        }
    };
    let kw = 8 * steps;
    let a: Vec<u32> = (0..tiles * 16 * kw).map(&mut word).collect();
    let b: Vec<u32> = (0..8 * kw).map(&mut word).collect();
    (a, b)
}

/// `MmaI8::reference` for tile j of `a` (16 rows of `8 steps` words).
fn reference_tile(a: &[u32], b: &[u32], j: usize, steps: usize) -> Vec<i32> {
    let kw = 8 * steps;
    let c = MmaI8::reference(a, j * 16 * kw, kw, b, 0, kw, steps);
    c.iter().flatten().copied().collect()
}

#[test]
fn host_mma_is_the_exact_product() {
    for team in [false, true] {
        let kernel = compile(&mma_tiles(team));
        for steps in 1..=MMA_MAX_STEPS as usize {
            for tiles in 1..=MMA_MAX_TILES as usize {
                for (seed, all_min) in [(1u64, false), (77, false), (5, true)] {
                    let (a, b) = inputs(seed ^ (steps as u64) << 8, tiles, steps, all_min);
                    let mut y = vec![0i32; tiles * 128];
                    kernel
                        .launch(&mut [
                            Arg::buf(&a),
                            Arg::buf(&b),
                            Arg::buf_mut(&mut y),
                            Arg::from(tiles),
                            Arg::from(steps),
                        ])
                        .unwrap();
                    let want = reference(&a, &b, tiles, steps);
                    assert_eq!(y, want, "team {team}, {tiles} tiles of {steps} steps, seed {seed}");
                    for j in 0..tiles {
                        assert_eq!(&want[j * 128..][..128], reference_tile(&a, &b, j, steps), "MmaI8::reference");
                    }
                    if all_min {
                        assert!(y.iter().all(|&x| x == 32 * steps as i32 * 16384), "{y:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn mma_text_form_round_trips() {
    for team in [false, true] {
        let k = mma_tiles(team);
        let text = k.to_string();
        assert!(text.contains("mma_i8 s2:sc["), "{text}");
        println!("{text}");
        let back = Kernel::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, k, "{text}");
        assert_eq!(back.to_string(), text);
    }
    // A tile in a buffer parameter is refused where it is written.
    let text = mma_tiles(false).to_string().replace(", s1:sb[", ", p1:b[");
    let err = Kernel::from_text(&text).unwrap_err().to_string();
    assert!(err.contains("a workgroup array"), "{err}");
}

/// The steps parameter of `mma_tiles`.
const STEPS: ParamId = ParamId(4);

fn errors(k: &Kernel) -> Vec<(ErrorKind, String)> {
    match check_wellformed(k) {
        Ok(()) => Vec::new(),
        Err(es) => es.into_iter().map(|e| (e.kind, e.message)).collect(),
    }
}

#[test]
fn verifier_bounds_the_steps() {
    assert_eq!(errors(&mma_tiles(false)), vec![]);
    // A step count with no bound: the sums could wrap.
    let es = errors(&mma_tiles_with(false, Some(Expr::Param(STEPS))));
    assert_eq!(es.len(), 1, "{es:?}");
    assert_eq!(es[0].0, ErrorKind::OrderFree);
    assert!(es[0].1.contains("must provably not overflow i32"), "{}", es[0].1);
    assert!(es[0].1.contains("found steps `p4:steps` with no bound"), "{}", es[0].1);
    println!("{}", es[0].1);
    // 4095 steps: 131040 products of at most 16384 fit i32; 4096 do not.
    assert_eq!(errors(&mma_tiles_with(false, Some(Expr::index(4095)))), vec![]);
    let es = errors(&mma_tiles_with(false, Some(Expr::index(4096))));
    assert_eq!(es.len(), 1, "{es:?}");
    assert!(es[0].1.contains("up to 131072 products"), "{}", es[0].1);
    let capped = Expr::bin(baro_dsl::ir::BinOp::Min, Expr::Param(STEPS), Expr::index(4096));
    assert_eq!(errors(&mma_tiles_with(false, Some(capped))).len(), 1);
}

/// `mma_tiles(true)` with its team loop rewritten by `f`.
fn with_team_loop(f: impl Fn(&mut Stmt, &mut Kernel)) -> Kernel {
    let mut k = mma_tiles(true);
    let mut body = std::mem::take(&mut k.body);
    let s = body.iter_mut().find(|s| matches!(s, Stmt::ParFor { team: Some(32), .. })).expect("the team loop");
    f(s, &mut k);
    k.body = body;
    k
}

#[test]
fn verifier_rejects_a_step_without_the_whole_wave() {
    let cases = [
        (
            "a plain par loop",
            with_team_loop(|s, _| {
                if let Stmt::ParFor { team, .. } = s {
                    *team = None
                }
            }),
        ),
        (
            "a team of 16",
            with_team_loop(|s, _| {
                if let Stmt::ParFor { team, .. } = s {
                    *team = Some(16)
                }
            }),
        ),
        (
            "a branch on the iteration",
            with_team_loop(|s, _| {
                if let Stmt::ParFor { var, body, .. } = s {
                    let cond = Expr::bin(baro_dsl::ir::BinOp::Eq, Expr::Var(*var), Expr::index(0));
                    *body = vec![Stmt::If { cond, then_body: std::mem::take(body), else_body: vec![] }];
                }
            }),
        ),
    ];
    for (what, k) in cases {
        let es = errors(&k);
        assert_eq!(es.len(), 1, "{what}: {es:?}");
        assert_eq!(es[0].0, ErrorKind::NonUniformSync, "{what}");
        assert!(es[0].1.contains("whole-wave operation"), "{what}: {}", es[0].1);
        println!("{what}: {}", es[0].1);
    }
    assert_eq!(errors(&mma_tiles(true)), vec![]);
}

#[test]
fn verifier_executes_the_step() {
    // The symbolic executor runs the step (dot4 chains into the shared tile) with the race
    // log on, over the kernel's derived shapes.
    for team in [false, true] {
        let n = check_races(&mma_tiles(team)).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(n > 0);
    }
}

#[test]
fn sm90_ptx_uses_mma_sync() {
    let cache = CompileCache::new(None);
    for team in [false, true] {
        let k = mma_tiles(team);
        let a = compile_gpu(&k, &Target::Nvptx { sm: 90 }, &CompileOptions::default(), &cache)
            .unwrap_or_else(|e| panic!("{e}"));
        let ptx = std::str::from_utf8(&a.image).unwrap();
        assert!(ptx.contains(".target sm_90"), "{ptx}");
        let lines: Vec<&str> = ptx.lines().filter(|l| l.contains("mma.")).collect();
        assert!(!lines.is_empty(), "no mma in\n{ptx}");
        assert!(lines.iter().all(|l| l.trim_start().starts_with(PTX_MMA)), "expected {PTX_MMA}, found {lines:?}");
        assert!(!ptx.contains("satfinite"), "a saturating mma");
        // Four A, two B and four C registers in, four D out: `{d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}`.
        let at = ptx.find(PTX_MMA).unwrap() + PTX_MMA.len();
        let operands = &ptx[at..at + ptx[at..].find(';').unwrap()];
        assert_eq!(operands.matches('{').count(), 4, "{operands}");
        assert_eq!(operands.matches("%r").count(), 14, "{operands}");
        // The fragments come from workgroup memory; the lanes sync before reading C.
        assert!(ptx.contains("ld.shared.u32") || ptx.contains("ld.shared.v"), "no shared loads");
        assert!(ptx.contains("bar.warp.sync"), "no warp sync after the stores");
        println!("team {team}: {PTX_MMA} {}", operands.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    // Before sm_80 there is no m16n8k32: the exact per-lane form, no mma instruction.
    let a = compile_gpu(&mma_tiles(false), &Target::Nvptx { sm: 75 }, &CompileOptions::default(), &cache)
        .unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::str::from_utf8(&a.image).unwrap();
    assert!(!ptx.contains("mma.sync"), "sm_75 has no m16n8k32 s8");
}

#[test]
fn gfx1100_code_object_uses_v_wmma() {
    let objdump = tool("llvm-objdump-19", "llvm-19");
    let readelf = tool("llvm-readelf-19", "llvm-19");
    let tmp = tempfile::tempdir().unwrap();
    let cache = CompileCache::new(None);
    for team in [false, true] {
        let k = mma_tiles(team);
        let a = compile_gpu(&k, &"gfx1100".parse().unwrap(), &CompileOptions::default(), &cache)
            .unwrap_or_else(|e| panic!("{e}"));
        let path = tmp.path().join(format!("{}.hsaco", a.entry));
        std::fs::write(&path, &a.image).unwrap();
        let metas = parse_kernels(&run_tool(&readelf, &["--notes"], &path));
        assert_eq!(metas.len(), 1);
        let m = &metas[0];
        assert_eq!(m.get(".name"), Some(a.entry.as_str()));
        assert_eq!(m.num(".wavefront_size"), 32);
        assert_eq!(m.num(".private_segment_fixed_size"), 0, "scratch");
        assert_eq!(m.num(".vgpr_spill_count"), 0);
        check_args(&k, m);
        let disasm = run_tool(&objdump, &["-d", "--mcpu=gfx1100"], &path);
        let lines: Vec<&str> = disasm.lines().filter(|l| l.contains("v_wmma")).collect();
        assert!(!lines.is_empty(), "no v_wmma in\n{disasm}");
        assert!(lines.iter().all(|l| l.contains("v_wmma_i32_16x16x16_iu8")), "{lines:?}");
        // Both operands signed (`neg_lo:[1,1,0]`), no clamp: the sum is the plain integer.
        assert!(lines.iter().all(|l| l.contains("neg_lo:[1,1,0]")), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("clamp")), "{lines:?}");
        println!("team {team}: {} v_wmma, {}", lines.len(), lines[0].trim());
    }
    // gfx942 (wave64, no WMMA): the exact per-lane form.
    let a = compile_gpu(&mma_tiles(false), &"gfx942".parse().unwrap(), &CompileOptions::default(), &cache)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!a.llvm_ir.contains("wmma"));
}
