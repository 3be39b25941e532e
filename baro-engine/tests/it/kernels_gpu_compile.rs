//! Every decode kernel compiles offline for NVPTX (sm_90) and AMDGPU (gfx1100, when `ld.lld`
//! is present): the GPU lowerings accept everything the host runs. Running on a GPU is the
//! conformance suite's job; this only catches a kernel the lowering cannot express.

use baro_dsl::compile::{compile_gpu, CompileError};
use baro_dsl::options::CompileOptions;
use baro_dsl::target::Target;

#[test]
fn every_kernel_compiles_for_gpu_targets() {
    let cache = crate::common::gpu_cache();
    let opts = CompileOptions::default();
    let mut failures = Vec::new();
    let mut compiled = 0;
    for target in [Target::Nvptx { sm: 90 }, Target::Amdgpu { arch: "gfx1100".into() }] {
        for k in baro_engine::kernels::all() {
            match compile_gpu(&k, &target, &opts, cache) {
                Ok(a) => {
                    assert!(!a.image.is_empty(), "{}: empty image", k.name);
                    compiled += 1;
                }
                Err(CompileError::Tool { message, .. }) => println!("skipping {target}: {message}"),
                Err(e) => failures.push(format!("{} on {target}: {e}", k.name)),
            }
        }
    }
    println!("{compiled} GPU compiles");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled >= baro_engine::kernels::all().len(), "not even NVPTX compiled every kernel");
}

/// Innermost loops of a PTX text (a label with a backward branch to it and no such loop
/// inside) that add at least 8 floats (the unrolled element loops): for each, its weight
/// loads and its float additions (one per row and element). `weights(loop)` counts a loop's
/// weight loads.
fn element_loops(ptx: &str, weights: &dyn Fn(&[&str], usize) -> usize) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = ptx.lines().collect();
    let label_at: std::collections::HashMap<&str, usize> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.trim().strip_suffix(':').filter(|x| x.starts_with("$L__BB")).map(|x| (x, i)))
        .collect();
    let mut loops = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(target) =
            l.split("bra").nth(1).map(|t| t.trim().trim_start_matches(".uni").trim().trim_end_matches(';'))
        {
            if let Some(&start) = label_at.get(target) {
                if start < i {
                    loops.push((start, i));
                }
            }
        }
    }
    let innermost = |&(a, b): &(usize, usize)| !loops.iter().any(|&(c, d)| (c, d) != (a, b) && a <= c && d <= b);
    let count = |body: &[&str], op: &str| body.iter().filter(|l| l.trim_start().starts_with(op)).count();
    loops
        .iter()
        .filter(|l| innermost(l))
        .map(|&(a, b)| {
            let body = &lines[a..=b];
            let adds = count(body, "add.rn.f32");
            (weights(body, adds), adds)
        })
        .filter(|&(_, adds)| adds >= 8)
        .collect()
}

/// The 8-row matvecs for sm_90 next to the serial rows kernels they replace: in the unrolled
/// element loops, weight loads per (row, element) drop to an eighth (f32: the f32 loads past
/// one x load per row and element; Q8_0: the 32-bit weight words). The PTX of each is written
/// to the test's temporary folder for reading.
#[test]
fn rows8_matvecs_load_weights_once_for_eight_rows_in_ptx() {
    use baro_engine::kernels::{matvec, quant};
    let cache = crate::common::gpu_cache();
    let opts = CompileOptions::default();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rows8_ptx");
    std::fs::create_dir_all(&dir).unwrap();
    let count = |body: &[&str], op: &str| body.iter().filter(|l| l.trim_start().starts_with(op)).count();
    let f32_weights = |body: &[&str], adds: usize| {
        count(body, "ld.global.nc.f32") + count(body, "ld.global.f32") + count(body, "ld.shared.f32") - adds
    };
    let q8_weights = |body: &[&str], _: usize| count(body, "ld.global.nc.u32") + count(body, "ld.global.u32");
    let mut per = Vec::new();
    for (k, weights) in [
        (matvec::matvec_f32_rows(), &f32_weights as &dyn Fn(&[&str], usize) -> usize),
        (matvec::matvec_f32_rows8(), &f32_weights),
        (quant::matvec_q8_0_xs_rows(), &q8_weights),
        (quant::matvec_q8_0_rows8(), &q8_weights),
    ] {
        let a = compile_gpu(&k, &Target::Nvptx { sm: 90 }, &opts, cache).unwrap_or_else(|e| panic!("{}: {e}", k.name));
        let ptx = String::from_utf8(a.image.clone()).expect("PTX is text");
        std::fs::write(dir.join(format!("{}.ptx", k.name)), &ptx).unwrap();
        let loops = element_loops(&ptx, weights);
        assert!(!loops.is_empty(), "{}: no unrolled element loop found", k.name);
        let ratios: Vec<f64> = loops.iter().map(|&(w, adds)| w as f64 / adds as f64).collect();
        println!("{}: element loops (weight loads, row-element additions) {loops:?} in {}", k.name, dir.display());
        per.push((ratios.iter().cloned().fold(f64::MAX, f64::min), ratios.iter().cloned().fold(0.0, f64::max)));
    }
    for (serial, rows8, what) in [(per[0], per[1], "f32"), (per[2], per[3], "q8_0")] {
        println!("{what}: weight loads per (row, element) serial {serial:?}, 8-row {rows8:?}");
        assert!(
            rows8.0 * 8.0 <= serial.0 + 1e-9,
            "{what}: the 8-row kernel's best loop loads {} weights per row-element, the serial {}",
            rows8.0,
            serial.0
        );
        assert!(
            rows8.1 * 3.0 <= serial.0 + 1e-9,
            "{what}: the 8-row kernel's worst loop loads {} weights per row-element, the serial {}",
            rows8.1,
            serial.0
        );
    }
}
