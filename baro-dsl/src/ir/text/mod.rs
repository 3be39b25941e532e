//! The text form of the kernel IR (`.ir` files): a printer (`Display for Kernel`) and a
//! parser (`Kernel::from_text`, `FromStr for Kernel`) that are exact inverses, so a bug report
//! is a small text file and tests are data.
//!
//! It must never lose anything: every field of `Kernel` is printed, constants keep their exact
//! bits, and `parse(print(k)) == k` for every kernel whose names are identifiers, including
//! ill-formed ones (a reference to an undeclared entity prints bare, e.g. `v99`). The parser
//! never panics on any input; it does not type-check or verify (that is the verifier's job).
//!
//! Grammar (whitespace and `// comments` are insignificant; one statement per line is only the
//! printer's habit):
//!
//! ```text
//! file      = kernel+                   (`Kernel::many_from_text`; `from_text` reads exactly one)
//! kernel    = "kernel" IDENT "{" param* shared* var* grid? sibling? verify* "body" block "}"
//! param     = "param" PID IDENT ":" ( "&" "[" TYPE "]" | "&" "mut" "[" TYPE "]" | TYPE )
//! shared    = "shared" SID IDENT ":" "[" TYPE ";" INT "]"
//! var       = "var" VID IDENT ":" "mut"? TYPE
//! grid      = "grid" "[" ( expr ( "," expr )* )? "]"
//! sibling   = "sibling" "of" IDENT "rows" pref "strides" "[" ( pref "=" expr ( "," pref "=" expr )* )? "]"
//! verify    = "verify" pref "in" "[" ( INT ( "," INT )* )? "]"
//! block     = "{" stmt* "}"
//! stmt      = "let" vref "=" expr | vref "=" expr | "store" buf "[" expr "]" "=" expr
//!           | "let" "[" ( vref ( "," vref )* )? "]" "=" "rows" "(" vref "," expr ")"
//!           | "for" vref "in" expr ".." expr "step" expr block
//!           | "if" expr block ( "else" block )?
//!           | "parfor" vref "in" ".." expr block
//!           | "lanes" vref "in" INT ( "implements" ( vref "=" reduce
//!                                                  | "[" ( vref ( "," vref )* )? "]" "=" "rows" "(" ( vref | "_" ) "," reduce ")" ) )? block
//!           | "barrier"
//! expr      = CONST | vref | pref | "group_id" "(" INT ")" | "load" "(" buf "," expr ")"
//!           | UNOP "(" expr ")" | BINOP "(" expr "," expr ")" | MATHFN "(" expr ")"
//!           | "select" "(" expr "," expr "," expr ")" | "fma" "(" expr "," expr "," expr ")"
//!           | ( "cast" | "bitcast" ) "<" TYPE ">" "(" expr ")"
//!           | "let" "(" vref "=" expr "," expr ")" | reduce
//!           | "shuffle_xor" "(" expr "," INT ")"
//! reduce    = "reduce" "(" ( "sum" | "max" | "min" | "fma_sum" ) "," TYPE "," schedule "," vref "," expr "," expr ")"
//! schedule  = "seq" | ( "lanes" | "chunked" ) "(" INT "," COMBINE ")" | "blocked" "(" INT "," schedule ")"
//! vref      = VID ( ":" IDENT )?        pref = PID ( ":" IDENT )?        buf = pref | SID ( ":" IDENT )?
//! CONST     = "true" | "false" | NUMBER ":" TYPE     (NUMBER: decimal, or 0x-hex holding the raw bits)
//! VID, PID, SID = "v" INT, "p" INT, "s" INT;  TYPE = bool | i8 | u8 | i32 | u32 | i64 | u64 | usize | f16 | bf16 | f32
//! ```
//!
//! `let [a, b] = rows(r, reduce(..))` is a reduction with one result per row: `a` is the
//! reduction with `r` = 0, `b` with `r` = 1 (`Stmt::LetRows`).
//! `reduce(op, ty, schedule, var, len, body)` reduces `body` over `var in 0..len` (for
//! `fma_sum`, `body` is a product `mul(a, b)` whose factors each partial takes in with one fma). Entity ids in
//! declarations must count up from 0; the `:name` after a reference is optional in hand-written
//! text but, when present, must be the declared name. Float constants are decimals when they
//! read back to the same bits, else hex bits (`0x80000000:f32` is -0.0); the parser accepts
//! both, and a decimal f16/bf16 constant only when it is exact.

mod lex;
mod literal;
mod parse;
mod print;

use std::fmt;

use super::kernel::{Expr, Kernel, Stmt};

/// Nesting deeper than this (blocks plus expressions) is refused rather than risking the stack.
pub const MAX_NESTING: u32 = 200;

/// Why a text could not be read as a kernel: the input's fault, never baro's. `line` and
/// `column` are 1-based; `column` counts characters.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: expected {expected}, found {found}")]
pub struct ParseError {
    pub line: u32,
    pub column: u32,
    pub expected: String,
    pub found: String,
}

impl Kernel {
    /// Parses the text form printed by `Display for Kernel`.
    pub fn from_text(text: &str) -> Result<Kernel, ParseError> {
        parse::kernel(text)
    }

    /// Parses one or more kernels printed one after another (`kernels_text`), e.g. an m=1
    /// kernel and its rows sibling in one file.
    pub fn many_from_text(text: &str) -> Result<Vec<Kernel>, ParseError> {
        parse::kernels(text)
    }

    /// `e` in the text form, named from this kernel's declarations (for diagnostics).
    pub fn expr_text(&self, e: &Expr) -> String {
        print::expr_text(self, e)
    }

    /// `s` in the text form; nested blocks span lines, indented from column 0.
    pub fn stmt_text(&self, s: &Stmt) -> String {
        print::stmt_text(self, s)
    }
}

impl std::str::FromStr for Kernel {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Kernel, ParseError> {
        Kernel::from_text(s)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        print::kernel(self, f)
    }
}
