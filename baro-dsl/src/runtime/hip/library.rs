//! Finds and opens `libamdhip64` at run time (`libloading`), looks up the functions `ffi.rs`
//! declares, and checks the runtime is new enough: a binary built with the `hip` feature runs
//! on any machine, and one without a usable HIP runtime gets an error saying what was looked
//! for and what was found.
//!
//! Where: `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib` (ROCm's own installs, the
//! variables first since a user who sets them means them), then the plain soname through the
//! dynamic loader's search (`LD_LIBRARY_PATH`, the system's library directories: Debian's
//! `libamdhip64`). The first library that opens is used. Which version: ROCm 6 or newer
//! (HIP 6.0, `hipRuntimeGetVersion` ≥ 60000000): `hipGetDevicePropertiesR0600` and RDNA3
//! (gfx1100) support start there; Debian 12's HIP 5.2 is refused with its version named.
//!
//! The library is opened once per process and never closed, so the function pointers stay
//! valid for the process's life. This module calls no HIP function other than
//! `hipRuntimeGetVersion`.

#![allow(non_snake_case)]

use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::ffi::{self, sig};
use crate::runtime::device::DeviceError;

/// The oldest HIP runtime baro uses: 6.0.0 in `hipRuntimeGetVersion`'s encoding.
pub const MIN_VERSION: i32 = 60_000_000;

/// The library's file name; the soname of ROCm's and Debian's packages alike.
const LIB_NAME: &str = "libamdhip64.so";

/// An opened `libamdhip64` and the functions baro calls.
pub(crate) struct Hip {
    /// Where it was found (the soname when the dynamic loader found it).
    pub path: PathBuf,
    /// `hipRuntimeGetVersion`: major · 10,000,000 + minor · 100,000 + patch.
    pub version: i32,
    pub hipInit: sig::Init,
    pub hipGetDeviceCount: sig::GetDeviceCount,
    pub hipSetDevice: sig::SetDevice,
    pub hipGetDeviceProperties: sig::GetDeviceProperties,
    pub hipMalloc: sig::Malloc,
    pub hipFree: sig::Free,
    pub hipMemcpyHtoD: sig::MemcpyHtoD,
    pub hipMemcpyDtoH: sig::MemcpyDtoH,
    pub hipMemcpyHtoDAsync: sig::MemcpyHtoDAsync,
    pub hipMemGetInfo: sig::MemGetInfo,
    pub hipStreamWaitEvent: sig::StreamWaitEvent,
    pub hipMemcpyDtoDAsync: sig::MemcpyDtoDAsync,
    pub hipMemcpyDtoHAsync: sig::MemcpyDtoHAsync,
    pub hipMemsetAsync: sig::MemsetAsync,
    pub hipModuleLoadData: sig::ModuleLoadData,
    pub hipModuleUnload: sig::ModuleUnload,
    pub hipModuleGetFunction: sig::ModuleGetFunction,
    pub hipModuleLaunchKernel: sig::ModuleLaunchKernel,
    pub hipStreamCreate: sig::StreamCreate,
    pub hipStreamDestroy: sig::StreamDestroy,
    pub hipStreamSynchronize: sig::StreamSynchronize,
    pub hipEventCreate: sig::EventCreate,
    pub hipEventDestroy: sig::EventDestroy,
    pub hipEventRecord: sig::EventRecord,
    pub hipEventSynchronize: sig::EventSynchronize,
    pub hipEventElapsedTime: sig::EventElapsedTime,
    /// Keeps the library mapped; never dropped (the value lives in a static).
    _lib: libloading::Library,
}

/// The opened library whatever its version (for `runtime_version` and the tests that
/// exercise HIP's own error paths), or why none opened.
pub(crate) fn library() -> Result<&'static Hip, DeviceError> {
    static LIB: OnceLock<Result<Hip, String>> = OnceLock::new();
    LIB.get_or_init(|| open(&candidates(|k| std::env::var_os(k).map(PathBuf::from))))
        .as_ref()
        .map_err(|message| DeviceError::NoDriver { message: message.clone() })
}

/// The opened library if its version is one baro supports (`MIN_VERSION`), or why not.
pub(crate) fn runtime() -> Result<&'static Hip, DeviceError> {
    let hip = library()?;
    check_version(hip.version)
        .map_err(|e| DeviceError::NoDriver { message: format!("{LIB_NAME} ({}): {e}", where_found(&hip.path)) })?;
    Ok(hip)
}

/// `/opt/rocm/lib/libamdhip64.so`, or for the bare soname, that the loader found it.
fn where_found(path: &std::path::Path) -> String {
    if path.components().count() > 1 {
        path.display().to_string()
    } else {
        "on the dynamic loader's path".into()
    }
}

/// `Ok` for HIP 6.0 or newer, else what was expected and found.
pub fn check_version(version: i32) -> Result<(), String> {
    if version >= MIN_VERSION {
        Ok(())
    } else {
        Err(format!(
            "expected the HIP runtime of ROCm 6 or newer (HIP {}), found HIP {} (too old for baro's AMDGPU code objects and RDNA3; install ROCm 6 or 7 and set ROCM_PATH if it is not in /opt/rocm)",
            version_text(MIN_VERSION),
            version_text(version)
        ))
    }
}

/// `60342134` → `6.3.42134`.
pub fn version_text(v: i32) -> String {
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

/// Where to look, in order: the variables' `lib` folders, ROCm's default prefix, the soname.
fn candidates(var: impl Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["ROCM_PATH", "HIP_PATH"]
        .iter()
        .filter_map(|k| var(k))
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| p.join("lib").join(LIB_NAME))
        .collect();
    out.push(PathBuf::from("/opt/rocm/lib").join(LIB_NAME));
    out.push(PathBuf::from(LIB_NAME));
    out.dedup();
    out
}

/// Opens the first candidate that loads and resolves every function; the error lists what
/// each candidate said.
fn open(candidates: &[PathBuf]) -> Result<Hip, String> {
    let mut tried = Vec::new();
    for path in candidates {
        // A bare name goes through the dynamic loader's search; a path with a folder that
        // does not exist is skipped quietly in the list below.
        let is_path = path.components().count() > 1;
        if is_path && !path.exists() {
            tried.push(format!("{}: not found", path.display()));
            continue;
        }
        // SAFETY: loading libamdhip64 runs its initialisers, which only set up the runtime's
        // own state; the library is never unloaded (it lives in a static once opened).
        match unsafe { libloading::Library::new(path) } {
            Ok(lib) => return resolve(lib, path.clone()),
            Err(e) => tried.push(format!("{}: {e}", path.display())),
        }
    }
    Err(format!("no HIP runtime: expected {LIB_NAME} (ROCm 6 or newer), found none ({})", tried.join("; ")))
}

fn resolve(lib: libloading::Library, path: PathBuf) -> Result<Hip, String> {
    macro_rules! get {
        ($name:literal) => {{
            // SAFETY: the symbol's type is the C signature of that HIP function (`ffi::sig`).
            let f = unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| {
                format!("{LIB_NAME} ({}): expected the function {}, found none: {e}", where_found(&path), $name)
            })?;
            *f
        }};
    }
    let hipRuntimeGetVersion: sig::RuntimeGetVersion = get!("hipRuntimeGetVersion");
    let mut version: c_int = 0;
    // SAFETY: `version` is a valid out-pointer for the duration of the call.
    let code = unsafe { hipRuntimeGetVersion(&mut version) };
    if code != ffi::SUCCESS {
        return Err(format!("{LIB_NAME} ({}): hipRuntimeGetVersion failed with error {code}", where_found(&path)));
    }
    // Older runtimes lack the R0600 entry point: they are refused by `runtime()` by version,
    // so a missing symbol there must not hide the version from the error.
    let hipGetDeviceProperties: sig::GetDeviceProperties = match check_version(version) {
        Ok(()) => get!("hipGetDevicePropertiesR0600"),
        Err(_) => unavailable_properties,
    };
    Ok(Hip {
        version,
        hipInit: get!("hipInit"),
        hipGetDeviceCount: get!("hipGetDeviceCount"),
        hipSetDevice: get!("hipSetDevice"),
        hipGetDeviceProperties,
        hipMalloc: get!("hipMalloc"),
        hipFree: get!("hipFree"),
        hipMemcpyHtoD: get!("hipMemcpyHtoD"),
        hipMemcpyDtoH: get!("hipMemcpyDtoH"),
        hipMemcpyHtoDAsync: get!("hipMemcpyHtoDAsync"),
        hipMemGetInfo: get!("hipMemGetInfo"),
        hipStreamWaitEvent: get!("hipStreamWaitEvent"),
        hipMemcpyDtoDAsync: get!("hipMemcpyDtoDAsync"),
        hipMemcpyDtoHAsync: get!("hipMemcpyDtoHAsync"),
        hipMemsetAsync: get!("hipMemsetAsync"),
        hipModuleLoadData: get!("hipModuleLoadData"),
        hipModuleUnload: get!("hipModuleUnload"),
        hipModuleGetFunction: get!("hipModuleGetFunction"),
        hipModuleLaunchKernel: get!("hipModuleLaunchKernel"),
        hipStreamCreate: get!("hipStreamCreate"),
        hipStreamDestroy: get!("hipStreamDestroy"),
        hipStreamSynchronize: get!("hipStreamSynchronize"),
        hipEventCreate: get!("hipEventCreate"),
        hipEventDestroy: get!("hipEventDestroy"),
        hipEventRecord: get!("hipEventRecord"),
        hipEventSynchronize: get!("hipEventSynchronize"),
        hipEventElapsedTime: get!("hipEventElapsedTime"),
        path,
        _lib: lib,
    })
}

/// Stands in for `hipGetDevicePropertiesR0600` in a runtime older than ROCm 6, which
/// `runtime()` refuses before any device is opened: `hipErrorNotSupported`.
unsafe extern "C" fn unavailable_properties(_: *mut ffi::DeviceProp, _: c_int) -> ffi::Code {
    801
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_below_rocm_6_are_refused_with_the_version_found() {
        let e = check_version(50_222_153).unwrap_err();
        assert!(e.starts_with("expected the HIP runtime of ROCm 6 or newer (HIP 6.0.0), found HIP 5.2.22153"), "{e}");
        assert!(check_version(59_999_999).is_err());
        for ok in [60_000_000, 60_342_134, 70_051_831] {
            assert_eq!(check_version(ok), Ok(()), "{ok}");
        }
        assert_eq!(version_text(60_342_134), "6.3.42134");
    }

    #[test]
    fn the_search_order_is_the_variables_then_opt_rocm_then_the_soname() {
        let vars = |k: &str| match k {
            "ROCM_PATH" => Some(PathBuf::from("/r")),
            "HIP_PATH" => Some(PathBuf::from("")),
            _ => None,
        };
        let want: Vec<PathBuf> = ["/r/lib/libamdhip64.so", "/opt/rocm/lib/libamdhip64.so", "libamdhip64.so"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(candidates(vars), want);
    }

    #[test]
    fn a_missing_library_is_reported_with_every_place_looked() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("lib").join(LIB_NAME);
        let not_a_lib = dir.path().join(LIB_NAME);
        std::fs::write(&not_a_lib, b"not an ELF file").unwrap();
        let Err(e) = open(&[missing.clone(), not_a_lib.clone(), PathBuf::from("libbaro-no-such-hip.so")]) else {
            panic!("opened a library that does not exist")
        };
        assert!(e.starts_with("no HIP runtime: expected libamdhip64.so (ROCm 6 or newer), found none ("), "{e}");
        assert!(e.contains(&format!("{}: not found", missing.display())), "{e}");
        assert!(e.contains(&not_a_lib.display().to_string()), "{e}");
        assert!(e.contains("libbaro-no-such-hip.so: "), "{e}");
    }

    #[test]
    fn the_properties_struct_has_the_r0600_layout() {
        // Offsets of hipDeviceProp_tR0600 on x86-64 Linux, from ROCm 6's hip_runtime_api.h.
        use std::mem::offset_of;
        assert_eq!(offset_of!(ffi::DeviceProp, warpSize), 308);
        assert_eq!(offset_of!(ffi::DeviceProp, surfaceAlignment), 568);
        assert_eq!(offset_of!(ffi::DeviceProp, sharedMemPerMultiprocessor), 640);
        assert_eq!(offset_of!(ffi::DeviceProp, sharedMemPerBlockOptin), 696);
        assert_eq!(offset_of!(ffi::DeviceProp, reservedSharedMemPerBlock), 720);
        assert_eq!(offset_of!(ffi::DeviceProp, gcnArchName), 1160);
    }

    /// The library this machine has, if any: opened, and refused or accepted by its version.
    #[test]
    fn the_installed_runtime_is_opened_or_reported() {
        match library() {
            Ok(hip) => {
                println!("{LIB_NAME} ({}): HIP {}", where_found(&hip.path), version_text(hip.version));
                match runtime() {
                    Ok(_) => assert!(hip.version >= MIN_VERSION),
                    Err(e) => {
                        let m = e.to_string();
                        assert!(m.contains(&format!("found HIP {}", version_text(hip.version))), "{m}");
                    }
                }
            }
            Err(e) => {
                println!("no HIP runtime library: {e}");
                assert!(e.to_string().starts_with("no HIP runtime: expected libamdhip64.so"), "{e}");
                assert_eq!(runtime().err(), Some(e));
            }
        }
    }
}
