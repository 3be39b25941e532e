//! Host machine code as object files: a lowered module is emitted to an ELF object (the
//! bytes the compile cache keeps on disk), and an object is linked into the process by an
//! ORC LLJIT of its own (`LLVMOrcLLJITAddObjectFile`), its entry looked up by name. A second
//! run of the same kernels therefore loads objects instead of running LLVM's optimiser and
//! code generator again.
//!
//! An object that does not link (a damaged cache entry that still passed the checksum, an
//! object from another LLVM) is an `Err`, never a crash: the caller compiles afresh. This
//! module never decides what to compile; it only emits and links.

use std::ffi::{c_char, CStr, CString};
use std::ptr::null_mut;

use inkwell::llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy;
use inkwell::llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use inkwell::llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcCreateLLJITBuilder, LLVMOrcDisposeLLJIT, LLVMOrcLLJITAddObjectFile,
    LLVMOrcLLJITGetGlobalPrefix, LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITLookup, LLVMOrcLLJITRef,
};
use inkwell::llvm_sys::orc2::{LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess, LLVMOrcJITDylibAddGenerator};
use inkwell::module::Module;
use inkwell::targets::{CodeModel, FileType, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;

/// The host target machine every host kernel is optimised and emitted with: the default
/// triple, the generic CPU (no features beyond the triple's baseline, so an object cached on
/// one x86-64 machine runs on any other), position-independent code for JIT linking.
pub(crate) fn target_machine() -> Result<TargetMachine, String> {
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(&triple, "generic", "", OptimizationLevel::Default, RelocMode::PIC, CodeModel::Default)
        .ok_or_else(|| {
            format!("expected a target machine for the host triple {}, found none", triple.as_str().to_string_lossy())
        })
}

/// What identifies the machine code `target_machine` emits, for the cache key.
pub(crate) fn target_identity() -> String {
    format!("{}/generic/pic", TargetMachine::get_default_triple().as_str().to_string_lossy())
}

/// The module as an ELF object.
pub(crate) fn emit_object(module: &Module<'_>, tm: &TargetMachine) -> Result<Vec<u8>, String> {
    let buf = tm.write_to_memory_buffer(module, FileType::Object).map_err(|e| e.to_string())?;
    Ok(buf.as_slice().to_vec())
}

/// An object linked into the process; its code stays mapped until this is dropped.
pub(crate) struct LinkedObject {
    jit: LLVMOrcLLJITRef,
    /// The address of the looked-up entry.
    pub(crate) entry: u64,
}

// SAFETY: after `link` the LLJIT is never used again except by `Drop` (once, on whichever
// thread drops the last owner); what threads share is `entry`, an address of reentrant code.
unsafe impl Send for LinkedObject {}
unsafe impl Sync for LinkedObject {}

impl Drop for LinkedObject {
    fn drop(&mut self) {
        // SAFETY: created by `LLVMOrcCreateLLJIT`, disposed exactly once; an error while
        // tearing down leaves nothing to do.
        let err = unsafe { LLVMOrcDisposeLLJIT(self.jit) };
        let _ = error_text(err);
    }
}

/// Links `object` into a fresh LLJIT (process symbols such as `fma` and `memcpy` resolve
/// against the running process) and looks up `entry`.
pub(crate) fn link(object: &[u8], entry: &str) -> Result<LinkedObject, String> {
    let name = CString::new(entry).map_err(|_| format!("expected an entry name without NUL bytes, found `{entry}`"))?;
    let mut jit: LLVMOrcLLJITRef = null_mut();
    // SAFETY: the builder is consumed by `LLVMOrcCreateLLJIT`; `jit` is a valid out-pointer.
    check(unsafe { LLVMOrcCreateLLJIT(&mut jit, LLVMOrcCreateLLJITBuilder()) }, "creating the host JIT")?;
    let mut linked = LinkedObject { jit, entry: 0 };
    // SAFETY: `jit` is live; the generator is handed to (and owned by) the main JITDylib.
    unsafe {
        let dylib = LLVMOrcLLJITGetMainJITDylib(jit);
        let mut generator = null_mut();
        let prefix: c_char = LLVMOrcLLJITGetGlobalPrefix(jit);
        check(
            LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&mut generator, prefix, None, null_mut()),
            "resolving process symbols",
        )?;
        LLVMOrcJITDylibAddGenerator(dylib, generator);
        // The buffer is copied here and owned by the JIT from the call on.
        let buffer = LLVMCreateMemoryBufferWithMemoryRangeCopy(
            object.as_ptr().cast(),
            object.len(),
            c"baro-host-kernel.o".as_ptr(),
        );
        check(LLVMOrcLLJITAddObjectFile(jit, dylib, buffer), "adding the kernel object")?;
    }
    let mut address = 0u64;
    // SAFETY: `jit` is live, `name` a NUL-terminated string, `address` a valid out-pointer.
    check(unsafe { LLVMOrcLLJITLookup(jit, &mut address, name.as_ptr()) }, "linking the kernel object")?;
    if address == 0 {
        return Err(format!("expected the address of `{entry}` in the linked object, found 0"));
    }
    linked.entry = address;
    Ok(linked)
}

fn check(err: LLVMErrorRef, what: &str) -> Result<(), String> {
    match error_text(err) {
        None => Ok(()),
        Some(m) => Err(format!("{what}: {m}")),
    }
}

/// The message of an LLVM error (consuming it), or `None` for success.
fn error_text(err: LLVMErrorRef) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: `err` is a live error, consumed by `LLVMGetErrorMessage`; the message is
    // copied before it is disposed.
    unsafe {
        let msg = LLVMGetErrorMessage(err);
        let text = CStr::from_ptr(msg).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(msg);
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use crate::cache::CacheHit;
    use crate::options::HostOrder;
    use crate::runtime::{Arg, HostRuntime};
    use crate::testkernels;

    /// `y = W x` for a 2 x 3 matrix through a runtime caching in `dir`; the kernel's origin.
    fn matvec(dir: &std::path::Path) -> (Vec<f32>, CacheHit) {
        let rt = HostRuntime::with_cache(HostOrder::Sequential, Some(dir.to_path_buf())).unwrap();
        let k = rt.compile(&testkernels::matvec()).expect("matvec compiles"); // (w, x, y, k, m)
        let (w, x) = ([1f32, 2.0, 3.0, 4.0, 5.0, 6.0], [1f32, 0.5, 0.25]);
        let mut y = [0f32; 2];
        k.launch(&mut [
            Arg::buf(&w[..]),
            Arg::buf(&x[..]),
            Arg::buf_mut(&mut y[..]),
            Arg::from(3usize),
            Arg::from(2usize),
        ])
        .expect("launch");
        (y.to_vec(), k.origin())
    }

    fn objects(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".host.o"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn objects_are_cached_on_disk_and_bad_entries_recompile() {
        let dir = tempfile::tempdir().unwrap();
        let (want, origin) = matvec(dir.path());
        assert_eq!(want, vec![2.75, 8.0]);
        assert_eq!(origin, CacheHit::Compiled);
        assert_eq!(objects(dir.path()).len(), 1, "one object file written");
        assert_eq!(matvec(dir.path()), (want.clone(), CacheHit::Disk), "a new runtime loads the object");
        let path = objects(dir.path()).remove(0);
        // A damaged entry (checksum fails) is compiled again and rewritten.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[100] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(matvec(dir.path()), (want.clone(), CacheHit::Compiled));
        assert_eq!(matvec(dir.path()), (want.clone(), CacheHit::Disk));
        // An entry with a valid checksum that is not an object (written by something else)
        // does not link: compiled again, not a crash.
        let junk = b"\x7fELF but not really an object file".to_vec();
        let mut entry = junk.clone();
        entry.extend_from_slice(&Sha256::digest(&junk));
        std::fs::write(&path, &entry).unwrap();
        assert_eq!(matvec(dir.path()), (want.clone(), CacheHit::Compiled));
        assert_eq!(matvec(dir.path()), (want, CacheHit::Disk), "the bad entry was replaced");
    }
}
