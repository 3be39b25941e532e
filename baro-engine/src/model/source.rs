//! The bytes of a weight file: a read-only memory map, or a buffer already in memory (tests).
//! Loaders borrow tensor data from here; nothing here copies a mapped file.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::Path;

use memmap2::Mmap;

pub enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    /// Maps `path` read-only. An empty file becomes an empty buffer (some systems refuse to
    /// map zero bytes).
    pub fn map(path: &Path) -> io::Result<Bytes> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(Bytes::Owned(Vec::new()));
        }
        // SAFETY: the map is read-only. A file changed by another process while mapped would
        // change the bytes under us (not memory safety within this process's rules for `&[u8]`
        // reads of plain data, but wrong weights); weight files are not edited while loaded.
        let map = unsafe { Mmap::map(&file)? };
        Ok(Bytes::Mapped(map))
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}
