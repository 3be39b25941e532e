//! Picks the device the CLI runs on: the one `--target` names, or the best available (CUDA,
//! then HIP, then the host). A named target that cannot be opened is the user's error, and the
//! message says why and which targets this binary found; never falls back silently from a
//! target the user asked for.

use baro_dsl::runtime::{Device, DeviceKind};

/// The targets the `--target` flag accepts.
pub const NAMES: [&str; 3] = ["host", "cuda", "hip"];

/// Opens `wanted`, or the best available device when `None`.
pub fn open(wanted: Option<DeviceKind>) -> Result<Device, String> {
    let Some(kind) = wanted else {
        return Device::best_available().map_err(|e| format!("no target available: expected at least the host, found none: {e}"));
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
