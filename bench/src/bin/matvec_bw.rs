//! `matvec_bw`: how close matvecs come to the device's copy bandwidth, in two groups
//! (`--only examples|engine`, default both).
//!
//! 1. Copy bandwidth: a large device-to-device copy, bytes read + written, median of N.
//! 2. `examples`: the f16/bf16-weight matvec of the examples' kernels and its rows sibling at
//!    K×N = 2048×8192 and 8192×2048 (decode shapes), m=1 and rows = 1, 2, 4, …, 512: achieved
//!    bytes/s (weights read once + x + y) over the copy bandwidth.
//! 3. `engine`: the engine's own decode matvecs (`kernels::decode_matvec`, launched as decode
//!    launches them) on every matvec shape of the model (Qwen3.5-35B-A3B's, community mix:
//!    F32, Q8_0 projections, Q4_K/Q5_K/Q6_K routed experts with top-k ids, the Q6_K head) plus
//!    F16/BF16 projections at the two shapes above, each against a copy of the same bytes
//!    timed in the same run (`baro_bench::matvec_engine`); the bar is copy/matvec ≥ 1/1.35.
//!
//! Timing: every timed launch is queued behind a large "filler" copy, so the CPU has queued
//! the start event, the launch and the end event before the GPU reaches them (no launch gap
//! inside the measurement); the weights rotate over enough copies (> 3 × L2) that no launch
//! finds its weights in L2. Results are checked against the host JIT byte for byte first
//! (examples: m=1 and rows=2; engine: each kernel at its k with a few rows), so a fast wrong
//! kernel cannot report a number. Results print last. `--quick`: small shapes (the engine
//! group on the `tiny` preset), for a host smoke test.

use std::path::PathBuf;
use std::process::ExitCode;

use baro_bench::bandwidth::{copy_bandwidth, median, time_one, Filler};
use baro_bench::conformance::{matvec_half, matvec_wide};
use baro_bench::matvec_cases::{self, add_new, model_cases, projection_cases, MatvecCase};
use baro_bench::matvec_engine::{self, EngineRow, EngineSetup, BAR};
use baro_bench::report::{json_str, write_pair, Meta};
use baro_dsl::runtime::{Buffer, Device, DeviceArg, DeviceError, DeviceKernel, DeviceKind};
use baro_dsl::{Kernel, ScalarType};
use baro_engine::model::TensorType;
use baro_engine::pack::{presets, QuantMix};
use clap::Parser;
use half::{bf16, f16};

#[derive(Parser)]
#[command(about = "matvec bandwidth over device-to-device copy bandwidth")]
struct Cli {
    /// cuda, hip or host.
    #[arg(long, default_value = "cuda")]
    target: String,
    #[arg(long, default_value_t = 0)]
    ordinal: usize,
    /// Timed launches per measurement (median).
    #[arg(long, default_value_t = 30)]
    iters: usize,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Bytes per copy for the copy bandwidth, in MiB.
    #[arg(long, default_value_t = 1024)]
    copy_mib: usize,
    /// The device's last-level cache in MiB (H200: 50); weights rotate over > 3× this.
    #[arg(long, default_value_t = 50)]
    l2_mib: usize,
    /// Largest row count of the rows sibling (powers of two from 1).
    #[arg(long, default_value_t = 512)]
    max_rows: usize,
    /// Small shapes (for a host smoke test): K×N = 256×512 and 512×256, rows up to 4; the
    /// engine group on the `tiny` preset, at most 4 weight rotations.
    #[arg(long)]
    quick: bool,
    /// Which group to run: all, examples (the f16/bf16 example kernels) or engine (the
    /// engine's decode matvecs on the model's shapes).
    #[arg(long, value_enum, default_value_t = Group::All)]
    only: Group,
    /// Print the engine group's cases (kernel, shape, launches per token, bytes) and exit,
    /// without a device.
    #[arg(long)]
    list_cases: bool,
    /// The quant mix of the engine group's shapes: community, q8_0 or f32.
    #[arg(long, default_value = "community")]
    mix: QuantMix,
    /// Write results as markdown here, and as JSON beside it.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    commit: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Group {
    All,
    Examples,
    Engine,
}

/// One measured configuration.
struct Row {
    kernel: String,
    k: usize,
    n: usize,
    rows: Option<usize>,
    bytes: u64,
    median_us: f64,
    gbps: f64,
    ratio: f64,
}

pub fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("matvec_bw: {e}");
            ExitCode::from(2)
        }
    }
}

fn err(e: DeviceError) -> String {
    e.to_string()
}

/// Weight element type of a matvec variant, and its lane split: one wave per output (the
/// `matvec_half` examples) or 256 lanes per output (`matvec_wide`).
#[derive(Clone, Copy)]
enum Weight {
    F16,
    Bf16,
    WideF16,
    WideBf16,
}

impl Weight {
    fn bytes(self, w: &[f32]) -> Vec<u8> {
        match self {
            Weight::F16 | Weight::WideF16 => w.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect(),
            Weight::Bf16 | Weight::WideBf16 => w.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()).collect(),
        }
    }
    fn elem(self) -> ScalarType {
        match self {
            Weight::F16 | Weight::WideF16 => ScalarType::F16,
            Weight::Bf16 | Weight::WideBf16 => ScalarType::BF16,
        }
    }
    fn kernels(self) -> (Kernel, Kernel) {
        match self {
            Weight::F16 => (matvec_half::matvec_f16(), matvec_half::matvec_f16_rows()),
            Weight::Bf16 => (matvec_half::matvec_bf16(), matvec_half::matvec_bf16_rows()),
            Weight::WideF16 => (matvec_wide::matvec_wide_f16(), matvec_wide::matvec_wide_f16_rows()),
            Weight::WideBf16 => (matvec_wide::matvec_wide_bf16(), matvec_wide::matvec_wide_bf16_rows()),
        }
    }
}

fn rng_f32(n: usize, seed: u64) -> Vec<f32> {
    baro::reference::Rng::new(seed).vec_f32(n)
}

/// Runs the kernel (m=1 when `rows` is None) once on `dev`, returns y's bytes.
fn run_once(
    dev: &Device,
    k: &DeviceKernel,
    w: &Buffer,
    x: &[f32],
    kk: usize,
    n: usize,
    rows: Option<usize>,
) -> Result<Vec<u8>, String> {
    let xb = dev.upload(x).map_err(err)?;
    let mut y = dev.alloc(ScalarType::F32, rows.unwrap_or(1) * n).map_err(err)?;
    let mut args = vec![DeviceArg::buf(&xb), DeviceArg::buf(w), DeviceArg::buf_mut(&mut y), kk.into(), n.into()];
    if let Some(r) = rows {
        args.push(r.into());
    }
    dev.run(k, &mut args).map_err(err)?;
    dev.read_bytes(&y).map_err(err)
}

/// Device vs host JIT, byte for byte, m=1 and rows=2; returns the bytes compared.
fn self_check(dev: &Device, host: &Device, wt: Weight, w32: &[f32], kk: usize, n: usize) -> Result<u64, String> {
    let (single, rows) = wt.kernels();
    let mut compared = 0;
    for (kernel, r) in [(single, None), (rows, Some(2))] {
        let x = rng_f32(r.unwrap_or(1) * kk, 7);
        let wbytes = wt.bytes(w32);
        let mut outs = Vec::new();
        for d in [host, dev] {
            let k = d.compile(&kernel).map_err(err)?;
            let w = d.upload_bytes(wt.elem(), &wbytes).map_err(err)?;
            outs.push(run_once(d, &k, &w, &x, kk, n, r)?);
        }
        let differing = outs[0].iter().zip(&outs[1]).filter(|(a, b)| a != b).count();
        if differing > 0 || outs[0].len() != outs[1].len() {
            return Err(format!(
                "self-check failed: {} k={kk} n={n} rows={r:?}: {differing} of {} bytes differ from the host",
                kernel.name,
                outs[0].len()
            ));
        }
        compared += outs[0].len() as u64;
    }
    Ok(compared)
}

#[allow(clippy::too_many_arguments)]
fn measure(
    dev: &Device,
    cli: &Cli,
    filler: &mut Filler,
    k: &DeviceKernel,
    weights: &[Buffer],
    kk: usize,
    n: usize,
    rows: Option<usize>,
    copy_bw: f64,
) -> Result<Row, String> {
    let r = rows.unwrap_or(1);
    let x = dev.upload(&rng_f32(r * kk, 3)).map_err(err)?;
    let mut y = dev.alloc(ScalarType::F32, r * n).map_err(err)?;
    let s = dev.default_stream();
    let mut turn = 0usize;
    let mut launch = |turn: &mut usize| -> Result<(), String> {
        let w = &weights[*turn % weights.len()];
        *turn += 1;
        let mut args = vec![DeviceArg::buf(&x), DeviceArg::buf(w), DeviceArg::buf_mut(&mut y), kk.into(), n.into()];
        if let Some(r) = rows {
            args.push(r.into());
        }
        dev.launch(s, k, &mut args).map_err(err)
    };
    for _ in 0..cli.warmup {
        launch(&mut turn)?;
    }
    s.synchronize().map_err(err)?;
    let mut ms = Vec::new();
    for _ in 0..cli.iters {
        ms.push(time_one(dev, filler, &mut || launch(&mut turn))?);
    }
    let t = median(ms) * 1e-3;
    let bytes = (n * kk * 2 + r * kk * 4 + r * n * 4) as u64;
    let gbps = bytes as f64 / t / 1e9;
    Ok(Row {
        kernel: k.name().to_string(),
        k: kk,
        n,
        rows,
        bytes,
        median_us: t * 1e6,
        gbps,
        ratio: bytes as f64 / t / copy_bw,
    })
}

/// The examples group: the f16/bf16 example kernels at m=1 and over rows.
fn run_examples(
    dev: &Device,
    host: &Device,
    cli: &Cli,
    filler: &mut Filler,
    copy_bw: f64,
) -> Result<(Vec<Row>, u64), String> {
    let shapes: &[(usize, usize)] = if cli.quick { &[(256, 512), (512, 256)] } else { &[(2048, 8192), (8192, 2048)] };
    let max_rows = if cli.quick { cli.max_rows.min(4) } else { cli.max_rows };
    let mut rows_list = vec![];
    let mut r = 1;
    while r <= max_rows {
        rows_list.push(r);
        r *= 2;
    }
    let mut results = Vec::new();
    let mut checked = 0u64;
    for wt in [Weight::F16, Weight::Bf16, Weight::WideF16, Weight::WideBf16] {
        let (single, batched) = wt.kernels();
        let (ks, kb) = (dev.compile(&single).map_err(err)?, dev.compile(&batched).map_err(err)?);
        for &(kk, n) in shapes {
            let w32 = rng_f32(n * kk, 11);
            checked += self_check(dev, host, wt, &w32, kk, n)?;
            let wbytes = wt.bytes(&w32);
            let copies = (3 * (cli.l2_mib << 20)).div_ceil(wbytes.len()).max(2) + 1;
            let weights: Vec<Buffer> =
                (0..copies).map(|_| dev.upload_bytes(wt.elem(), &wbytes)).collect::<Result<_, _>>().map_err(err)?;
            eprintln!("measuring {} and {} at K={kk} N={n} ({copies} weight copies)", single.name, batched.name);
            results.push(measure(dev, cli, filler, &ks, &weights, kk, n, None, copy_bw)?);
            for &r in &rows_list {
                results.push(measure(dev, cli, filler, &kb, &weights, kk, n, Some(r), copy_bw)?);
            }
        }
    }
    Ok((results, checked))
}

/// The engine group's cases: the model's matvec shapes (the `tiny` preset with `--quick`),
/// then F16, BF16 and Q8_0 projections at the examples' two shapes where the model has none.
fn engine_cases(cli: &Cli) -> Result<Vec<MatvecCase>, String> {
    let (cfg, shapes) = if cli.quick {
        (presets::tiny(), [(256, 512), (512, 256)])
    } else {
        (presets::real(), [(2048, 8192), (8192, 2048)])
    };
    let mut cases = model_cases(&cfg, cli.mix)?;
    for (ty, label) in [
        (TensorType::F16, "f16 projection"),
        (TensorType::BF16, "bf16 projection"),
        (TensorType::Q8_0, "q8_0 projection"),
    ] {
        add_new(&mut cases, projection_cases(ty, &shapes, label));
    }
    Ok(cases)
}

/// The most weight rotations and copy buffer pairs per engine case.
fn max_sets(cli: &Cli) -> usize {
    if cli.quick {
        4
    } else {
        512
    }
}

/// The engine group: each case through the kernel decode launches for it.
fn run_engine(dev: &Device, host: &Device, cli: &Cli, filler: &mut Filler) -> Result<(Vec<EngineRow>, u64), String> {
    let setup =
        EngineSetup { iters: cli.iters, warmup: cli.warmup, l2_bytes: cli.l2_mib << 20, max_sets: max_sets(cli) };
    matvec_engine::run_cases(dev, host, filler, &setup, &engine_cases(cli)?)
}

fn run(cli: Cli) -> Result<(), String> {
    if cli.list_cases {
        print!("{}", matvec_cases::list(&engine_cases(&cli)?));
        return Ok(());
    }
    let kind: DeviceKind = cli.target.parse().map_err(err)?;
    let dev = Device::open(kind, cli.ordinal).map_err(err)?;
    let host = Device::host().map_err(err)?;
    let meta = Meta::new(dev.name(), dev.driver_version(), cli.commit.clone());
    println!("matvec_bw on {} ({}), commit {}, {}", dev.name(), dev.driver_version(), meta.commit, meta.date);
    let filler_bytes = if cli.quick { 1 << 20 } else { 256 << 20 };
    let mut filler = Filler::new(&dev, filler_bytes)?;

    let (copy_moved, copy_bw) = copy_bandwidth(&dev, cli.copy_mib << 20, cli.warmup, cli.iters, &mut filler)?;
    println!("copy: {} MiB read + written per copy, median {:.1} GB/s", copy_moved >> 20, copy_bw / 1e9);

    let (results, checked_examples) = if cli.only == Group::Engine {
        (Vec::new(), 0)
    } else {
        run_examples(&dev, &host, &cli, &mut filler, copy_bw)?
    };
    let (engine, checked_engine) =
        if cli.only == Group::Examples { (Vec::new(), 0) } else { run_engine(&dev, &host, &cli, &mut filler)? };
    let checked = checked_examples + checked_engine;

    let mut t = String::new();
    if !results.is_empty() {
        t += &format!(
            "{:<22} {:>6} {:>6} {:>5} {:>12} {:>11} {:>9} {:>7}\n",
            "kernel", "K", "N", "rows", "bytes", "median_us", "GB/s", "ratio"
        );
    }
    for r in &results {
        let rows = r.rows.map_or("-".to_string(), |v| v.to_string());
        t += &format!(
            "{:<22} {:>6} {:>6} {:>5} {:>12} {:>11.2} {:>9.1} {:>7.3}\n",
            r.kernel, r.k, r.n, rows, r.bytes, r.median_us, r.gbps, r.ratio
        );
    }
    let mut summary = format!(
        "copy bandwidth {:.1} GB/s (median of {} copies of {} MiB, read + written); {} timed launches per row (median), weights rotated over > 3 x {} MiB; self-check vs host: {checked} bytes identical",
        copy_bw / 1e9,
        cli.iters,
        cli.copy_mib,
        cli.iters,
        cli.l2_mib
    );
    let engine_t = matvec_engine::table(&engine, copy_bw);
    if !engine.is_empty() {
        let slow = engine.iter().filter(|r| r.copy_over_matvec() < BAR).count();
        let (mv, cp) = matvec_engine::per_token_us(&engine);
        summary += &format!(
            "\nengine: {} shapes, each against a copy moving the same bytes (B/2 read + B/2 written), alternated, {} timed each (median); weights and copy buffers rotated over > 3 x L2 (at most {} sets); copy/matvec >= {BAR:.3} (matvec <= 1.35 x copy) on {} of them, {slow} SLOW; per token at these speeds: matvecs {:.3} ms, copies of the same bytes {:.3} ms",
            engine.len(),
            cli.iters,
            max_sets(&cli),
            engine.len() - slow,
            mv / 1e3,
            cp / 1e3
        );
    }
    if let Some(path) = &cli.out {
        let mut md = format!("# Matvec bandwidth over copy bandwidth\n\n{}\n{summary}\n\n", meta.markdown_header());
        if !results.is_empty() {
            md += &format!("## Examples (f16/bf16 example kernels, m=1 and rows)\n\n```\n{t}```\n\n");
        }
        if !engine.is_empty() {
            md += &format!("## Engine decode matvecs on the model's shapes, against a copy of the same bytes\n\n```\n{engine_t}```\n");
        }
        let rows_json: Vec<String> = results
            .iter()
            .map(|r| {
                format!(
                    "  {{\"kernel\": {}, \"k\": {}, \"n\": {}, \"rows\": {}, \"bytes\": {}, \"median_us\": {:.3}, \"gbps\": {:.2}, \"ratio\": {:.4}}}",
                    json_str(&r.kernel),
                    r.k,
                    r.n,
                    r.rows.map_or("null".to_string(), |v| v.to_string()),
                    r.bytes,
                    r.median_us,
                    r.gbps,
                    r.ratio
                )
            })
            .collect();
        let json = format!(
            "{{{}, \"copy_gbps\": {:.2}, \"iters\": {}, \"self_check_bytes\": {checked}, \"results\": [\n{}\n], \"engine\": [\n{}\n]}}\n",
            meta.json_fields(),
            copy_bw / 1e9,
            cli.iters,
            rows_json.join(",\n"),
            matvec_engine::json_rows(&engine, copy_bw).join(",\n")
        );
        let jp = write_pair(path, &md, &json).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {} and {}", path.display(), jp.display());
    }
    println!("\n{summary}\n\n{t}\n{}", if engine.is_empty() { String::new() } else { engine_t });
    Ok(())
}
