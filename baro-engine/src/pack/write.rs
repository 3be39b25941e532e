//! Streams a planned pack to disk: the header first (every offset is known from the plan),
//! then the tensor data in file order, generated in chunks of about `CHUNK_BYTES` by worker
//! threads and written in order by the calling thread through a `BufWriter`. At most a small
//! window of chunks is in memory, never the file. The output goes to `PATH.tmp`, is synced,
//! and only then renamed to `PATH`, so an interrupted run never leaves a complete-looking pack
//! (a failed one removes its `.tmp`).
//!
//! Chunk `c` of tensor `t` is generated from a stream seeded with (seed, t, c), so the bytes
//! depend on the seed and the plan only, never on the thread count or the timing.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex, MutexGuard};

use crate::pack::blocks;
use crate::pack::plan::PackPlan;
use crate::pack::rng::Xoshiro256;
use crate::pack::PackError;

/// The target size of one unit of work (rounded down to whole blocks, at least one block).
/// Part of what a seed means: changing it changes every pack's bytes.
pub const CHUNK_BYTES: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    pub seed: u64,
    /// Worker threads generating data (the calling thread writes).
    pub threads: usize,
}

/// One unit of work: blocks `first_block..first_block + n_blocks` of a tensor.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    tensor: usize,
    index: usize,
    n_blocks: usize,
    /// Zero bytes to write after this chunk (alignment padding after a tensor's last chunk).
    pad_after: usize,
}

fn chunks(plan: &PackPlan) -> Vec<Chunk> {
    let mut out = Vec::new();
    let h = &plan.header;
    for (t, tensor) in plan.tensors.iter().enumerate() {
        let block_bytes = tensor.ty.block_bytes();
        let total = h.sizes[t] as usize / block_bytes;
        let per_chunk = (CHUNK_BYTES / block_bytes).max(1);
        let n_chunks = total.div_ceil(per_chunk).max(1);
        let next_start = h.offsets.get(t + 1).copied().unwrap_or(h.data_len);
        let pad = (next_start - h.offsets[t] - h.sizes[t]) as usize;
        for index in 0..n_chunks {
            let first = index * per_chunk;
            let n_blocks = per_chunk.min(total - first.min(total));
            let pad_after = if index + 1 == n_chunks { pad } else { 0 };
            out.push(Chunk { tensor: t, index, n_blocks, pad_after });
        }
    }
    out
}

fn generate(plan: &PackPlan, chunk: &Chunk, seed: u64) -> Vec<u8> {
    let t = &plan.tensors[chunk.tensor];
    let mut buf = vec![0u8; chunk.n_blocks * t.ty.block_bytes()];
    let mut rng = Xoshiro256::from_words(&[seed, chunk.tensor as u64, chunk.index as u64]);
    blocks::fill(t.ty, t.kind, &mut rng, &mut buf);
    buf
}

/// `PATH.tmp`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Checks that `path` can be a new file: its directory exists and it is not a directory.
fn check_output(path: &Path) -> Result<(), PackError> {
    let shown = path.display().to_string();
    if path.as_os_str().is_empty() {
        return Err(PackError::Output { path: shown, message: "expected a file path, found an empty one".into() });
    }
    if path.is_dir() {
        return Err(PackError::Output { path: shown, message: "expected a file path, found a directory".into() });
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.exists() {
        return Err(PackError::Output {
            path: shown,
            message: format!("the directory {} does not exist", dir.display()),
        });
    }
    if !dir.is_dir() {
        return Err(PackError::Output { path: shown, message: format!("{} is not a directory", dir.display()) });
    }
    Ok(())
}

/// Writes `plan` to `path` (through `PATH.tmp`), calling `progress` with the bytes written so
/// far after each piece. Returns the file's size.
pub fn write_pack(
    plan: &PackPlan,
    path: &Path,
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, PackError> {
    check_output(path)?;
    let tmp = tmp_path(path);
    let io_err = |p: &Path, e: io::Error| PackError::Io { path: p.display().to_string(), message: e.to_string() };
    let file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    let result = write_data(plan, file, opts, progress).map_err(|e| io_err(&tmp, e));
    let result = result.and_then(|len| std::fs::rename(&tmp, path).map(|()| len).map_err(|e| io_err(path, e)));
    if result.is_err() {
        // The error being reported matters more than a failure to clean up after it.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// How far the writer has got, and whether the workers should stop.
struct Gate {
    written: usize,
    abort: bool,
}

fn lock(m: &Mutex<Gate>) -> MutexGuard<'_, Gate> {
    // Nothing panics while holding the lock; a poisoned gate is still a valid count.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_data(plan: &PackPlan, file: File, opts: &WriteOptions, progress: &mut dyn FnMut(u64)) -> io::Result<u64> {
    let mut out = BufWriter::with_capacity(8 << 20, file);
    out.write_all(&plan.header.bytes)?;
    let mut written = plan.header.bytes.len() as u64;
    progress(written);

    let chunks = chunks(plan);
    let threads = opts.threads.max(1);
    let window = 2 * threads + 2;
    let next = AtomicUsize::new(0);
    let gate = (Mutex::new(Gate { written: 0, abort: false }), Condvar::new());
    let (tx, rx) = mpsc::channel::<(usize, Vec<u8>)>();
    let result = std::thread::scope(|s| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (chunks, next, gate) = (&chunks, &next, &gate);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chunk) = chunks.get(i) else { break };
                {
                    let mut g = lock(&gate.0);
                    while !g.abort && i >= g.written + window {
                        g = gate.1.wait(g).unwrap_or_else(|e| e.into_inner());
                    }
                    if g.abort {
                        break;
                    }
                }
                if tx.send((i, generate(plan, chunk, opts.seed))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        let mut expected = 0;
        let mut write_in_order = |i: usize, buf: Vec<u8>| -> io::Result<()> {
            pending.insert(i, buf);
            while let Some(buf) = pending.remove(&expected) {
                let chunk = &chunks[expected];
                out.write_all(&buf)?;
                out.write_all(&vec![0u8; chunk.pad_after])?;
                written += (buf.len() + chunk.pad_after) as u64;
                expected += 1;
                lock(&gate.0).written = expected;
                gate.1.notify_all();
                progress(written);
            }
            Ok(())
        };
        let result = rx.iter().try_for_each(|(i, buf)| write_in_order(i, buf));
        if result.is_err() {
            lock(&gate.0).abort = true;
            gate.1.notify_all();
        }
        drop(rx);
        result
    });
    result?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    let expected = plan.file_len();
    if written != expected {
        return Err(io::Error::other(format!("wrote {written} bytes, expected {expected} (a bug in the pack writer)")));
    }
    Ok(written)
}
