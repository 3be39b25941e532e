//! The `.ir` files under `tests/text/` parse, round-trip, and print (and expand) exactly as
//! their snapshots say: `X.expected` is the printed form of `X.ir`, `X.expanded.expected` the
//! printed form after `lanes::expand`. `BARO_BLESS=1 cargo test` rewrites the snapshots, and
//! the diff is what a reviewer reads.

use std::path::{Path, PathBuf};

use baro_dsl::ir::Kernel;

fn bless() -> bool {
    std::env::var("BARO_BLESS").is_ok_and(|v| v == "1")
}

/// Compares `actual` with the snapshot at `path` (or rewrites it when blessing).
fn check_snapshot(path: &Path, actual: &str) -> Result<(), String> {
    if bless() {
        return std::fs::write(path, actual).map_err(|e| format!("{}: cannot write snapshot: {e}", path.display()));
    }
    let expected = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: expected a snapshot, found none ({e}); run with BARO_BLESS=1", path.display()))?;
    if expected != actual {
        return Err(format!(
            "{} differs from its snapshot (rerun with BARO_BLESS=1 to accept)\n--- expected\n{expected}\n+++ actual\n{actual}",
            path.display()
        ));
    }
    Ok(())
}

/// The `.ir` files directly under `tests/DIR` of this crate, sorted (also the filetests' list).
pub(crate) fn ir_files_in(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "ir"))
        .collect();
    files.sort();
    files
}

fn ir_files() -> Vec<PathBuf> {
    ir_files_in("text")
}

fn check_file(ir: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(ir).map_err(|e| format!("{}: {e}", ir.display()))?;
    let k = Kernel::from_text(&text).map_err(|e| format!("{}:{e}", ir.display()))?;
    let printed = k.to_string();
    let back = Kernel::from_text(&printed).map_err(|e| format!("{} (printed form):{e}\n{printed}", ir.display()))?;
    if back != k || back.to_string() != printed {
        return Err(format!("{}: the printed form does not read back to the same kernel", ir.display()));
    }
    check_snapshot(&ir.with_extension("expected"), &printed)?;
    let expanded = match baro_dsl::lanes::expand(&k) {
        Ok(e) => {
            let p = e.to_string();
            if Kernel::from_text(&p).as_ref() != Ok(&e) {
                return Err(format!("{}: the expanded kernel does not round-trip", ir.display()));
            }
            p
        }
        Err(e) => format!("error: {e}\n"),
    };
    check_snapshot(&ir.with_extension("expanded.expected"), &expanded)
}

#[test]
fn ir_files_match_their_snapshots() {
    let files = ir_files();
    assert!(files.len() >= 3, "expected at least 3 .ir files, found {}", files.len());
    let failures: Vec<String> = files.iter().filter_map(|f| check_file(f).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
