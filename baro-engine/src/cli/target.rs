//! Picks the device the CLI runs on: the one `--target` names, or the best available (CUDA,
//! then HIP, then the host). A named target that cannot be opened is the user's error, and the
//! message says why and which targets this binary found; never falls back silently from a
//! target the user asked for. Falling back to the host without `--target` prints one line on
//! stderr saying why each GPU runtime was not used.

use baro_dsl::runtime::{Device, DeviceKind};

/// The targets the `--target` flag accepts.
pub const NAMES: [&str; 3] = ["host", "cuda", "hip"];

/// Opens `wanted`, or the best available device when `None`.
pub fn open(wanted: Option<DeviceKind>) -> Result<Device, String> {
    let Some(kind) = wanted else {
        let (device, note) = best()?;
        if let Some(note) = note {
            eprintln!("{note}");
        }
        return Ok(device);
    };
    Device::open(kind, 0).map_err(|e| {
        let found = available(kind);
        let found = if found.is_empty() { "none".to_string() } else { found.join(", ") };
        format!("--target {kind}: expected an available {kind} device, found none ({e}); available targets: {found}")
    })
}

/// The targets other than `skip` that open on this machine, in preference order.
fn available(skip: DeviceKind) -> Vec<String> {
    [DeviceKind::Cuda, DeviceKind::Hip, DeviceKind::Host]
        .into_iter()
        .filter(|&k| k != skip)
        .filter(|&k| Device::open(k, 0).is_ok())
        .map(|k| k.to_string())
        .collect()
}

/// The first GPU that opens, else the host with the line that says why no GPU runtime was used.
fn best() -> Result<(Device, Option<String>), String> {
    let mut why = Vec::new();
    for kind in [DeviceKind::Cuda, DeviceKind::Hip] {
        match Device::open(kind, 0) {
            Ok(d) => return Ok((d, None)),
            Err(e) => why.push(format!("{kind}: {e}")),
        }
    }
    let host =
        Device::host().map_err(|e| format!("no target available: expected at least the host, found none: {e}"))?;
    Ok((host, Some(why_host(&why))))
}

/// `note: running on the host; no GPU runtime was used (cuda: ...; hip: ...)`: one line,
/// whatever the errors hold.
fn why_host(why: &[String]) -> String {
    let text = why.join("; ").replace('\n', " ");
    format!("note: running on the host; no GPU runtime was used ({text})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_fallback_note_is_one_line_naming_each_runtime() {
        let note = why_host(&[
            "cuda: no CUDA driver (libcuda.so.1) found".into(),
            "hip: no HIP runtime:\nexpected libamdhip64.so".into(),
        ]);
        assert_eq!(note, "note: running on the host; no GPU runtime was used (cuda: no CUDA driver (libcuda.so.1) found; hip: no HIP runtime: expected libamdhip64.so)");
    }
}
