//! `conformance`: every example kernel and `testkernels` pair on random inputs and ragged
//! shapes, on the host JIT and on the chosen device, compared byte for byte. Prints a table
//! (kernel, shape, bytes compared, bytes differing) and exits nonzero on any difference or
//! failure; `--out file.md` also writes the results (and `file.json`).

use std::path::PathBuf;
use std::process::ExitCode;

use baro_bench::conformance::{error_parity, run_all, table, totals, Outcome};
use baro_bench::matvec_engine::short_weight_words_error;
use baro_bench::report::{json_str, write_pair, Meta};
use baro_dsl::runtime::{Device, DeviceKind};
use clap::Parser;

#[derive(Parser)]
#[command(about = "compare every kernel on the host JIT and on a device, byte for byte")]
struct Cli {
    /// The device under test: cuda, hip or host.
    #[arg(long, default_value = "cuda")]
    target: String,
    /// Device ordinal.
    #[arg(long, default_value_t = 0)]
    ordinal: usize,
    /// Two shapes per family instead of all.
    #[arg(long)]
    quick: bool,
    #[arg(long, default_value_t = 0x00ba_5eed)]
    seed: u64,
    /// Write the results as markdown here, and as JSON beside it.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The commit measured (default: $BARO_COMMIT).
    #[arg(long)]
    commit: Option<String>,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("conformance: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<bool, String> {
    let kind: DeviceKind = cli.target.parse().map_err(|e: baro_dsl::runtime::DeviceError| e.to_string())?;
    let reference = Device::host().map_err(|e| e.to_string())?;
    let device = Device::open(kind, cli.ordinal).map_err(|e| e.to_string())?;
    let meta = Meta::new(device.name(), device.driver_version(), cli.commit.clone());
    println!("conformance: host JIT vs {} ({}), {}", device.name(), device.driver_version(), device.target());
    println!("commit {}, {}, seed {:#x}{}", meta.commit, meta.date, cli.seed, if cli.quick { ", quick" } else { "" });
    let outcomes = run_all(&reference, &device, cli.quick, cli.seed, |o| {
        if !o.passed() {
            eprintln!(
                "FAIL {} [{}]: {} differing bytes{}",
                o.kernel,
                o.shape,
                o.bytes_differing,
                o.error.as_deref().map(|e| format!(", {e}")).unwrap_or_default()
            );
        }
    });
    let errors = error_parity(&reference, &device, 1100).and_then(|mut m| {
        let (host, dev) = (short_weight_words_error(&reference)?, short_weight_words_error(&device)?);
        if host != dev {
            return Err(format!(
                "a weight word past the end in `matvec_q8_0_xs`: reference says `{host}`, device says `{dev}`"
            ));
        }
        m.push(dev);
        Ok(m)
    });
    match &errors {
        Ok(m) => println!("error parity: the device reports the host's bounds errors (a write right away and after 1100 queued launches; a read in a versioned loop; a weight word past the end inside an engine matvec's versioned loop): {} | {} | {}", m[1], m[2], m[3]),
        Err(e) => eprintln!("FAIL error parity: {e}"),
    }
    let kernels = {
        let mut names: Vec<&str> = outcomes.iter().map(|o| o.kernel.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.len()
    };
    let (compared, differing) = totals(&outcomes);
    let failed = outcomes.iter().filter(|o| !o.passed()).count();
    let ok = failed == 0 && errors.is_ok();
    let t = table(&outcomes);
    if let Some(path) = &cli.out {
        let md = format!(
            "# Conformance: host JIT vs {}\n\n{}- target: {}\n- seed: {:#x}\n\n{kernels} kernels, {} kernel x shape cases, {compared} bytes compared, {differing} bytes differing, {failed} failed\n\nerror parity (bounds errors: a write right away and after 1100 queued launches, a read in a versioned loop): {}\n\n```\n{t}```\n",
            device.kind(),
            meta.markdown_header(),
            device.target(),
            cli.seed,
            outcomes.len(),
            match &errors {
                Ok(m) => format!("same as host: `{}`", m[1]),
                Err(e) => format!("FAILED: {e}"),
            }
        );
        let json = format!(
            "{{{}, \"target\": {}, \"seed\": {}, \"kernels\": {kernels}, \"cases\": {}, \"bytes_compared\": {compared}, \"bytes_differing\": {differing}, \"failed\": {failed}, \"error_parity\": {}, \"results\": [\n{}\n]}}\n",
            meta.json_fields(),
            json_str(&device.target().to_string()),
            cli.seed,
            outcomes.len(),
            match &errors {
                Ok(_) => "true".to_string(),
                Err(e) => json_str(e),
            },
            outcomes.iter().map(json_row).collect::<Vec<_>>().join(",\n")
        );
        let json_path = write_pair(path, &md, &json).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {} and {}", path.display(), json_path.display());
    }
    println!("\n{t}");
    println!(
        "RESULT {}: {kernels} kernels, {} cases, {compared} bytes compared, {differing} bytes differing, {failed} failed, error parity {}",
        if ok { "PASS" } else { "FAIL" },
        outcomes.len(),
        if errors.is_ok() { "ok" } else { "FAILED" }
    );
    Ok(ok)
}

fn json_row(o: &Outcome) -> String {
    format!(
        "  {{\"kernel\": {}, \"shape\": {}, \"bytes_compared\": {}, \"bytes_differing\": {}, \"error\": {}}}",
        json_str(&o.kernel),
        json_str(&o.shape),
        o.bytes_compared,
        o.bytes_differing,
        o.error.as_deref().map(json_str).unwrap_or_else(|| "null".into())
    )
}
