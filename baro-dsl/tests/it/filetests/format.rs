//! Reads a filetest's directive lines (`; test`, `; check:`, `; not:`, `; nowhere:`, `; error:`,
//! `; output:`) and leaves
//! the IR text for the parser. It only reads the file; it never runs anything.
//!
//! Every line whose first non-blank character is `;` is a directive (free comments are the
//! IR's own `//`), so a misspelt directive is an error rather than a check silently skipped.
//! Directive lines are blanked, not removed, so parse errors keep the file's line numbers.
//! A `; output:` line starts the snapshot block, which ends the file: every line after it is
//! `; TEXT` (or a bare `;` for an empty line), one output line each.

use baro_dsl::target::Target;

/// Which compile stage a lowering test reads (STYLE 6: stages are named by their extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// LLVM IR (`.ll`): the host's after its O2 pipeline, a GPU's as handed to the code generator.
    Ll,
    /// PTX text (`.ptx`), NVPTX only.
    Ptx,
    /// AMDGPU assembly (`.s`), AMDGPU only.
    Asm,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Well-formedness and `verify_kernel` for every kernel, and `check_sibling` for every
    /// rows kernel whose m=1 kernel is in the file.
    Verify,
    /// Every kernel verifies; the output is each kernel printed after `lanes::expand`.
    Expand,
    /// Every kernel verifies; the output is each kernel's `stage` for `target`.
    Lower { target: Target, stage: Stage },
}

impl Kind {
    pub fn name(&self) -> String {
        match self {
            Kind::Verify => "verify".into(),
            Kind::Expand => "expand".into(),
            Kind::Lower { target, stage } => format!("lower {target} {}", stage.ext()),
        }
    }
}

impl Stage {
    pub fn ext(self) -> &'static str {
        match self {
            Stage::Ll => "ll",
            Stage::Ptx => "ptx",
            Stage::Asm => "s",
        }
    }
}

/// One directive's text and its 1-based line in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    pub line: usize,
    pub text: String,
}

/// An output pattern, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// `; check: TEXT`: a later output line contains TEXT.
    Check(Directive),
    /// `; not: TEXT`: no output line between the surrounding checks contains TEXT.
    Not(Directive),
    /// `; nowhere: TEXT`: no output line at all contains TEXT (wherever the line stands).
    Nowhere(Directive),
}

#[derive(Clone, Debug)]
pub struct FileTest {
    pub kind: Kind,
    pub patterns: Vec<Pattern>,
    pub errors: Vec<Directive>,
    /// The file with every directive line blanked.
    pub ir: String,
    pub snapshot: Option<Snapshot>,
}

/// The `; output:` block: the exact text the test must print.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// 0-based index of the `; output:` line: blessing keeps the file's lines before it.
    pub start: usize,
    pub lines: Vec<String>,
}

/// A snapshot block for `output`, the lines that replace the file's from `; output:` on.
pub fn snapshot_block(output: &str) -> String {
    let mut s = String::from("; output:\n");
    for l in output.lines() {
        if l.is_empty() {
            s.push_str(";\n");
        } else {
            s.push_str("; ");
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

fn lower_kind(args: &str) -> Result<Kind, String> {
    let mut words = args.split_whitespace();
    let Some(t) = words.next() else { return Err("`; test lower` needs a target: host, sm_NN or gfxNNN".into()) };
    let target: Target = t.parse().map_err(|_| format!("`{t}` is not a target: expected host, sm_NN or gfxNNN"))?;
    let default = match target {
        Target::Host => Stage::Ll,
        Target::Nvptx { .. } => Stage::Ptx,
        _ => Stage::Asm,
    };
    let stage = match words.next() {
        None => default,
        Some("ll") => Stage::Ll,
        Some(s) if s == default.ext() => default,
        Some(s) if default == Stage::Ll => return Err(format!("stage `{s}` for {target}: expected `ll`")),
        Some(s) => return Err(format!("stage `{s}` for {target}: expected `ll` or `{}`", default.ext())),
    };
    if let Some(extra) = words.next() {
        return Err(format!("unexpected `{extra}` after the stage"));
    }
    Ok(Kind::Lower { target, stage })
}

fn kind(args: &str) -> Result<Kind, String> {
    let args = args.trim();
    match args.split_once(' ').map_or((args, ""), |(a, b)| (a, b)) {
        ("verify", "") => Ok(Kind::Verify),
        ("expand", "") => Ok(Kind::Expand),
        ("lower", rest) => lower_kind(rest),
        _ => Err(format!("unknown test `{args}`: expected `verify`, `expand` or `lower TARGET [STAGE]`")),
    }
}

/// Reads `text`'s directives. Errors say which line and what was expected.
pub fn read(text: &str) -> Result<FileTest, Vec<String>> {
    let mut problems = Vec::new();
    let mut kind_found: Option<Kind> = None;
    let (mut patterns, mut errors) = (Vec::new(), Vec::new());
    let mut ir = String::with_capacity(text.len());
    let mut seen_ir = false;
    let mut snapshot: Option<Snapshot> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if let Some(snap) = &mut snapshot {
            match raw.strip_prefix(';') {
                Some(rest) => snap.lines.push(rest.strip_prefix(' ').unwrap_or(rest).to_string()),
                None => problems.push(format!(
                    "line {line}: `{raw}` after `; output:`: expected the block to end the file, each line `; TEXT`"
                )),
            }
            continue;
        }
        if t == "; output:" {
            snapshot = Some(Snapshot { start: i, lines: Vec::new() });
            continue;
        }
        let Some(d) = t.strip_prefix(';') else {
            if !t.is_empty() && !t.starts_with("//") {
                seen_ir = true;
            }
            ir.push_str(raw);
            ir.push('\n');
            continue;
        };
        ir.push('\n');
        let d = d.trim_start();
        let payload = |rest: &str, what: &str, problems: &mut Vec<String>| -> Option<Directive> {
            let text = rest.trim().to_string();
            if text.is_empty() {
                problems.push(format!("line {line}: `; {what}:` with no text"));
                return None;
            }
            Some(Directive { line, text })
        };
        if let Some(rest) = d.strip_prefix("test ") {
            if seen_ir {
                problems.push(format!("line {line}: `; test` after the IR: expected it among the file's first lines"));
            }
            if kind_found.is_some() {
                problems.push(format!("line {line}: a second `; test` line: expected one per file"));
            }
            match kind(rest) {
                Ok(k) => kind_found = Some(k),
                Err(e) => problems.push(format!("line {line}: {e}")),
            }
        } else if let Some(rest) = d.strip_prefix("check:") {
            patterns.extend(payload(rest, "check", &mut problems).map(Pattern::Check));
        } else if let Some(rest) = d.strip_prefix("not:") {
            patterns.extend(payload(rest, "not", &mut problems).map(Pattern::Not));
        } else if let Some(rest) = d.strip_prefix("nowhere:") {
            patterns.extend(payload(rest, "nowhere", &mut problems).map(Pattern::Nowhere));
        } else if let Some(rest) = d.strip_prefix("error:") {
            errors.extend(payload(rest, "error", &mut problems));
        } else {
            problems.push(format!(
                "line {line}: unknown directive `{t}`: expected `; test`, `; check:`, `; not:`, `; nowhere:`, `; error:` or `; output:` (comments are `//`)"
            ));
        }
    }
    let Some(kind) = kind_found else {
        problems.push(
            "no `; test` line: expected `; test verify`, `; test expand` or `; test lower TARGET [STAGE]`".into(),
        );
        return Err(problems);
    };
    if kind == Kind::Verify && !patterns.is_empty() {
        problems.push(
            "`; check:`/`; not:`/`; nowhere:` in a verify test, which prints no text: expected `; error:` lines only"
                .into(),
        );
    }
    if kind == Kind::Verify && snapshot.is_some() {
        problems.push("an `; output:` block in a verify test, which prints no text".into());
    }
    if !errors.is_empty() && (!patterns.is_empty() || snapshot.is_some()) {
        problems.push("both `; error:` and output checks: a file that expects errors has no output to check".into());
    }
    let checks_output =
        patterns.iter().any(|p| matches!(p, Pattern::Check(_) | Pattern::Nowhere(_))) || snapshot.is_some();
    if kind != Kind::Verify && !checks_output && errors.is_empty() {
        problems.push(format!("a `{}` test with no `; check:`, `; output:` or `; error:` checks nothing", kind.name()));
    }
    if problems.is_empty() {
        Ok(FileTest { kind, patterns, errors, ir, snapshot })
    } else {
        Err(problems)
    }
}
