//! Matches a test's output against its `; check:`/`; not:` patterns and its reported errors
//! against its `; error:` lines. Pure functions over text: each returns what failed, in words.
//!
//! - `; check: TEXT`: the first output line at or after the line following the previous
//!   check's line that contains TEXT (a plain substring, case as written; runs of spaces and
//!   tabs compare as one space, in the text and in the output, like FileCheck's). A check
//!   not found ends the matching: later positions would mean nothing.
//! - `; not: TEXT`: no output line strictly between the previous check's line (or the start)
//!   and the next check's line (or the end) contains TEXT.
//! - `; nowhere: TEXT`: no output line contains TEXT (FileCheck's `--implicit-check-not`),
//!   checked whether or not a check failed.
//! - `; error: TEXT`: in file order, each takes the first not yet taken reported error that
//!   contains TEXT; every expectation must take one and every reported error must be taken.

use super::format::{Directive, Pattern};

/// `s` with every run of spaces and tabs as one space.
fn squeeze(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = if c == '\t' { ' ' } else { c };
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
        }
    }
    out
}

/// Every way `output` fails `patterns` (empty: it passes).
pub fn check_output(output: &str, patterns: &[Pattern]) -> Vec<String> {
    let squeezed: Vec<String> = output.lines().map(squeeze).collect();
    let lines: Vec<&str> = squeezed.iter().map(String::as_str).collect();
    let patterns: Vec<Pattern> = patterns
        .iter()
        .map(|p| match p {
            Pattern::Check(d) => Pattern::Check(Directive { line: d.line, text: squeeze(&d.text) }),
            Pattern::Not(d) => Pattern::Not(Directive { line: d.line, text: squeeze(&d.text) }),
            Pattern::Nowhere(d) => Pattern::Nowhere(Directive { line: d.line, text: squeeze(&d.text) }),
        })
        .collect();
    let mut fails = Vec::new();
    for p in &patterns {
        if let Pattern::Nowhere(d) = p {
            if let Some(j) = lines.iter().position(|l| l.contains(&d.text)) {
                fails.push(format!(
                    "line {}: `; nowhere: {}` found at output line {}: {}",
                    d.line,
                    d.text,
                    j + 1,
                    lines[j].trim()
                ));
            }
        }
    }
    let mut from = 0; // first line the next check may match
    let mut nots: Vec<&Directive> = Vec::new();
    let scan_nots = |nots: &mut Vec<&Directive>, lo: usize, hi: usize, until: &str, fails: &mut Vec<String>| {
        for d in nots.drain(..) {
            if let Some(j) = (lo..hi).find(|&j| lines[j].contains(&d.text)) {
                fails.push(format!(
                    "line {}: `; not: {}` found at output line {} (between output lines {} and {until}): {}",
                    d.line,
                    d.text,
                    j + 1,
                    lo,
                    lines[j].trim()
                ));
            }
        }
    };
    for p in &patterns {
        match p {
            Pattern::Not(d) => nots.push(d),
            Pattern::Nowhere(_) => {}
            Pattern::Check(d) => match (from..lines.len()).find(|&j| lines[j].contains(&d.text)) {
                Some(j) => {
                    scan_nots(&mut nots, from, j, &(j + 1).to_string(), &mut fails);
                    from = j + 1;
                }
                None => {
                    let after =
                        if from == 0 { "in the output".to_string() } else { format!("after output line {from}") };
                    fails.push(format!("line {}: `; check: {}` not found {after}", d.line, d.text));
                    return fails;
                }
            },
        }
    }
    scan_nots(&mut nots, from, lines.len(), "the end", &mut fails);
    fails
}

/// Every way `reported` fails the `expected` error lines (empty: it passes).
pub fn check_errors(expected: &[Directive], reported: &[String]) -> Vec<String> {
    let mut fails = Vec::new();
    if !expected.is_empty() && reported.is_empty() {
        let lines: Vec<String> = expected.iter().map(|d| format!("line {}: {}", d.line, d.text)).collect();
        fails.push(format!(
            "expected errors, found none: every kernel verified cleanly (expected: {})",
            lines.join("; ")
        ));
        return fails;
    }
    let mut taken = vec![false; reported.len()];
    for d in expected {
        match (0..reported.len()).find(|&i| !taken[i] && reported[i].contains(&d.text)) {
            Some(i) => taken[i] = true,
            None => fails.push(format!("line {}: `; error: {}` matches no reported error", d.line, d.text)),
        }
    }
    for (i, e) in reported.iter().enumerate() {
        if !taken[i] {
            fails.push(format!("unexpected error (no `; error:` line matches it): {e}"));
        }
    }
    if !fails.is_empty() && !expected.is_empty() {
        let all: Vec<String> = reported.iter().map(|e| format!("    {e}")).collect();
        fails.push(format!("the reported errors were:\n{}", all.join("\n")));
    }
    fails
}
