//! The compile cache and stage dumps of GPU compiles: a cold compile of the test kernel set
//! for sm_90, gfx1100 and gfx942, then warm from memory and warm from disk (a fresh
//! `CompileCache` on the same directory) with identical bytes; `dump_dir` writes every stage.
#![cfg(feature = "llvm")]

use crate::gpu_codegen_common;

use std::time::Instant;

use baro_dsl::cache::{CacheHit, CompileCache};
use baro_dsl::compile::{compile_gpu_traced, dump_names, CompileError, GpuArtifact};
use baro_dsl::options::CompileOptions;
use baro_dsl::target::Target;
use gpu_codegen_common::kernels;

fn targets() -> Vec<Target> {
    ["sm_90", "gfx1100", "gfx942"].iter().map(|t| t.parse().unwrap()).collect()
}

fn compile_all(cache: &CompileCache, o: &CompileOptions) -> (Vec<GpuArtifact>, Vec<CacheHit>, f64) {
    let start = Instant::now();
    let mut arts = Vec::new();
    let mut hits = Vec::new();
    for t in targets() {
        for k in kernels() {
            let (a, hit) = compile_gpu_traced(&k, &t, o, cache).unwrap_or_else(|e| panic!("{e}"));
            arts.push((*a).clone());
            hits.push(hit);
        }
    }
    (arts, hits, start.elapsed().as_secs_f64())
}

#[test]
fn warm_compiles_hit_memory_then_disk_with_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let o = CompileOptions::default();
    let cache = CompileCache::new(Some(dir.path().to_path_buf()));
    let (cold, cold_hits, t_cold) = compile_all(&cache, &o);
    assert!(cold_hits.iter().all(|h| *h == CacheHit::Compiled), "{cold_hits:?}");
    let (mem, mem_hits, t_mem) = compile_all(&cache, &o);
    assert!(mem_hits.iter().all(|h| *h == CacheHit::Memory), "{mem_hits:?}");
    let fresh = CompileCache::new(Some(dir.path().to_path_buf()));
    let (disk, disk_hits, t_disk) = compile_all(&fresh, &o);
    assert!(disk_hits.iter().all(|h| *h == CacheHit::Disk), "{disk_hits:?}");
    assert_eq!(cold, mem, "memory hits must return the compiled bytes");
    assert_eq!(cold, disk, "disk hits must return the compiled bytes");
    assert_eq!(cache.disk_errors() + fresh.disk_errors(), 0);
    // Each stage is stored under its extension: hsaco/ptx, s, ll.
    let files: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    for ext in ["ptx", "hsaco", "s", "ll"] {
        assert!(files.iter().any(|f| f.ends_with(&format!(".{ext}"))), "no .{ext} entry in {files:?}");
    }
    println!(
        "compile cache, {} kernels x 3 targets: cold {:.3} s, warm memory {:.4} s ({:.0}x), warm disk {:.4} s ({:.0}x)",
        cold.len() / 3,
        t_cold,
        t_mem,
        t_cold / t_mem.max(1e-9),
        t_disk,
        t_cold / t_disk.max(1e-9)
    );
}

#[test]
fn the_key_separates_targets_and_options() {
    let cache = CompileCache::new(None);
    let k = baro_dsl::testkernels::matvec();
    let (a, _) = compile_gpu_traced(&k, &"gfx1100".parse().unwrap(), &CompileOptions::default(), &cache).unwrap();
    let (b, hit) = compile_gpu_traced(&k, &"gfx942".parse().unwrap(), &CompileOptions::default(), &cache).unwrap();
    assert_eq!(hit, CacheHit::Compiled);
    assert_ne!(a.image, b.image);
    // The dump directory does not change bytes: same key, a memory hit.
    let tmp = tempfile::tempdir().unwrap();
    let o = CompileOptions { dump_dir: Some(tmp.path().to_path_buf()), ..Default::default() };
    let (_, hit) = compile_gpu_traced(&k, &"gfx942".parse().unwrap(), &o, &cache).unwrap();
    assert_eq!(hit, CacheHit::Memory);
}

#[test]
fn dump_dir_writes_every_stage() {
    let tmp = tempfile::tempdir().unwrap();
    let o = CompileOptions { dump_dir: Some(tmp.path().join("dump")), ..Default::default() };
    let cache = CompileCache::new(None);
    let k = baro_dsl::testkernels::softmax_rows();
    for t in targets() {
        let (a, _) = compile_gpu_traced(&k, &t, &o, &cache).unwrap();
        let names = dump_names(&k.name, &t);
        for n in &names {
            let p = tmp.path().join("dump").join(n);
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(!bytes.is_empty(), "{n} is empty");
            match n.rsplit('.').next().unwrap() {
                "ir" => assert!(
                    baro_dsl::Kernel::from_text(std::str::from_utf8(&bytes).unwrap()).is_ok(),
                    "{n}: the .ir stage parses back"
                ),
                "ll" => assert_eq!(bytes, a.llvm_ir.as_bytes()),
                "s" => assert_eq!(bytes, a.asm.as_bytes()),
                _ => assert_eq!(bytes, a.image),
            }
        }
        let expect: &[&str] =
            if matches!(t, Target::Nvptx { .. }) { &["ir", "ll", "ptx"] } else { &["ir", "ll", "s", "hsaco"] };
        assert_eq!(names.len(), expect.len());
        for e in expect {
            assert!(names.iter().any(|n| n.ends_with(&format!("softmax_rows.{t}.{e}"))), "{names:?}");
        }
    }
}

#[test]
fn an_ill_formed_kernel_is_rejected_before_lowering() {
    let mut k = baro_dsl::Kernel::new("no_grid");
    k.grid.clear();
    let e = compile_gpu_traced(&k, &"sm_90".parse().unwrap(), &CompileOptions::default(), &CompileCache::new(None))
        .unwrap_err();
    assert!(matches!(e, CompileError::Verify { .. }), "{e:?}");
}
