//! Linking an AMDGPU relocatable object into a loadable code object with `ld.lld -shared`
//! (LLVM has no in-process linker API). The linker is found through
//! `CompileOptions::ld_lld`, then `ld.lld-19`, then `ld.lld` on PATH; temporary files live in
//! a private directory that is always removed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use super::EmitError;
use crate::options::CompileOptions;

/// The `ld.lld` to run, or an error naming everything that was searched.
pub fn find_ld_lld(options: &CompileOptions) -> Result<PathBuf, String> {
    if let Some(p) = &options.ld_lld {
        return if p.is_file() {
            Ok(p.clone())
        } else {
            Err(format!("ld.lld: BARO_LD_LLD / CompileOptions::ld_lld names {}, which does not exist", p.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut searched = Vec::new();
    for name in ["ld.lld-19", "ld.lld"] {
        for dir in std::env::split_paths(&path) {
            let c = dir.join(name);
            if c.is_file() {
                return Ok(c);
            }
        }
        searched.push(name);
    }
    let fallback = Path::new("/usr/lib/llvm-19/bin/ld.lld");
    if fallback.is_file() {
        return Ok(fallback.to_path_buf());
    }
    Err(format!(
        "ld.lld not found: expected CompileOptions::ld_lld (BARO_LD_LLD), {} on PATH, or {} (install Debian's `lld-19`)",
        searched.join(" or "),
        fallback.display()
    ))
}

pub(super) fn link_code_object(obj: &[u8], name: &str, options: &CompileOptions) -> Result<Vec<u8>, EmitError> {
    let lld = find_ld_lld(options).map_err(EmitError::Link)?;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir =
        std::env::temp_dir().join(format!("baro-link-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&dir).map_err(|e| EmitError::Link(format!("creating {}: {e}", dir.display())))?;
    let result = (|| {
        let (o, out) = (dir.join(format!("{name}.o")), dir.join(format!("{name}.hsaco")));
        std::fs::write(&o, obj).map_err(|e| EmitError::Link(format!("writing {}: {e}", o.display())))?;
        let run = Command::new(&lld)
            .arg("-shared")
            .arg("-o")
            .arg(&out)
            .arg(&o)
            .output()
            .map_err(|e| EmitError::Link(format!("running {}: {e}", lld.display())))?;
        if !run.status.success() {
            return Err(EmitError::Link(format!(
                "{} -shared failed ({}): {}",
                lld.display(),
                run.status,
                String::from_utf8_lossy(&run.stderr).trim()
            )));
        }
        std::fs::read(&out).map_err(|e| EmitError::Link(format!("reading {}: {e}", out.display())))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
