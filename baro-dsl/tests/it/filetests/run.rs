//! Runs one filetest's kind over its kernels: what errors were reported (one line each, in
//! the form `; error:` lines match) and, for `expand` and `lower`, the text the patterns read.
//! It decides nothing about pass or fail (`matching` does).
//!
//! An error line is `KERNEL: KIND[ at LOCATION]: MESSAGE`, LOCATION being what `report.rs`
//! gives: the statement path `[2, 0]`, then `reduce #N` and `store #N` (ordinals in source
//! order); multi-line messages are joined with ` | `. A parse error is `parse: LINE:COLUMN:
//! expected X, found Y`.

use baro_dsl::ir::{Kernel, Stmt};
use baro_dsl::verify::{check_sibling, verify_kernel, ErrorKind, Location, SiblingError, VerifyError};

use super::format::{FileTest, Kind};

/// What running a file produced.
pub struct Outcome {
    pub errors: Vec<String>,
    /// The text `; check:` reads; `None` for `verify`, after errors, or when not run.
    pub output: Option<String>,
    /// Why the test did not run here (a lowering without feature `llvm`).
    pub not_run: Option<String>,
    /// For each error that names a statement, that statement's first line (shown when the
    /// errors do not match, so a reader sees the failing entity without counting paths).
    pub statements: Vec<String>,
}

impl Outcome {
    fn failed(errors: Vec<String>, statements: Vec<String>) -> Outcome {
        Outcome { errors, output: None, not_run: None, statements }
    }
}

/// The statement at `path`: an index into the body, then into each statement's nested blocks
/// taken one after another (an `if`'s else block numbered on from its then block), as
/// `wellformed` counts.
fn stmt_at<'k>(k: &'k Kernel, path: &[u32]) -> Option<&'k Stmt> {
    let (first, rest) = path.split_first()?;
    let mut s = k.body.get(*first as usize)?;
    for &i in rest {
        let nested: Vec<&Stmt> = match s {
            Stmt::For { body, .. } | Stmt::ParFor { body, .. } | Stmt::Lanes { body, .. } => body.iter().collect(),
            Stmt::If { then_body, else_body, .. } => then_body.iter().chain(else_body).collect(),
            _ => return None,
        };
        s = nested.get(i as usize)?;
    }
    Some(s)
}

/// `kernel [path]: first line of the statement` for every error naming a statement.
fn statements(kernels: &[Kernel], errs: &[VerifyError]) -> Vec<String> {
    let mut out = Vec::new();
    for e in errs {
        let Some(k) = kernels.iter().find(|k| k.name == e.kernel) else { continue };
        if let Some(s) = stmt_at(k, &e.location.stmt_path) {
            let text = k.stmt_text(s);
            let line = format!("{}{}: {}", e.kernel, location(&e.location), text.lines().next().unwrap_or(""));
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

fn one_line(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ")
}

fn kind_name(k: ErrorKind) -> &'static str {
    match k {
        ErrorKind::Malformed => "malformed",
        ErrorKind::NonUniformSync => "non-uniform sync",
        ErrorKind::UndeclaredReduction => "undeclared reduction",
        ErrorKind::ScheduleNotImplemented => "schedule not implemented",
        ErrorKind::Unsupported => "unsupported",
        ErrorKind::Vacuous => "vacuous",
        ErrorKind::OrderFree => "order free",
        ErrorKind::Race => "race",
    }
}

fn location(l: &Location) -> String {
    let mut parts = Vec::new();
    if !l.stmt_path.is_empty() {
        let path: Vec<String> = l.stmt_path.iter().map(u32::to_string).collect();
        parts.push(format!("[{}]", path.join(", ")));
    }
    parts.extend(l.reduce.map(|r| format!("reduce #{r}")));
    parts.extend(l.store.map(|s| format!("store #{s}")));
    if parts.is_empty() {
        String::new()
    } else {
        format!(" at {}", parts.join(", "))
    }
}

pub fn verify_error(e: &VerifyError) -> String {
    format!("{}: {}{}: {}", e.kernel, kind_name(e.kind), location(&e.location), one_line(&e.message))
}

pub fn sibling_error(rows: &Kernel, e: &SiblingError) -> Vec<String> {
    match e {
        SiblingError::Invalid(errs) => errs.iter().map(verify_error).collect(),
        SiblingError::Schedule { reduce, .. } => {
            vec![format!("{}: sibling schedule at reduce #{reduce}: {}", rows.name, one_line(&e.to_string()))]
        }
        SiblingError::Arithmetic(m) => {
            vec![format!("{}: sibling arithmetic{}: {}", rows.name, location(&m.location), one_line(&e.to_string()))]
        }
    }
}

/// Every kernel's own proof, then every sibling proof the file holds both kernels of.
/// Identical lines (a malformed kernel reported by both proofs) are kept once.
fn verify_all(kernels: &[Kernel], errors: &mut Vec<String>, problems: &mut Vec<String>) -> Vec<String> {
    let mut named: Vec<VerifyError> = Vec::new();
    for k in kernels {
        if let Err(errs) = verify_kernel(k) {
            errors.extend(errs.iter().map(verify_error));
            named.extend(errs);
        }
    }
    for rows in kernels {
        let Some(sib) = &rows.sibling else { continue };
        match kernels.iter().find(|k| k.name == sib.of) {
            Some(m1) => {
                if let Err(e) = check_sibling(rows, m1) {
                    errors.extend(sibling_error(rows, &e));
                    match e {
                        SiblingError::Invalid(errs) => named.extend(errs),
                        SiblingError::Arithmetic(m) => named.push(VerifyError {
                            kernel: rows.name.clone(),
                            location: m.location.clone(),
                            kind: ErrorKind::Malformed,
                            message: String::new(),
                        }),
                        SiblingError::Schedule { .. } => {}
                    }
                }
            }
            None => problems.push(format!(
                "kernel `{}` is declared a sibling of `{}`, which this file does not hold: the sibling proof cannot run",
                rows.name, sib.of
            )),
        }
    }
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.clone()));
    statements(kernels, &named)
}

/// Runs `t`. `problems` collects what is wrong with the file itself (not matchable errors).
pub fn run(t: &FileTest, problems: &mut Vec<String>) -> Outcome {
    let kernels = match Kernel::many_from_text(&t.ir) {
        Ok(k) => k,
        Err(e) => return Outcome::failed(vec![format!("parse: {e}")], Vec::new()),
    };
    let mut errors = Vec::new();
    match &t.kind {
        Kind::Verify => {
            let statements = verify_all(&kernels, &mut errors, problems);
            Outcome::failed(errors, statements)
        }
        Kind::Expand => {
            let statements = verify_all(&kernels, &mut errors, problems);
            if !errors.is_empty() {
                return Outcome::failed(errors, statements);
            }
            let mut out = String::new();
            for k in &kernels {
                match baro_dsl::lanes::expand(k) {
                    Ok(x) => out.push_str(&x.to_string()),
                    Err(e) => errors.push(format!("{}: expand: {}", k.name, one_line(&e.message))),
                }
            }
            let output = errors.is_empty().then_some(out);
            Outcome { errors, output, not_run: None, statements: Vec::new() }
        }
        Kind::Lower { target, stage } => {
            let statements = verify_all(&kernels, &mut errors, problems);
            if !errors.is_empty() {
                return Outcome::failed(errors, statements);
            }
            lower(&kernels, target, *stage)
        }
    }
}

#[cfg(not(feature = "llvm"))]
fn lower(_: &[Kernel], _: &baro_dsl::target::Target, _: super::format::Stage) -> Outcome {
    Outcome {
        errors: Vec::new(),
        output: None,
        not_run: Some("lowering needs feature `llvm`".into()),
        statements: Vec::new(),
    }
}

#[cfg(feature = "llvm")]
fn lower(kernels: &[Kernel], target: &baro_dsl::target::Target, stage: super::format::Stage) -> Outcome {
    use super::format::Stage;
    use baro_dsl::target::Target;
    let (mut errors, mut out) = (Vec::new(), String::new());
    for k in kernels {
        let text = match target {
            Target::Host => host_runtime().compile(k).map(|c| c.llvm_ir().to_string()).map_err(|e| e.to_string()),
            _ => {
                let cache = baro_dsl::cache::CompileCache::new(None);
                let options = baro_dsl::options::CompileOptions::default();
                baro_dsl::compile::compile_gpu(k, target, &options, &cache)
                    .map(|a| match stage {
                        Stage::Ll => a.llvm_ir.clone(),
                        Stage::Ptx | Stage::Asm => a.asm.clone(),
                    })
                    .map_err(|e| e.to_string())
            }
        };
        match text {
            Ok(t) => out.push_str(&t),
            Err(e) => errors.push(format!("{}: lower: {}", k.name, one_line(&e))),
        }
    }
    let output = errors.is_empty().then_some(out);
    Outcome { errors, output, not_run: None, statements: Vec::new() }
}

/// One host runtime for every host lowering (sequential order, no disk cache: the text is
/// always this build's).
#[cfg(feature = "llvm")]
fn host_runtime() -> &'static baro_dsl::runtime::HostRuntime {
    static RT: std::sync::OnceLock<baro_dsl::runtime::HostRuntime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        baro_dsl::runtime::HostRuntime::with_order(baro_dsl::options::HostOrder::Sequential)
            .expect("the host runtime starts")
    })
}
