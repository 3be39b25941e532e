//! Keeps a chat template (text from a model file) from building a value that holds itself.
//!
//! A namespace is minijinja's one mutable value: `{% set ns.a = ns %}` stores a namespace in
//! itself, and printing, concatenating or serializing it afterwards recurses in minijinja until
//! the stack overflows, which aborts the process (found by fuzzing; minijinja 2.24 has no
//! guard). The same recursion, bounded but deep enough to overflow, comes from chains of
//! namespaces built in a loop. Here every namespace a render creates is recorded (`namespace`
//! is replaced by a wrapper around minijinja's), and the template source is rewritten so that
//! each attribute assignment (`{% set x.y = ... %}`, the only way a namespace changes) is
//! followed by a check of every recorded namespace: nested at most `MAX_DEPTH` deep and within
//! `MAX_NODES` values, or the render fails with a template error. A cycle has no depth, so
//! it fails the check right after the assignment that closed it, before anything can print it.
//! The rewrite adds a block tag after the assignment's tag, with the same whitespace control,
//! so the rendered text is unchanged. Never panics; never changes what a template renders
//! when the check passes.

use std::cell::RefCell;

use minijinja::machinery::{tokenize, Token, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

/// The function the rewrite calls after each attribute assignment.
pub(crate) const CHECK_FN: &str = "__baro_namespaces_ok";

/// Deeper than any value a chat template needs (request JSON nests at most 128 deep, serde's
/// limit), shallow enough to print on a 2 MiB thread stack.
const MAX_DEPTH: usize = 256;
/// Values visited by one check, so that shared sub-values doubled on every level cannot make
/// a check (or a later print) take exponential time.
const MAX_NODES: usize = 1 << 18;

thread_local! {
    /// The namespaces of the render in progress on this thread.
    static NAMESPACES: RefCell<Vec<Value>> = const { RefCell::new(Vec::new()) };
}

/// Forgets the namespaces of an earlier render on this thread; called when a render starts and
/// ends (a cycle a failed render left behind is then dropped with it, not kept).
pub(crate) fn reset() {
    NAMESPACES.with(|n| n.borrow_mut().clear());
}

/// minijinja's `namespace`, recorded for the checks.
pub(crate) fn namespace(defaults: Option<Value>) -> Result<Value, Error> {
    let ns = minijinja::functions::namespace(defaults)?;
    check(&ns)?;
    NAMESPACES.with(|n| n.borrow_mut().push(ns.clone()));
    Ok(ns)
}

/// Every namespace of the render is within the limits; returns an empty string (the rewrite
/// uses it as an `if` condition's operand).
pub(crate) fn namespaces_ok() -> Result<Value, Error> {
    let all: Vec<Value> = NAMESPACES.with(|n| n.borrow().clone());
    for ns in &all {
        check(ns)?;
    }
    Ok(Value::from(""))
}

/// Walks `value` without recursion: at most `MAX_DEPTH` deep and `MAX_NODES` values.
fn check(value: &Value) -> Result<(), Error> {
    let mut stack = vec![(value.clone(), 0usize)];
    let mut nodes = 0usize;
    while let Some((v, depth)) = stack.pop() {
        nodes += 1;
        if depth > MAX_DEPTH || nodes > MAX_NODES {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("a namespace holds itself, or values nested deeper than {MAX_DEPTH} or more than {MAX_NODES} of them"),
            ));
        }
        match v.kind() {
            ValueKind::Seq => stack.extend(v.try_iter()?.map(|item| (item, depth + 1))),
            ValueKind::Map => {
                for key in v.try_iter()? {
                    stack.push((v.get_item(&key)?, depth + 1));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `source` with `{% if __baro_namespaces_ok() %}{% endif %}` after every `{% set x.y = ... %}`
/// tag, its `%}` written as the assignment's (`-%}` and `+%}` keep their whitespace control).
/// A source the lexer rejects is returned unchanged: minijinja reports the error itself.
pub(crate) fn instrument(source: &str) -> String {
    let ws = WhitespaceConfig { keep_trailing_newline: false, lstrip_blocks: true, trim_blocks: true };
    let mut out = String::with_capacity(source.len());
    let mut copied = 0;
    // Where the lexer is: 0 outside a block, 1 just after `{%`, 2 in a `set` before `=`, 3 in
    // a `set` whose target has a dot, after its `=`, 4 in any other block.
    let mut state = 0u8;
    let mut dotted = false;
    // A unit struct unless minijinja's `custom_syntax` feature is on (feature unification).
    #[allow(clippy::default_constructed_unit_structs)]
    let syntax = SyntaxConfig::default();
    for item in tokenize(source, false, syntax, ws) {
        let Ok((token, span)) = item else { return source.to_string() };
        state = match (state, token) {
            (_, Token::BlockStart) => 1,
            (1, Token::Ident("set")) => {
                dotted = false;
                2
            }
            (2, Token::Dot) => {
                dotted = true;
                2
            }
            (2, Token::Assign) if dotted => 3,
            (2, Token::Assign) => 4,
            (3, Token::BlockEnd) => {
                let (start, end) = (span.start_offset as usize, span.end_offset as usize);
                let Some(tag) = source.get(start..end) else { return source.to_string() };
                let Some(close) = tag.find("%}") else { return source.to_string() };
                let marker = &tag[..close];
                let after = start + close + 2;
                out.push_str(&source[copied..after]);
                out.push_str(&format!("{{% if {CHECK_FN}() {marker}%}}{{% endif {marker}%}}"));
                copied = after;
                0
            }
            (_, Token::BlockEnd) => 0,
            (0, _) => 0,
            (1 | 4, _) => 4,
            (s, _) => s,
        };
    }
    out.push_str(&source[copied..]);
    out
}
