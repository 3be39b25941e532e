//! The compile cache: compiled artifacts in memory (a concurrent map) and on disk, keyed by
//! everything that can change their bytes.
//!
//! Disk entries are written atomically (temporary file, then rename) and carry a checksum
//! trailer; a truncated or corrupted entry is recompiled and rewritten, never returned.

use crate::options::CompileOptions;
use crate::target::Target;
use dashmap::DashMap;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A SHA-256 over the IR text, target, byte-changing options, stage, baro's version and the
/// code generator's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    pub fn new(
        ir_text: &str,
        target: &Target,
        options: &CompileOptions,
        stage: &str,
        codegen_version: &str,
    ) -> CacheKey {
        let mut h = Sha256::new();
        for part in [
            env!("CARGO_PKG_VERSION").as_bytes(),
            codegen_version.as_bytes(),
            target.to_string().as_bytes(),
            &options.key_bytes(),
            stage.as_bytes(),
            ir_text.as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        CacheKey(h.finalize().into())
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Where an artifact came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheHit {
    Memory,
    Disk,
    Compiled,
}

/// Artifacts in memory and (optionally) on disk. Shared by threads: a key that several
/// threads miss at once is compiled once, the others waiting for it (`get_or_compile`).
#[derive(Default)]
pub struct CompileCache {
    mem: DashMap<CacheKey, Arc<[u8]>>,
    /// One lock per key being looked up on disk or compiled: the first thread to miss holds
    /// it while it reads or compiles, later ones wait on it and then find the entry in `mem`.
    inflight: DashMap<CacheKey, Arc<Mutex<()>>>,
    dir: Option<PathBuf>,
    disk_errors: AtomicU64,
}

impl CompileCache {
    /// `dir = None` keeps the cache in memory only.
    pub fn new(dir: Option<PathBuf>) -> CompileCache {
        CompileCache { mem: DashMap::new(), inflight: DashMap::new(), dir, disk_errors: AtomicU64::new(0) }
    }

    /// Returns the artifact for `key`, compiling it with `compile` on a miss. `ext` names the
    /// stage on disk (`ptx`, `hsaco`, ...). Disk failures never fail a compile: they are
    /// counted (`disk_errors`) and the artifact is still returned. Threads that miss the same
    /// key together compile it once: the first compiles, the others wait and get it from
    /// memory (where the first one's compile fails, the next one tries its own).
    pub fn get_or_compile<E>(
        &self,
        key: CacheKey,
        ext: &str,
        compile: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<(Arc<[u8]>, CacheHit), E> {
        if let Some(v) = self.mem.get(&key) {
            return Ok((v.clone(), CacheHit::Memory));
        }
        // The entry's guard is cloned out of the map before it is locked, so no map shard is
        // held while waiting. A poisoned lock (a compile that panicked) guards nothing.
        let lock = self.inflight.entry(key).or_default().clone();
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let r = self.lookup_or_compile(key, ext, compile);
        drop(guard);
        self.inflight.remove_if(&key, |_, l| Arc::ptr_eq(l, &lock));
        r
    }

    /// `get_or_compile`'s work under the key's lock: memory again (another thread may have
    /// just finished), then disk, then `compile`.
    fn lookup_or_compile<E>(
        &self,
        key: CacheKey,
        ext: &str,
        compile: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<(Arc<[u8]>, CacheHit), E> {
        if let Some(v) = self.mem.get(&key) {
            return Ok((v.clone(), CacheHit::Memory));
        }
        let path = self.dir.as_ref().map(|d| d.join(format!("{}.{ext}", key.hex())));
        if let Some(bytes) = path.as_deref().and_then(read_checked) {
            let bytes: Arc<[u8]> = bytes.into();
            self.mem.insert(key, bytes.clone());
            return Ok((bytes, CacheHit::Disk));
        }
        let bytes: Arc<[u8]> = compile()?.into();
        if let Some(p) = &path {
            if write_atomic(p, &bytes).is_err() {
                self.disk_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.mem.insert(key, bytes.clone());
        Ok((bytes, CacheHit::Compiled))
    }

    /// Replaces the entry for `key` in memory and on disk: for an entry that passed its
    /// checksum but that the loader could not use. A disk failure is counted, never an error.
    pub fn replace(&self, key: CacheKey, ext: &str, bytes: Vec<u8>) -> Arc<[u8]> {
        let bytes: Arc<[u8]> = bytes.into();
        if let Some(p) = self.dir.as_ref().map(|d| d.join(format!("{}.{ext}", key.hex()))) {
            if write_atomic(&p, &bytes).is_err() {
                self.disk_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.mem.insert(key, bytes.clone());
        bytes
    }

    /// Disk writes that failed (the artifact was still returned).
    pub fn disk_errors(&self) -> u64 {
        self.disk_errors.load(Ordering::Relaxed)
    }

    /// Forgets the in-memory entries (the disk cache stays).
    pub fn clear_memory(&self) {
        self.mem.clear();
    }
}

/// Reads an entry and checks its SHA-256 trailer; anything wrong reads as a miss.
fn read_checked(path: &Path) -> Option<Vec<u8>> {
    let mut data = std::fs::read(path).ok()?;
    if data.len() < 32 {
        return None;
    }
    let body_len = data.len() - 32;
    let sum: [u8; 32] = Sha256::digest(&data[..body_len]).into();
    if sum[..] != data[body_len..] {
        return None;
    }
    data.truncate(body_len);
    Some(data)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut data = Vec::with_capacity(bytes.len() + 32);
    data.extend_from_slice(bytes);
    data.extend_from_slice(&Sha256::digest(bytes));
    let result = std::fs::write(&tmp, &data).and_then(|_| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ir: &str, target: &str) -> CacheKey {
        CacheKey::new(ir, &target.parse().unwrap(), &CompileOptions::default(), "ptx", "llvm-19")
    }

    #[test]
    fn key_covers_everything_that_changes_bytes() {
        let base = key("kernel a {}", "sm_90");
        assert_ne!(base, key("kernel b {}", "sm_90"));
        assert_ne!(base, key("kernel a {}", "sm_80"));
        let v4 = CompileOptions { amdgpu_code_object: crate::options::CodeObjectVersion::V4, ..Default::default() };
        assert_ne!(
            CacheKey::new("k", &Target::Host, &CompileOptions::default(), "s", "x"),
            CacheKey::new("k", &Target::Host, &v4, "s", "x")
        );
        assert_ne!(
            base,
            CacheKey::new("kernel a {}", &"sm_90".parse().unwrap(), &CompileOptions::default(), "ptx", "llvm-20")
        );
    }

    #[test]
    fn memory_then_disk_then_recompile_on_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let k = key("kernel a {}", "sm_90");
        let cache = CompileCache::new(Some(dir.path().to_path_buf()));
        let mut calls = 0;
        let mut compile = || -> Result<Vec<u8>, ()> {
            calls += 1;
            Ok(b"ptx bytes".to_vec())
        };
        assert_eq!(cache.get_or_compile(k, "ptx", &mut compile).unwrap().1, CacheHit::Compiled);
        assert_eq!(cache.get_or_compile(k, "ptx", &mut compile).unwrap().1, CacheHit::Memory);
        let fresh = CompileCache::new(Some(dir.path().to_path_buf()));
        let (bytes, hit) = fresh.get_or_compile(k, "ptx", &mut compile).unwrap();
        assert_eq!((&bytes[..], hit), (&b"ptx bytes"[..], CacheHit::Disk));
        // Corrupt the entry: the next fresh cache recompiles instead of returning bad bytes.
        let path = dir.path().join(format!("{}.ptx", k.hex()));
        let mut data = std::fs::read(&path).unwrap();
        data[0] ^= 1;
        std::fs::write(&path, data).unwrap();
        let again = CompileCache::new(Some(dir.path().to_path_buf()));
        assert_eq!(again.get_or_compile(k, "ptx", &mut compile).unwrap().1, CacheHit::Compiled);
        assert_eq!(calls, 2);
        // No temporary files are left behind.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn threads_missing_one_key_together_compile_it_once() {
        use std::sync::atomic::AtomicUsize;
        let cache = CompileCache::new(None);
        let k = key("kernel a {}", "sm_90");
        let calls = AtomicUsize::new(0);
        let start = std::sync::Barrier::new(8);
        let hits: Vec<CacheHit> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let (bytes, hit) = cache
                            .get_or_compile(k, "ptx", || -> Result<Vec<u8>, ()> {
                                calls.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(std::time::Duration::from_millis(50));
                                Ok(b"ptx bytes".to_vec())
                            })
                            .unwrap();
                        assert_eq!(&bytes[..], b"ptx bytes");
                        hit
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one compile for eight threads");
        assert_eq!(hits.iter().filter(|&&h| h == CacheHit::Compiled).count(), 1);
        assert_eq!(hits.iter().filter(|&&h| h == CacheHit::Memory).count(), 7);
        assert!(cache.inflight.is_empty(), "no lock is left behind");
    }

    #[test]
    fn a_failed_compile_is_not_cached_and_the_next_caller_compiles() {
        let cache = CompileCache::new(None);
        let k = key("kernel a {}", "sm_90");
        assert_eq!(cache.get_or_compile(k, "ptx", || Err::<Vec<u8>, _>("no")).unwrap_err(), "no");
        let (bytes, hit) = cache.get_or_compile(k, "ptx", || Ok::<_, &str>(b"ok".to_vec())).unwrap();
        assert_eq!((&bytes[..], hit), (&b"ok"[..], CacheHit::Compiled));
        assert!(cache.inflight.is_empty());
    }
}
