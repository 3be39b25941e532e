//! Offline checks of the NVPTX code generation (no GPU needed): every test kernel compiles
//! for sm_90 to PTX with one `.entry` taking the launcher's parameters, strict IEEE float
//! instructions (`mul.rn`/`add.rn`, never `fma`), and hardware butterflies for lane sums.
#![cfg(feature = "llvm")]

use crate::gpu_codegen_common;

use baro_dsl::cache::CompileCache;
use baro_dsl::compile::{compile_gpu, CompileError};
use baro_dsl::options::CompileOptions;
use baro_dsl::target::Target;
use gpu_codegen_common::{expected_abi, kernels};

fn sm90() -> Target {
    Target::Nvptx { sm: 90 }
}

#[test]
fn every_kernel_compiles_to_strict_ptx() {
    let cache = CompileCache::new(None);
    let ks = kernels();
    assert!(ks.len() >= 14, "expected the full test kernel set, found {}", ks.len());
    for k in &ks {
        let a = compile_gpu(k, &sm90(), &CompileOptions::default(), &cache).unwrap_or_else(|e| panic!("{e}"));
        let ptx = std::str::from_utf8(&a.image).expect("ptx is text");
        assert!(!a.image.contains(&0), "{}: ptx contains a NUL", k.name);
        assert_eq!(ptx, a.asm, "{}: for NVPTX the image is the assembly", k.name);
        assert!(ptx.contains(".target sm_90"), "{}: no `.target sm_90`", k.name);
        assert!(ptx.contains(".version 8.0"), "{}: expected PTX 8.0", k.name);
        let entry = format!(".visible .entry {}(", a.entry);
        assert_eq!(ptx.matches(".entry").count(), 1, "{}: expected one entry", k.name);
        let start = ptx.find(&entry).unwrap_or_else(|| panic!("{}: no `{entry}` in\n{ptx}", k.name));
        let params = &ptx[start..start + ptx[start..].find(')').unwrap()];
        assert_eq!(
            params.matches(".param .u64").count(),
            expected_abi(k).len(),
            "{}: entry parameters\n{params}",
            k.name
        );
        assert!(ptx.contains(&format!(".maxntid {}, 1, 1", a.block_dim)), "{}: launch bound", k.name);
        assert_eq!(a.block_dim, 32, "{}: one warp", k.name);
        assert!(!ptx.contains("fma."), "{}: contains an fma", k.name);
        assert!(!ptx.contains(".ftz"), "{}: flushes denormals", k.name);
        assert!(!ptx.contains(".approx"), "{}: uses an approximate instruction", k.name);
        assert!(ptx.contains("add.rn.f32"), "{}: float sums should be add.rn.f32", k.name);
        assert!(
            ptx.contains("shfl.sync.bfly.b32") || ptx.contains("shfl.sync.idx.b32"),
            "{}: no lane exchange",
            k.name
        );
        assert!(a.llvm_ir.contains("ptx_kernel"), "{}: entry must use the ptx_kernel calling convention", k.name);
        assert!(
            !a.llvm_ir.contains("fmuladd") && !a.llvm_ir.contains(" fast ") && !a.llvm_ir.contains(" contract "),
            "{}: fast-math in the IR",
            k.name
        );
    }
}

#[test]
fn butterflies_products_and_sequential_combines() {
    let cache = CompileCache::new(None);
    let o = CompileOptions::default();
    let mv = compile_gpu(&baro_dsl::testkernels::matvec(), &sm90(), &o, &cache).unwrap();
    let ptx = std::str::from_utf8(&mv.image).unwrap();
    // 16-8-4-2-1, then one broadcast of the result from lane 0.
    assert_eq!(ptx.matches("shfl.sync.bfly.b32").count(), 5, "{ptx}");
    assert!(ptx.contains("mul.rn.f32"), "products must be mul.rn.f32");
    let seq = compile_gpu(&baro_dsl::testkernels::matvec_seq_combine(), &sm90(), &o, &cache).unwrap();
    let ptx = std::str::from_utf8(&seq.image).unwrap();
    // lanes(32, seq): lane 0 reads lanes 1..31 in order, via xor masks 1..31.
    assert_eq!(ptx.matches("shfl.sync.bfly.b32").count(), 31, "{ptx}");
}

#[test]
fn a_lane_region_wider_than_the_wave_exchanges_through_shared_memory() {
    let (_, lanes64, _) =
        baro_dsl::testkernels::negative_controls().into_iter().find(|(w, _, _)| *w == "lanes64").unwrap();
    let cache = CompileCache::new(None);
    // Two 32-lane warps: the xor-32 step goes through shared memory between two barriers,
    // the steps below 32 are hardware butterflies, the broadcast from lane 0 is shared too.
    let a = compile_gpu(&lanes64, &sm90(), &CompileOptions::default(), &cache).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.block_dim, 64);
    let ptx = std::str::from_utf8(&a.image).unwrap();
    assert!(ptx.contains(".maxntid 64, 1, 1"), "{ptx}");
    assert_eq!(ptx.matches("shfl.sync.bfly.b32").count(), 5, "{ptx}");
    assert_eq!(ptx.matches("bar.sync").count(), 4, "{ptx}");
    assert!(ptx.contains("st.shared") && ptx.contains("ld.shared"), "{ptx}");
    // gfx942 has 64-lane waves: the same kernel runs in one wave there, no barrier.
    let g = compile_gpu(&lanes64, &"gfx942".parse().unwrap(), &CompileOptions::default(), &cache).unwrap();
    assert_eq!(g.block_dim, 64);
    assert!(!g.asm.contains("s_barrier"), "{}", g.asm);
    let host = compile_gpu(&lanes64, &Target::Host, &CompileOptions::default(), &cache).unwrap_err();
    assert!(host.to_string().contains("expected a GPU target"), "{host}");
}

#[test]
fn other_sm_versions_are_selectable() {
    let cache = CompileCache::new(None);
    let a = compile_gpu(
        &baro_dsl::testkernels::rmsnorm(false),
        &Target::Nvptx { sm: 80 },
        &CompileOptions::default(),
        &cache,
    )
    .unwrap();
    let ptx = std::str::from_utf8(&a.image).unwrap();
    assert!(ptx.contains(".target sm_80"), "{ptx}");
    assert!(ptx.contains("bar.sync") || ptx.contains("barrier.sync"), "the ParFor ends with a barrier");
    assert!(ptx.contains("sqrt.rn.f32") || !a.llvm_ir.contains("llvm.sqrt"), "sqrt must be correctly rounded");
}

/// `y[0] = sum(i in 0..n, lanes(24, seq), x[i])`: a lane count that is not a power of two.
fn sum24() -> baro_dsl::Kernel {
    use baro_dsl::ir::{Access, Buf, Expr, ParamKind, Reduce, ReduceOp, ScalarType, Stmt};
    let mut k = baro_dsl::Kernel::new("sum24");
    let x = k.add_param("x", ParamKind::Buffer { elem: ScalarType::F32, access: Access::Read });
    let y = k.add_param("y", ParamKind::Buffer { elem: ScalarType::F32, access: Access::ReadWrite });
    let n = k.add_param("n", ParamKind::Scalar(ScalarType::INDEX));
    let i = k.add_var("i", ScalarType::INDEX, false);
    let sum = Expr::Reduce(Box::new(Reduce {
        op: ReduceOp::Add,
        ty: ScalarType::F32,
        schedule: baro_dsl::Schedule::lanes(24, baro_dsl::Combine::Sequential),
        var: i,
        len: Expr::Param(n),
        body: Expr::load(Buf::Param(x), Expr::Var(i)),
    }));
    k.grid = vec![Expr::index(1)];
    k.body = vec![Stmt::Store { buf: Buf::Param(y), index: Expr::index(0), value: sum }];
    k
}

#[test]
fn a_partial_wave_region_exchanges_only_among_its_lanes() {
    let cache = CompileCache::new(None);
    let a = compile_gpu(&sum24(), &sm90(), &CompileOptions::default(), &cache).unwrap_or_else(|e| panic!("{e}"));
    let ptx = std::str::from_utf8(&a.image).unwrap();
    assert_eq!(a.block_dim, 32);
    // Lanes 0..24 take part (member mask 0x00ffffff); partners outside them read their own value.
    assert!(ptx.contains("shfl.sync.idx.b32"), "{ptx}");
    assert!(ptx.contains("16777215"), "member mask of 24 lanes:\n{ptx}");
    for arch in ["gfx1100", "gfx942"] {
        compile_gpu(&sum24(), &arch.parse().unwrap(), &CompileOptions::default(), &cache)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn text_form_kernels_compile_or_name_the_wave_width() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/text");
    let cache = CompileCache::new(None);
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("ir") {
            continue;
        }
        let k = baro_dsl::Kernel::from_text(&std::fs::read_to_string(&p).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        for t in ["sm_90", "gfx1100", "gfx942"] {
            let target: Target = t.parse().unwrap();
            let widest = baro_dsl::lanes::expand(&k)
                .unwrap()
                .body
                .iter()
                .filter_map(|s| match s {
                    baro_dsl::ir::Stmt::Lanes { count, .. } => Some(*count),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            let result = compile_gpu(&k, &target, &CompileOptions::default(), &cache);
            if baro_dsl::verify::check_wellformed(&k).is_err() {
                // Some text fixtures are parser tests, not valid kernels: lowering never sees them.
                assert!(matches!(result, Err(CompileError::Verify { .. })), "{} on {t}", k.name);
                continue;
            }
            match result {
                Ok(a) => {
                    assert!(widest <= target.wave_width().unwrap(), "{} on {t}", k.name);
                    if k.grid.len() > 1 && t == "sm_90" {
                        assert!(std::str::from_utf8(&a.image).unwrap().contains("%ctaid.y"), "{}: grid axis 1", k.name);
                    }
                }
                Err(e) => assert!(
                    widest > target.wave_width().unwrap() && e.to_string().contains("wave width"),
                    "{} on {t}: {e}",
                    k.name
                ),
            }
            n += 1;
        }
    }
    assert!(n >= 6, "expected the well-formed text kernels (gemv_rows, rmsnorm) on 3 targets, compiled {n}");
}

#[test]
fn block_sets_the_workgroup_width_without_changing_lane_regions() {
    let cache = CompileCache::new(None);
    let o = CompileOptions::default();
    let mut k = baro_dsl::testkernels::rmsnorm(false);
    k.block = Some(256);
    let a = compile_gpu(&k, &sm90(), &o, &cache).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.block_dim, 256);
    let ptx = std::str::from_utf8(&a.image).unwrap();
    assert!(ptx.contains(".maxntid 256, 1, 1"), "{ptx}");
    // The 32-lane sum keeps its hardware butterfly; only the broadcast crosses waves.
    assert_eq!(ptx.matches("shfl.sync.bfly.b32").count(), 5, "{ptx}");
    // A block below the wave width is rounded up to it; on gfx1100 (wave32) and gfx942 (wave64).
    k.block = Some(20);
    assert_eq!(compile_gpu(&k, &sm90(), &o, &cache).unwrap().block_dim, 32);
    assert_eq!(compile_gpu(&k, &"gfx942".parse().unwrap(), &o, &cache).unwrap().block_dim, 64);
    k.block = Some(100);
    assert_eq!(compile_gpu(&k, &"gfx1100".parse().unwrap(), &o, &cache).unwrap().block_dim, 128);
    // The text form carries it.
    k.block = Some(256);
    let text = k.to_string();
    assert!(text.contains("block 256"), "{text}");
    let back: baro_dsl::Kernel = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back, k);
}

#[test]
fn a_lane_region_wider_than_the_wave_must_still_span_the_block() {
    let (_, mut lanes64, _) =
        baro_dsl::testkernels::negative_controls().into_iter().find(|(w, _, _)| *w == "lanes64").unwrap();
    lanes64.block = Some(128);
    let cache = CompileCache::new(None);
    let e = compile_gpu(&lanes64, &sm90(), &CompileOptions::default(), &cache).unwrap_err().to_string();
    assert!(e.contains("a lane region of 64 lanes in a workgroup of 128 threads"), "{e}");
}

/// Expression `let`s (a `#[kernel]` block used as a value) lower to PTX like any value.
#[test]
fn expression_lets_compile_for_sm90() {
    let k = baro_dsl::testkernels::expression_lets();
    let a = compile_gpu(&k, &sm90(), &CompileOptions::default(), &CompileCache::new(None))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(a.asm.contains(".visible .entry expression_lets("), "{}", a.asm);
    assert!(a.asm.contains("mul.rn.f32") && !a.asm.contains("fma."), "{}", a.asm);
}

/// An explicit `fma` is one `fma.rn.f32` (one rounding, no flush); `a * b + c` beside it stays
/// `mul.rn.f32` then `add.rn.f32`.
#[test]
fn an_explicit_fma_is_fma_rn_and_nothing_else_fuses() {
    let cache = CompileCache::new(None);
    // One copy of each loop body: versioning (checked and unchecked copies) and unrolling off.
    let o = CompileOptions { loop_versioning: false, lane_unroll: 1, seq_unroll: 1, ..Default::default() };
    for k in [baro_dsl::testkernels::fma_and_mul_add(), baro_dsl::testkernels::matvec_fma()] {
        let a = compile_gpu(&k, &sm90(), &o, &cache).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.asm.matches("fma.rn.f32").count(), 1, "{}: one fma.rn.f32\n{}", k.name, a.asm);
        assert_eq!(a.asm.matches("fma.").count(), 1, "{}: no other fma\n{}", k.name, a.asm);
        assert!(
            a.asm.contains("mul.rn.f32") && a.asm.contains("add.rn.f32"),
            "{}: the unfused multiply and add\n{}",
            k.name,
            a.asm
        );
        assert!(!a.asm.contains(".ftz") && !a.asm.contains(".approx"), "{}\n{}", k.name, a.asm);
        assert!(a.llvm_ir.contains("@llvm.fma.f32("), "{}", a.llvm_ir);
        assert!(
            !a.llvm_ir.contains("fmuladd") && !a.llvm_ir.contains(" fast ") && !a.llvm_ir.contains(" contract "),
            "{}: fast-math in the IR",
            k.name
        );
    }
}

/// An `fma_sum` (`sum!(.., fma(x, w))`): each lane's `acc = fma(x_i, w_i, acc)` is one
/// `fma.rn.f32` with no separate multiply, and the butterfly still combines by `add.rn.f32`.
#[test]
fn a_fused_sum_accumulates_by_fma_rn_and_combines_by_add_rn() {
    let o = CompileOptions { loop_versioning: false, lane_unroll: 1, seq_unroll: 1, ..Default::default() };
    let k = baro_dsl::testkernels::matvec_fused();
    let a = compile_gpu(&k, &sm90(), &o, &CompileCache::new(None)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.asm.matches("fma.rn.f32").count(), 1, "{}", a.asm);
    assert_eq!(a.asm.matches("fma.").count(), 1, "{}", a.asm);
    assert!(!a.asm.contains("mul.rn.f32"), "the products are fused, never rounded alone\n{}", a.asm);
    assert_eq!(a.asm.matches("add.rn.f32").count(), 5, "the butterfly's five additions\n{}", a.asm);
    assert_eq!(a.asm.matches("shfl.sync.bfly.b32").count(), 5, "{}", a.asm);
}

/// Every fused-sum kernel of the verifier's pairs (a butterfly over lanes, blocks of 4 fused
/// then a lane butterfly over the block sums; m=1 and rows; 4 rows in one reduction over
/// rows) lowers for sm_90 with its fmas.
#[test]
fn every_fused_sum_pair_compiles_for_sm90() {
    let cache = CompileCache::new(None);
    let mut compiled = 0;
    for (rows, m1) in baro_dsl::testkernels::verifier_pairs() {
        for k in [rows, m1].into_iter().filter(|k| k.name.contains("fused")) {
            let a = compile_gpu(&k, &sm90(), &CompileOptions::default(), &cache)
                .unwrap_or_else(|e| panic!("{}: {e}", k.name));
            assert!(a.asm.contains("fma.rn.f32") && !a.asm.contains("mul.rn.f32"), "{}\n{}", k.name, a.asm);
            assert!(!a.llvm_ir.contains("fmuladd") && !a.llvm_ir.contains(" contract "), "{}", k.name);
            compiled += 1;
        }
    }
    assert_eq!(
        compiled, 6,
        "matvec_fused(_rows), matvec_fused_blocked(_rows), and matvec_fused_multirow_rows with matvec_fused again"
    );
}

/// `min_groups = N` (`Kernel::min_groups`) is a launch bound: sm_90's PTX asks ptxas for N
/// workgroups an SM (`.minnctapersm N`), gfx1100's entry for the waves per SIMD they make
/// (`amdgpu-waves-per-eu`: 2 groups of 256 lanes = 16 waves over 4 SIMDs, so 4). Without it,
/// neither appears. It is printed in the kernel's text, so it is part of the cache key.
#[test]
fn min_groups_asks_for_resident_workgroups() {
    let cache = CompileCache::new(None);
    let mut k = baro_dsl::testkernels::matvec();
    k.block = Some(256);
    let plain = compile_gpu(&k, &sm90(), &CompileOptions::default(), &cache).unwrap();
    assert!(!plain.asm.contains(".minnctapersm"), "{}", plain.asm);
    k.min_groups = Some(2);
    assert!(k.to_string().contains("\n    min_groups 2\n"), "{k}");
    assert_eq!(baro_dsl::ir::Kernel::from_text(&k.to_string()).unwrap(), k);
    let a = compile_gpu(&k, &sm90(), &CompileOptions::default(), &cache).unwrap();
    assert!(a.asm.contains(".maxntid 256, 1, 1\n.minnctapersm 2"), "{}", a.asm);
    let g = compile_gpu(&k, &"gfx1100".parse().unwrap(), &CompileOptions::default(), &cache).unwrap();
    assert!(g.llvm_ir.contains("\"amdgpu-waves-per-eu\"=\"4\""), "{}", g.llvm_ir);
    let g0 =
        compile_gpu(&baro_dsl::testkernels::matvec(), &"gfx1100".parse().unwrap(), &CompileOptions::default(), &cache)
            .unwrap();
    assert!(!g0.llvm_ir.contains("amdgpu-waves-per-eu"), "{}", g0.llvm_ir);
    // The text reads any u32; the lowering takes 1 to 32 (the macro says so at the attribute).
    k.min_groups = Some(0);
    let e = compile_gpu(&k, &sm90(), &CompileOptions::default(), &cache).unwrap_err();
    assert!(e.to_string().contains("`min_groups 0`: expected 1 to 32"), "{e}");
}
