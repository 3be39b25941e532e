//! `decode_bw`: m = 1 decode speed of the engine on a GGUF pack, against the pack's bandwidth
//! floor (bytes of weights a step reads, `baro_bench::floor`, over the device's measured
//! device-to-device copy bandwidth). Prints the config, the bandwidths, the upload rate, the
//! latency percentiles, then a short result table last; `--out file.md` also writes markdown
//! and JSON beside it. The routine is `baro_bench::decode::run`; this file parses and reports.

use std::path::PathBuf;
use std::process::ExitCode;

use baro_bench::decode::{run, state_range, DecodeOptions, DecodeReport};
use baro_bench::floor::Rule;
use baro_bench::report::{json_str, write_pair, Meta};
use baro_dsl::runtime::DeviceKind;
use clap::Parser;

#[derive(Parser)]
#[command(about = "decode tokens/s on a GGUF pack against its bandwidth floor")]
struct Cli {
    /// The GGUF pack (memory-mapped).
    #[arg(long)]
    model: PathBuf,
    /// cuda, hip or host.
    #[arg(long, default_value = "cuda")]
    target: String,
    #[arg(long, default_value_t = 0)]
    ordinal: usize,
    /// Timed tokens.
    #[arg(long, default_value_t = 64)]
    tokens: usize,
    /// Untimed tokens right before the timed ones.
    #[arg(long, default_value_t = 4)]
    warmup: usize,
    /// Untimed tokens decoded first: the timed tokens run at this context depth.
    #[arg(long, default_value_t = 0)]
    context_tokens: usize,
    /// The first token fed; every later one is the previous greedy pick.
    #[arg(long, default_value_t = 0)]
    first_token: u32,
    /// Read the logits back and pick on the host, instead of picking on the device.
    #[arg(long)]
    host_pick: bool,
    /// Bytes per device-to-device copy for the copy bandwidth, in MiB.
    #[arg(long, default_value_t = 1024)]
    copy_mib: usize,
    /// Timed copies (median).
    #[arg(long, default_value_t = 30)]
    copy_iters: usize,
    /// Bytes per pinned host-to-device write, in MiB.
    #[arg(long, default_value_t = 256)]
    pinned_mib: usize,
    /// A device-memory budget (e.g. 24G): routed experts staged from pinned host memory.
    #[arg(long)]
    vram_budget: Option<String>,
    /// Write results as markdown here, and as JSON beside it.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The commit measured (default: $BARO_COMMIT).
    #[arg(long)]
    commit: Option<String>,
    /// Activations of the quantized matvecs: f32 or q8 (8-bit blocks, exact integer dots).
    #[arg(long, default_value = "f32")]
    precision: baro_engine::engine::Precision,
    /// Launch each decode step's kernels one by one instead of replaying a launch graph (the
    /// A/B of `EngineOptions::graphs`).
    #[arg(long)]
    no_graphs: bool,
}

pub fn main() -> ExitCode {
    match main_inner(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("decode_bw: {e}");
            ExitCode::from(2)
        }
    }
}

fn main_inner(cli: Cli) -> Result<(), String> {
    let target: DeviceKind = cli.target.parse().map_err(|e: baro_dsl::runtime::DeviceError| e.to_string())?;
    let opts = DecodeOptions {
        model: cli.model.clone(),
        precision: cli.precision,
        vram_budget: cli
            .vram_budget
            .as_deref()
            .map(baro_engine::engine::staging::parse_bytes)
            .transpose()
            .map_err(|e| format!("--vram-budget: {e}"))?,
        target,
        ordinal: cli.ordinal,
        tokens: cli.tokens,
        warmup: cli.warmup,
        context_tokens: cli.context_tokens,
        first_token: cli.first_token,
        copy_bytes: cli.copy_mib << 20,
        copy_iters: cli.copy_iters,
        filler_bytes: (cli.copy_mib << 20) / 4,
        pinned_bytes: cli.pinned_mib << 20,
        pinned_iters: 5,
        host_pick: cli.host_pick,
        graphs: !cli.no_graphs,
    };
    let r = run(&opts)?;
    let meta = Meta::new(r.device.clone(), r.driver.clone(), cli.commit.clone());
    let lat = r.latency();
    let (state_first, state_last) = state_range(&r);
    let ms = |s: f64| s * 1e3;
    let mean_pick = r.pick_s.iter().sum::<f64>() / r.pick_s.len() as f64;
    let details = format!(
        "{}\n\
         {} timed tokens at positions {}..{} (after {} context + {} warm-up tokens), first token {}, ids hash {:016x}, first ids {:?}\n\
         latency ms: min {:.3}, p50 {:.3}, p90 {:.3}, p99 {:.3}, max {:.3}, mean {:.3} ({})\n\
         tok/s: median {:.2}, mean {:.2}; floor {:.2} tok/s = {:.1} GB/s copy / {} bytes per token; achieved / floor (median) {:.4}\n\
         state traffic per token (not weights, not in the floor): {:.1} MB at the first timed position, {:.1} MB at the last\n\
         upload: {:.3} GB in {:.2} s = {:.2} GB/s (pinned upload {:.2} GB/s); kernels compiled in {:.2} s",
        r.launch_mode(opts.graphs),
        r.step_s.len(),
        r.first_timed_pos,
        r.first_timed_pos + r.step_s.len(),
        opts.context_tokens,
        opts.warmup,
        opts.first_token,
        r.ids_hash(),
        &r.timed_ids[..r.timed_ids.len().min(9)],
        ms(lat.min),
        ms(lat.p50),
        ms(lat.p90),
        ms(lat.p99),
        ms(lat.max),
        ms(lat.mean),
        if opts.host_pick { format!("logits read back; of which greedy pick on the host: mean {:.3}", ms(mean_pick)) } else { "greedy pick on the device, 4 integers read back".to_string() },
        r.tok_s_median(),
        r.tok_s_mean(),
        r.floor_tok_s(),
        r.copy_bytes_per_s / 1e9,
        r.floor.per_token,
        r.ratio(),
        state_first as f64 / 1e6,
        state_last as f64 / 1e6,
        r.upload_bytes as f64 / 1e9,
        r.upload_s,
        r.upload_bytes as f64 / r.upload_s / 1e9,
        r.pinned_bytes_per_s / 1e9,
        r.compile_s,
    );
    let table = table(&meta, &r);
    if let Some(path) = &cli.out {
        let md = format!(
            "# Decode speed against the bandwidth floor\n\n{}- pack: {}\n\n{}\n\n{}\n\n{table}",
            meta.markdown_header(),
            cli.model.display(),
            r.floor.explain(),
            details.replace('\n', "\n\n")
        );
        let jp = write_pair(path, &md, &json(&meta, &cli, &opts, &r))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {} and {}", path.display(), jp.display());
    }
    println!("\n{details}\n\n{table}");
    Ok(())
}

fn table(meta: &Meta, r: &DecodeReport) -> String {
    let head =
        ["device", "driver", "commit", "date", "pack GB", "bytes/token", "copy GB/s", "tok/s", "floor tok/s", "ratio"];
    let row = [
        meta.device.clone(),
        meta.driver.clone(),
        meta.commit.clone(),
        meta.date.clone(),
        format!("{:.3}", r.pack_bytes as f64 / 1e9),
        r.floor.per_token.to_string(),
        format!("{:.1}", r.copy_bytes_per_s / 1e9),
        format!("{:.2}", r.tok_s_median()),
        format!("{:.2}", r.floor_tok_s()),
        format!("{:.4}", r.ratio()),
    ];
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let head: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    let rule: Vec<String> = head.iter().map(|_| "---".to_string()).collect();
    line(&head) + &line(&rule) + &line(&row)
}

fn json(meta: &Meta, cli: &Cli, o: &DecodeOptions, r: &DecodeReport) -> String {
    let lat = r.latency();
    let f = &r.floor;
    let rule = |x: &Rule| match x {
        Rule::Whole => "\"whole\"".to_string(),
        Rule::EmbeddingRow { rows } => format!("\"1 of {rows} rows\""),
        Rule::EmbeddingRowAndTiedHead { rows } => format!("\"1 of {rows} rows + whole (tied head)\""),
        Rule::TopKExperts { top_k, n_experts } => format!("\"{top_k} of {n_experts} experts\""),
        Rule::NotRead => "\"not read\"".to_string(),
    };
    let tensors: Vec<String> = f
        .tensors
        .iter()
        .map(|t| {
            format!(
                "  {{\"name\": {}, \"type\": {}, \"stored\": {}, \"read\": {}, \"rule\": {}}}",
                json_str(&t.name),
                json_str(&t.ty.to_string()),
                t.stored,
                t.read,
                rule(&t.rule)
            )
        })
        .collect();
    let nums = |v: &[f64]| v.iter().map(|x| format!("{:.9}", x)).collect::<Vec<_>>().join(", ");
    let ids = r.timed_ids.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
    format!(
        "{{{}, \"graphs\": {}, \"graphs_asked\": {}, \"pack\": {}, \"pack_bytes\": {}, \"tokens\": {}, \"warmup\": {}, \"context_tokens\": {}, \"first_token\": {}, \
         \"bytes_per_token\": {}, \"embedding_row_bytes\": {}, \"lm_head_bytes\": {}, \"routed_expert_bytes\": {}, \"other_bytes\": {}, \
         \"copy_gbps\": {:.2}, \"pinned_upload_gbps\": {:.2}, \"compile_s\": {:.3}, \"upload_s\": {:.3}, \"upload_bytes\": {}, \"upload_gbps\": {:.3}, \
         \"tok_s_median\": {:.3}, \"tok_s_mean\": {:.3}, \"floor_tok_s\": {:.3}, \"ratio\": {:.5}, \
         \"latency_ms\": {{\"min\": {:.4}, \"p50\": {:.4}, \"p90\": {:.4}, \"p99\": {:.4}, \"max\": {:.4}, \"mean\": {:.4}}}, \
         \"ids_hash\": \"{:016x}\", \"timed_ids\": [{ids}], \"step_s\": [{}], \"pick_s\": [{}], \"floor_rule\": {}, \"tensors\": [\n{}\n]}}\n",
        meta.json_fields(),
        r.graphs,
        o.graphs,
        json_str(&cli.model.display().to_string()),
        r.pack_bytes,
        o.tokens,
        o.warmup,
        o.context_tokens,
        o.first_token,
        f.per_token,
        f.embedding_row,
        f.lm_head,
        f.routed_experts,
        f.other,
        r.copy_bytes_per_s / 1e9,
        r.pinned_bytes_per_s / 1e9,
        r.compile_s,
        r.upload_s,
        r.upload_bytes,
        r.upload_bytes as f64 / r.upload_s / 1e9,
        r.tok_s_median(),
        r.tok_s_mean(),
        r.floor_tok_s(),
        r.ratio(),
        lat.min * 1e3,
        lat.p50 * 1e3,
        lat.p90 * 1e3,
        lat.p99 * 1e3,
        lat.max * 1e3,
        lat.mean * 1e3,
        r.ids_hash(),
        nums(&r.step_s),
        nums(&r.pick_s),
        json_str(&f.explain()),
        tensors.join(",\n")
    )
}
