//! The filetest runner: every `.ir` file under `tests/filetests/` is one test, its directives
//! (`; test`, `; check:`, `; not:`, `; nowhere:`, `; error:`, `; output:`; see
//! `tests/filetests/README.md`) saying what to run and what must come out. One `#[test]` runs
//! them all and reports every failing file with what was expected and what was found, never
//! stopping at the first; `BARO_BLESS=1` rewrites `; output:` blocks.
//!
//! `format` reads the directives, `run` runs a kind (verify, expand, lower) and renders
//! errors, `matching` compares. Lowering files need feature `llvm`; without it they are
//! listed as not run, never passed. The runner's own tests below feed it in-memory files
//! that must fail, so a runner that passes everything would fail here.

mod format;
mod matching;
mod run;

use std::path::PathBuf;

/// What one file's run came to.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    NotRun(String),
    /// Blessing: the file's new text, its `; output:` block replaced by what was printed.
    Blessed(String),
}

fn bless() -> bool {
    std::env::var("BARO_BLESS").is_ok_and(|v| v == "1")
}

/// Runs one file's text: `Ok` or every failure, in words. With `bless`, a file whose output
/// differs from its `; output:` block comes back rewritten instead of failing (its other
/// checks still apply).
fn run_file(text: &str, bless: bool) -> Result<Verdict, Vec<String>> {
    let t = format::read(text)?;
    let mut fails = Vec::new();
    let outcome = run::run(&t, &mut fails);
    if let Some(why) = outcome.not_run {
        return if fails.is_empty() { Ok(Verdict::NotRun(why)) } else { Err(fails) };
    }
    let error_fails = matching::check_errors(&t.errors, &outcome.errors);
    let show_statements = !error_fails.is_empty() && !outcome.statements.is_empty();
    fails.extend(error_fails);
    if show_statements {
        fails.push(format!("the statements they name:\n    {}", outcome.statements.join("\n    ")));
    }
    let (mut blessed, mut snapshot_differs) = (None, false);
    if let (Some(output), Some(snap)) = (&outcome.output, &t.snapshot) {
        let found: Vec<&str> = output.lines().collect();
        if found != snap.lines {
            if bless {
                let kept: Vec<&str> = text.lines().take(snap.start).collect();
                blessed = Some(format!("{}\n{}", kept.join("\n"), format::snapshot_block(output)));
            } else {
                snapshot_differs = true;
                let at = found
                    .iter()
                    .zip(&snap.lines)
                    .position(|(a, b)| a != b)
                    .unwrap_or(found.len().min(snap.lines.len()));
                let (want, got) = (
                    snap.lines.get(at).map_or("(end of the block)", String::as_str),
                    found.get(at).copied().unwrap_or("(end of the output)"),
                );
                fails.push(format!(
                    "the output differs from the `; output:` block (BARO_BLESS=1 rewrites it) at output line {}:\n  expected: {want}\n  found:    {got}",
                    at + 1
                ));
            }
        }
    }
    if let Some(output) = &outcome.output {
        let bad = matching::check_output(output, &t.patterns);
        if !bad.is_empty() || snapshot_differs {
            fails.extend(bad);
            let numbered: Vec<String> = output.lines().enumerate().map(|(i, l)| format!("{:>5}| {l}", i + 1)).collect();
            fails.push(format!("the {} output was:\n{}", t.kind.name(), numbered.join("\n")));
        }
    }
    match (fails.is_empty(), blessed) {
        (true, Some(new_text)) => Ok(Verdict::Blessed(new_text)),
        (true, None) => Ok(Verdict::Pass),
        (false, _) => Err(fails),
    }
}

fn files() -> Vec<PathBuf> {
    crate::text_files::ir_files_in("filetests")
}

#[test]
fn filetests() {
    let files = files();
    assert!(files.len() >= 15, "expected at least 15 filetests, found {}", files.len());
    let (mut failures, mut not_run, mut passed) = (Vec::new(), Vec::new(), 0);
    for f in &files {
        let name = f.file_name().map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned());
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: cannot read: {e}"));
                continue;
            }
        };
        match run_file(&text, bless()) {
            Ok(Verdict::Pass) => passed += 1,
            Ok(Verdict::Blessed(new_text)) => match std::fs::write(f, new_text) {
                Ok(()) => {
                    eprintln!("  blessed: {name}");
                    passed += 1
                }
                Err(e) => failures.push(format!("{name}: cannot write the blessed output: {e}")),
            },
            Ok(Verdict::NotRun(why)) => not_run.push(format!("{name}: {why}")),
            Err(fails) => failures.push(format!("{name}:\n  {}", fails.join("\n  ").replace('\n', "\n  "))),
        }
    }
    eprintln!("filetests: {passed} passed, {} failed, {} not run", failures.len(), not_run.len());
    for n in &not_run {
        eprintln!("  not run: {n}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} filetests failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

// The runner's own tests: in-memory files it must fail, and the passing forms beside them.

const SUM: &str = "
kernel total {
    param p0 x: &[f32]
    param p1 y: &mut [f32]
    param p2 n: usize
    var v0 i: usize
    grid [1:usize]
    body {
        store p1:y[0:usize] = reduce(sum, f32, lanes(4, butterfly), v0:i, p2:n, load(p0:x, v0:i))
    }
}
";

/// A float accumulation in a loop that is no declared reduction.
const UNDECLARED: &str = "
kernel acc {
    param p0 x: &[f32]
    param p1 y: &mut [f32]
    param p2 n: usize
    var v0 s: mut f32
    var v1 i: usize
    grid [1:usize]
    body {
        let v0:s = 0.0:f32
        for v1:i in 0:usize..p2:n step 1:usize {
            v0:s = add(v0:s, load(p0:x, v1:i))
        }
        store p1:y[0:usize] = v0:s
    }
}
";

fn fails_with(text: &str, needle: &str) {
    match run_file(text, false) {
        Ok(v) => panic!("expected a failure containing `{needle}`, the file passed ({v:?}):\n{text}"),
        Err(fails) => assert!(
            fails.iter().any(|f| f.contains(needle)),
            "expected a failure containing `{needle}`, found:\n{}",
            fails.join("\n")
        ),
    }
}

#[test]
fn a_check_that_is_not_in_the_output_fails() {
    let good = format!("; test expand\n; check: lanes v2:lane in 4\n; check: shuffle_xor(v3:partial, 2)\n; check: shuffle_xor(v3:partial, 1)\n{SUM}");
    assert_eq!(run_file(&good, false), Ok(Verdict::Pass));
    fails_with(
        &format!("; test expand\n; check: shuffle_xor(v3:partial, 16)\n{SUM}"),
        "`; check: shuffle_xor(v3:partial, 16)` not found in the output",
    );
    // Checks match in order: the mask 1 step comes after the mask 2 step, not before.
    let reversed =
        format!("; test expand\n; check: shuffle_xor(v3:partial, 1)\n; check: shuffle_xor(v3:partial, 2)\n{SUM}");
    fails_with(&reversed, "`; check: shuffle_xor(v3:partial, 2)` not found after output line");
}

#[test]
fn whitespace_runs_compare_as_one_space() {
    let text = format!("; test expand\n; check: lanes   v2:lane\tin 4\n; check: store  p1:y[0:usize] =\tv1:red\n{SUM}");
    assert_eq!(run_file(&text, false), Ok(Verdict::Pass));
    fails_with(&format!("; test expand\n; check: lanesv2:lane\n{SUM}"), "`; check: lanesv2:lane` not found");
}

#[test]
fn a_not_between_its_checks_fails() {
    let not_there = format!("; test expand\n; check: lanes v2:lane\n; not: barrier\n; check: store p1:y\n{SUM}");
    assert_eq!(run_file(&not_there, false), Ok(Verdict::Pass));
    fails_with(
        &format!("; test expand\n; check: lanes v2:lane\n; not: shuffle_xor\n; check: store p1:y\n{SUM}"),
        "`; not: shuffle_xor` found at output line",
    );
    // `; nowhere:` holds over the whole output, wherever it is written.
    fails_with(
        &format!("; test expand\n; nowhere: shuffle_xor\n; check: store p1:y\n{SUM}"),
        "`; nowhere: shuffle_xor` found at output line 17",
    );
    assert_eq!(
        run_file(&format!("; test expand\n; check: store p1:y\n; nowhere: barrier\n{SUM}"), false),
        Ok(Verdict::Pass)
    );
    // Outside its checks a forbidden text may appear: `reduce` is in the `implements` line.
    let outside = format!("; test expand\n; check: let v3:partial\n; not: reduce(\n{SUM}");
    assert_eq!(run_file(&outside, false), Ok(Verdict::Pass));
}

#[test]
fn expected_errors_must_all_be_reported_and_all_reported_expected() {
    fails_with(&format!("; test verify\n; error: undeclared reduction\n{SUM}"), "expected errors, found none");
    fails_with(
        &format!("; test verify\n{UNDECLARED}"),
        "unexpected error (no `; error:` line matches it): acc: undeclared reduction at [1, 0]",
    );
    // The failure shows the statement the error names.
    fails_with(
        &format!("; test verify\n{UNDECLARED}"),
        "the statements they name:\n    acc at [1, 0]: v0:s = add(v0:s, load(p0:x, v1:i))",
    );
    let right = format!("; test verify\n; error: acc: undeclared reduction at [1, 0]:\n{UNDECLARED}");
    assert_eq!(run_file(&right, false), Ok(Verdict::Pass));
    fails_with(
        &format!("; test verify\n; error: at [1]:\n{UNDECLARED}"),
        "`; error: at [1]:` matches no reported error",
    );
    let twice = format!("; test verify\n; error: undeclared reduction\n; error: undeclared reduction\n{UNDECLARED}");
    fails_with(&twice, "line 3: `; error: undeclared reduction` matches no reported error");
}

#[test]
fn malformed_directives_fail_instead_of_checking_nothing() {
    fails_with(SUM, "no `; test` line");
    fails_with(&format!("; test verify\n; chek: lanes\n{SUM}"), "unknown directive `; chek: lanes`");
    fails_with(&format!("; test expand\n{SUM}"), "checks nothing");
    fails_with(&format!("; test verify\n; check: lanes\n{SUM}"), "in a verify test");
    fails_with(&format!("; test lower sm_90 s\n; check: x\n{SUM}"), "stage `s` for sm_90: expected `ll` or `ptx`");
    fails_with(&format!("; test lower host s\n; check: x\n{SUM}"), "stage `s` for host: expected `ll`");
    fails_with(&format!("; test lower sm_9\n; check: x\n{SUM}"), "`sm_9` is not a target");
    fails_with(&format!("; test verify\n; error:\n{SUM}"), "`; error:` with no text");
    fails_with(&format!("{SUM}; test verify\n"), "`; test` after the IR");
    fails_with(
        "; test verify\nkernel rows { param p0 m: usize sibling of absent rows p0:m strides [] body { } }",
        "which this file does not hold",
    );
}

#[test]
fn a_parse_error_is_an_error_with_its_line() {
    let text = "; test verify\n; error: parse: 4:1: expected `{`, found end of input\nkernel k\n";
    assert_eq!(run_file(text, false), Ok(Verdict::Pass));
    fails_with("; test verify\nkernel k\n", "unexpected error (no `; error:` line matches it): parse: 3:1:");
}

#[test]
fn an_output_block_must_match_exactly_and_blessing_rewrites_it() {
    let empty = format!("; test expand\n{SUM}; output:\n");
    fails_with(&empty, "the output differs from the `; output:` block (BARO_BLESS=1 rewrites it) at output line 1:\n  expected: (end of the block)\n  found:    kernel total {");
    let Ok(Verdict::Blessed(blessed)) = run_file(&empty, true) else {
        panic!("blessing an empty block must rewrite it")
    };
    assert!(
        blessed.starts_with(&format!("; test expand\n{SUM}; output:\n; kernel total {{\n;     param p0 x: &[f32]\n")),
        "{blessed}"
    );
    assert_eq!(run_file(&blessed, false), Ok(Verdict::Pass));
    assert_eq!(run_file(&blessed, true), Ok(Verdict::Pass), "an equal block is left as it is");
    // One character changed in the block: the line is named with both texts.
    let wrong = blessed.replace("shuffle_xor(v3:partial, 1)", "shuffle_xor(v3:partial, 3)");
    fails_with(&wrong, "expected:             v3:partial = add(v3:partial, shuffle_xor(v3:partial, 3))");
    fails_with(&format!("{blessed}kernel after {{ body {{ }} }}\n"), "expected the block to end the file");
    fails_with(&format!("; test verify\n{SUM}; output:\n; kernel total {{\n"), "an `; output:` block in a verify test");
}
