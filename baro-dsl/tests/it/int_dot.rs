//! The 4-way byte dot (`Expr::Dot4`, `dot4_i8` / `dot4_u8i8`): its text form round-trips,
//! the host JIT computes exactly the plain-Rust integer (random words and the edge bytes
//! −128, −1, 0, 127, 255), and the GPU code generators use the dot instructions: PTX
//! `dp4a.s32.s32` / `dp4a.u32.s32` for sm_90, `v_dot4_i32_iu8` in the gfx1100 code object
//! (offline: nothing runs on a GPU here).
#![cfg(feature = "llvm")]

use crate::gpu_codegen_common::{check_args, parse_kernels, run_tool, tool};
use crate::host_common::*;

use baro_dsl::cache::CompileCache;
use baro_dsl::compile::compile_gpu;
use baro_dsl::ir::{Dot4Kind, Expr, Kernel, ScalarType as T};
use baro_dsl::options::CompileOptions;
use baro_dsl::runtime::Arg;
use baro_dsl::target::Target;

/// `y[i] = KIND(a[i], b[i], c[i])` over `n` elements.
fn dot4_kernel(kind: Dot4Kind) -> Kernel {
    let mut k = Kernel::new(format!("elementwise_{}", kind.name()));
    let a = input(&mut k, "a", T::U32);
    let b = input(&mut k, "b", T::U32);
    let cc = input(&mut k, "c", T::I32);
    let y = output(&mut k, "y", T::I32);
    let n = scalar(&mut k, "n", T::INDEX);
    k.grid = vec![ix(1)];
    let body = par_for(&mut k, p(n), |i| vec![st(y, v(i), Expr::dot4(kind, ld(a, v(i)), ld(b, v(i)), ld(cc, v(i))))]);
    k.body = vec![body];
    k
}

/// The reference, written independently of `Dot4Kind::eval`: in i64, wrapped to i32 once.
fn reference(kind: Dot4Kind, a: u32, b: u32, c: i32) -> i32 {
    let bytes = |w: u32| w.to_le_bytes();
    let (x, y) = (bytes(a), bytes(b));
    let mut s = c as i64;
    for i in 0..4 {
        let xa = if kind == Dot4Kind::I8I8 { x[i] as i8 as i64 } else { x[i] as i64 };
        s += xa * (y[i] as i8 as i64);
    }
    s as i32
}

fn inputs(seed: u64, n: usize) -> (Vec<u32>, Vec<u32>, Vec<i32>) {
    let edge = [0x80u8, 0xff, 0x00, 0x7f, 0x01, 0x81];
    let mut rng = Rng(seed | 1);
    let mut word = |i: usize| -> u32 {
        match i % 3 {
            // Every byte from the edge set: −128·−128 and 255·−128 included.
            0 => u32::from_le_bytes([0, 1, 2, 3].map(|j| edge[(rng.next() as usize + j) % edge.len()])),
            _ => rng.next() as u32,
        }
    };
    let a: Vec<u32> = (0..n).map(&mut word).collect();
    let b: Vec<u32> = (0..n).map(&mut word).collect();
    let mut c: Vec<i32> = (0..n).map(|_| rng.next() as i32).collect();
    // Accumulators at the ends of i32: the sum wraps like dp4a.
    c[0] = i32::MAX;
    c[1] = i32::MIN;
    (a, b, c)
}

#[test]
fn host_dot4_is_the_exact_wrapping_integer() {
    for kind in Dot4Kind::ALL {
        let kernel = compile(&dot4_kernel(kind));
        for seed in [1u64, 7, 1234] {
            let n = 300;
            let (mut a, mut b, c) = inputs(seed, n);
            a[2] = 0x8080_8080;
            b[2] = 0x8080_8080;
            a[3] = 0xffff_ffff;
            b[3] = 0x8080_8080;
            let mut y = vec![0i32; n];
            kernel.launch(&mut [Arg::buf(&a), Arg::buf(&b), Arg::buf(&c), Arg::buf_mut(&mut y), Arg::from(n)]).unwrap();
            for i in 0..n {
                let want = reference(kind, a[i], b[i], c[i]);
                assert_eq!(y[i], want, "{} of {:#010x}, {:#010x}, {}", kind.name(), a[i], b[i], c[i]);
                assert_eq!(kind.eval(a[i], b[i], c[i]), want, "Dot4Kind::eval");
            }
        }
    }
    // The extremes, by hand: 4 · (−128)² = 65536; u8 255 · i8 −128 · 4 = −130560.
    assert_eq!(reference(Dot4Kind::I8I8, 0x8080_8080, 0x8080_8080, 0), 65536);
    assert_eq!(reference(Dot4Kind::U8I8, 0xffff_ffff, 0x8080_8080, 0), -130560);
    assert_eq!(reference(Dot4Kind::I8I8, 0x0000_0001, 0x0000_0001, i32::MAX), i32::MIN);
}

#[test]
fn dot4_text_form_round_trips() {
    for kind in Dot4Kind::ALL {
        let k = dot4_kernel(kind);
        let text = k.to_string();
        assert!(text.contains(&format!("{}(", kind.name())), "{text}");
        let back = Kernel::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, k, "{text}");
        assert_eq!(back.to_string(), text);
    }
    // Operand types are checked: a float word is refused with what was expected.
    let k = dot4_kernel(Dot4Kind::I8I8);
    let bad = Expr::dot4(Dot4Kind::I8I8, Expr::f32(1.0), c(T::U32, 1), c(T::I32, 0));
    let err = k.type_of(&bad).unwrap_err().0;
    assert_eq!(err, "`dot4_i8`'s first operand has type f32: expected u32");
}

#[test]
fn sm90_ptx_uses_dp4a() {
    let cache = CompileCache::new(None);
    for (kind, insn) in [(Dot4Kind::I8I8, "dp4a.s32.s32"), (Dot4Kind::U8I8, "dp4a.u32.s32")] {
        let a = compile_gpu(&dot4_kernel(kind), &Target::Nvptx { sm: 90 }, &CompileOptions::default(), &cache)
            .unwrap_or_else(|e| panic!("{e}"));
        let ptx = std::str::from_utf8(&a.image).unwrap();
        assert!(ptx.contains(".target sm_90"), "{ptx}");
        let lines: Vec<&str> = ptx.lines().filter(|l| l.contains("dp4a")).collect();
        // The loop is unrolled and versioned: several copies, each the one instruction.
        assert!(!lines.is_empty(), "{}: no dp4a in\n{ptx}", kind.name());
        assert!(
            lines.iter().all(|l| l.trim_start().starts_with(insn)),
            "{}: expected {insn}, found {lines:?}",
            kind.name()
        );
        println!("{}: {}", kind.name(), lines[0].trim());
    }
}

#[test]
fn gfx1100_code_object_uses_v_dot4() {
    let objdump = tool("llvm-objdump-19", "llvm-19");
    let readelf = tool("llvm-readelf-19", "llvm-19");
    let tmp = tempfile::tempdir().unwrap();
    let cache = CompileCache::new(None);
    // gfx11's one byte-dot instruction takes a signedness flag per operand (`neg_lo`):
    // [1,1,0] is i8·i8, [0,1,0] u8·i8. Clamp off: the sum wraps.
    for (kind, flags) in [(Dot4Kind::I8I8, "neg_lo:[1,1,0]"), (Dot4Kind::U8I8, "neg_lo:[0,1,0]")] {
        let k = dot4_kernel(kind);
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
        let lines: Vec<&str> = disasm.lines().filter(|l| l.contains("v_dot4")).collect();
        assert!(!lines.is_empty(), "{}: no v_dot4 in\n{disasm}", kind.name());
        let ok = |l: &&str| {
            let zero_flags = !l.contains("neg_lo");
            l.contains("v_dot4_i32_iu8") && (l.contains(flags) || (zero_flags && flags == "neg_lo:[0,0,0]"))
        };
        assert!(lines.iter().all(ok), "{}: expected v_dot4_i32_iu8 with {flags}, found {lines:?}", kind.name());
        assert!(!lines.iter().any(|l| l.contains("clamp")), "{}: clamped dot {lines:?}", kind.name());
        println!("{}: {}", kind.name(), lines[0].trim());
    }
}

#[test]
fn gfx942_has_no_sudot4_and_gets_the_exact_operations() {
    // No dot intrinsic is called for gfx942 (`Dot4Isa::Exact`: four multiply-adds). It must
    // still compile, to the same integer by construction. Observed with LLVM 19: its backend
    // itself selects `v_dot4c_i32_i8` for the i8·i8 multiply-adds; u8·i8 stays scalar ops.
    let objdump = tool("llvm-objdump-19", "llvm-19");
    let tmp = tempfile::tempdir().unwrap();
    let cache = CompileCache::new(None);
    for kind in Dot4Kind::ALL {
        let a = compile_gpu(&dot4_kernel(kind), &"gfx942".parse().unwrap(), &CompileOptions::default(), &cache)
            .unwrap_or_else(|e| panic!("{e}"));
        let path = tmp.path().join(format!("{}.hsaco", a.entry));
        std::fs::write(&path, &a.image).unwrap();
        let disasm = run_tool(&objdump, &["-d", "--mcpu=gfx942"], &path);
        assert!(!a.llvm_ir.contains("sudot4"), "{}", kind.name());
        let dots: Vec<&str> = disasm.lines().filter(|l| l.contains("v_dot4")).collect();
        println!("{} on gfx942: {} v_dot4 lines {:?}", kind.name(), dots.len(), dots.first());
    }
}
