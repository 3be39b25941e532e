//! Parses the text form (grammar in `text/mod.rs`) back into a `Kernel`.
//!
//! A recursive-descent parser over the lexer's tokens. It checks only what the text itself
//! says (syntax, literals, ids counting up, names matching their ids) and never panics: every
//! failure is a `ParseError` at the offending token, and nesting is bounded by `MAX_NESTING`.
//! Types, bounds and schedules are left to the verifier, so an ill-formed kernel reads back.

mod body;

use super::lex::{self, Tok, Token};
use super::{ParseError, MAX_NESTING};
use crate::ir::{
    Access, Buf, Kernel, Param, ParamId, ParamKind, ScalarType, SharedArray, SharedId, Sibling, Var, VarDecl,
};

type R<T> = Result<T, ParseError>;

pub(super) fn kernel(text: &str) -> R<Kernel> {
    let toks = lex::tokens(text)?;
    let mut p = Parser { toks, pos: 0, k: Kernel::new(""), depth: 0 };
    let k = p.kernel()?;
    if p.peek() != Tok::Eof {
        return p.fail("end of input after the kernel");
    }
    Ok(k)
}

/// One or more kernels, one after another (a file holding an m=1 kernel and its rows sibling).
pub(super) fn kernels(text: &str) -> R<Vec<Kernel>> {
    let toks = lex::tokens(text)?;
    let mut p = Parser { toks, pos: 0, k: Kernel::new(""), depth: 0 };
    let mut out = vec![p.kernel()?];
    while p.peek() != Tok::Eof {
        if p.peek() != Tok::Ident("kernel") {
            return p.fail("`kernel` or end of input");
        }
        out.push(p.kernel()?);
    }
    Ok(out)
}

/// The header sections in the order they must appear, and whether each may repeat.
const SECTIONS: [(&str, bool); 8] = [
    ("param", true),
    ("shared", true),
    ("var", true),
    ("grid", false),
    ("block", false),
    ("min_groups", false),
    ("sibling", false),
    ("verify", true),
];

struct Parser<'a> {
    toks: Vec<Token<'a>>,
    pos: usize,
    /// The kernel read so far: references check their `:name` against its declarations.
    k: Kernel,
    depth: u32,
}

impl<'a> Parser<'a> {
    fn kernel(&mut self) -> R<Kernel> {
        self.keyword("kernel")?;
        self.k.name = self.ident("a kernel name")?.to_string();
        self.punct("{")?;
        let mut stage = None;
        while let Tok::Ident(word) = self.peek() {
            let Some(i) = SECTIONS.iter().position(|(s, _)| *s == word) else { break };
            if stage.is_some_and(|s| i < s || (i == s && !SECTIONS[i].1)) {
                break;
            }
            stage = Some(i);
            self.bump();
            self.section(word)?;
        }
        if !self.eat_keyword("body") {
            let open =
                SECTIONS.iter().enumerate().filter(|(i, (_, rep))| stage.is_none_or(|s| *i > s || (*i == s && *rep)));
            let mut names: Vec<String> = open.map(|(_, (s, _))| format!("`{s}`")).collect();
            names.push("`body`".to_string());
            return self.fail(one_of(&names));
        }
        self.k.body = self.block()?;
        self.punct("}")?;
        Ok(std::mem::replace(&mut self.k, Kernel::new("")))
    }

    /// Reads the rest of one header line after its keyword.
    fn section(&mut self, word: &str) -> R<()> {
        match word {
            "param" => {
                self.declared_id('p', self.k.params.len(), "parameter")?;
                let name = self.ident("a parameter name")?.to_string();
                self.punct(":")?;
                let kind = if self.eat_punct("&") {
                    let access = if self.eat_keyword("mut") { Access::ReadWrite } else { Access::Read };
                    self.punct("[")?;
                    let elem = self.ty()?;
                    self.punct("]")?;
                    ParamKind::Buffer { elem, access }
                } else {
                    ParamKind::Scalar(self.ty()?)
                };
                self.k.params.push(Param { name, kind });
            }
            "shared" => {
                self.declared_id('s', self.k.shared.len(), "shared array")?;
                let name = self.ident("a shared array name")?.to_string();
                self.punct(":")?;
                self.punct("[")?;
                let elem = self.ty()?;
                self.punct(";")?;
                let len = self.int("a length (u32)")?;
                self.punct("]")?;
                self.k.shared.push(SharedArray { name, elem, len });
            }
            "var" => {
                self.declared_id('v', self.k.vars.len(), "variable")?;
                let name = self.ident("a variable name")?.to_string();
                self.punct(":")?;
                let mutable = self.eat_keyword("mut");
                let ty = self.ty()?;
                self.k.vars.push(VarDecl { name, ty, mutable });
            }
            "grid" => {
                self.punct("[")?;
                self.k.grid = self.list("]", Self::expr)?;
            }
            "block" => {
                self.k.block = Some(self.int("threads per workgroup (u32)")?);
            }
            "min_groups" => {
                self.k.min_groups = Some(self.int("workgroups per compute unit (u32)")?);
            }
            "sibling" => {
                self.keyword("of")?;
                let of = self.ident("the name of the m=1 kernel")?.to_string();
                self.keyword("rows")?;
                let rows = self.param_ref()?;
                self.keyword("strides")?;
                self.punct("[")?;
                let row_strides = self.list("]", |p| {
                    let buf = p.param_ref()?;
                    p.punct("=")?;
                    Ok((buf, p.expr()?))
                })?;
                let mut row_steps = Vec::new();
                if self.eat_keyword("steps") {
                    self.punct("[")?;
                    row_steps = self.list("]", |p| {
                        let scalar = p.param_ref()?;
                        p.punct("=")?;
                        Ok((scalar, p.expr()?))
                    })?;
                }
                let mut carried = Vec::new();
                if self.eat_keyword("carry") {
                    self.punct("[")?;
                    carried = self.list("]", Self::param_ref)?;
                }
                self.k.sibling = Some(Sibling { of, rows, row_strides, row_steps, carried });
            }
            _ => {
                let param = self.param_ref()?;
                self.keyword("in")?;
                self.punct("[")?;
                let values = self.list("]", |p| p.int("a value (u64)"))?;
                self.k.verify_shapes.values.push((param, values));
            }
        }
        Ok(())
    }

    fn var_ref(&mut self) -> R<Var> {
        let t = self.bump();
        self.var_from(t)
    }

    /// The variable that token `t` (already read) names, with its optional `:name`.
    fn var_from(&mut self, t: Token<'a>) -> R<Var> {
        match entity_id(word(t), 'v').filter(|_| matches!(t.tok, Tok::Ident(_))) {
            Some(Ok(id)) => self.named_ref(t, Var(id)),
            Some(Err(())) => self.fail_at(t, "a variable id below 2^32"),
            None => self.fail_at(t, "a variable (`v0`, `v1:name`, ...)"),
        }
    }

    fn param_ref(&mut self) -> R<ParamId> {
        let t = self.bump();
        self.param_from(t)
    }

    fn param_from(&mut self, t: Token<'a>) -> R<ParamId> {
        match entity_id(word(t), 'p').filter(|_| matches!(t.tok, Tok::Ident(_))) {
            Some(Ok(id)) => self.named_ref(t, ParamId(id)),
            Some(Err(())) => self.fail_at(t, "a parameter id below 2^32"),
            None => self.fail_at(t, "a parameter (`p0`, `p1:name`, ...)"),
        }
    }

    fn buf(&mut self) -> R<Buf> {
        let t = self.bump();
        let what = "a buffer (`p0:name` or `s0:name`)";
        let Tok::Ident(w) = t.tok else { return self.fail_at(t, what) };
        match (entity_id(w, 'p'), entity_id(w, 's')) {
            (Some(Ok(id)), _) => Ok(Buf::Param(self.named_ref(t, ParamId(id))?)),
            (_, Some(Ok(id))) => Ok(Buf::Shared(self.named_ref(t, SharedId(id))?)),
            (Some(Err(())), _) | (_, Some(Err(()))) => self.fail_at(t, "an id below 2^32"),
            (None, None) => self.fail_at(t, what),
        }
    }

    /// Reads the optional `:name` after the id in token `t` and checks it against the kernel.
    fn named_ref<E: Entity>(&mut self, t: Token<'a>, id: E) -> R<E> {
        if !self.eat_punct(":") {
            return Ok(id);
        }
        let name_tok = self.bump();
        let Tok::Ident(name) = name_tok.tok else { return self.fail_at(name_tok, "a name after `:`") };
        match id.declared_name(&self.k) {
            Some(declared) if declared == name => Ok(id),
            Some(declared) => {
                let expected = format!("`{declared}` (the name of {id})");
                self.fail_at(name_tok, expected)
            }
            None => self.fail_at(t, format!("{id} to be declared before use")),
        }
    }

    fn declared_id(&mut self, prefix: char, next: usize, what: &str) -> R<()> {
        let t = self.bump();
        match t.tok {
            Tok::Ident(w) if entity_id(w, prefix) == Some(Ok(next as u32)) => Ok(()),
            _ => self.fail_at(t, format!("`{prefix}{next}` (the next {what} id)")),
        }
    }

    fn ty(&mut self) -> R<ScalarType> {
        let t = self.bump();
        match t.tok {
            Tok::Ident(w) => ScalarType::from_name(w),
            _ => None,
        }
        .map_or_else(|| self.fail_at(t, "a type (bool, i8, u8, i32, u32, i64, u64, usize, f16, bf16 or f32)"), Ok)
    }

    fn int<T: std::str::FromStr>(&mut self, what: &str) -> R<T> {
        let t = self.bump();
        match t.tok {
            Tok::Num(s) => s.parse().or_else(|_| self.fail_at(t, what)),
            _ => self.fail_at(t, what),
        }
    }

    fn ident(&mut self, what: &str) -> R<&'a str> {
        let t = self.bump();
        match t.tok {
            Tok::Ident(w) => Ok(w),
            _ => self.fail_at(t, what),
        }
    }

    /// Items separated by `,` up to `close` (the opening bracket is already read).
    fn list<T>(&mut self, close: &'static str, mut item: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        let mut out = Vec::new();
        if self.eat_punct(close) {
            return Ok(out);
        }
        loop {
            out.push(item(self)?);
            if self.eat_punct(close) {
                return Ok(out);
            }
            if !self.eat_punct(",") {
                return self.fail(format!("`,` or `{close}`"));
            }
        }
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return self.fail(format!("at most {MAX_NESTING} levels of nesting"));
        }
        Ok(())
    }

    fn peek(&self) -> Tok<'a> {
        self.toks[self.pos].tok
    }

    /// The current token; the position stays on `Eof` once there.
    fn bump(&mut self) -> Token<'a> {
        let t = self.toks[self.pos];
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let hit = matches!(self.peek(), Tok::Punct(q) if q == p);
        if hit {
            self.bump();
        }
        hit
    }

    fn eat_keyword(&mut self, word: &str) -> bool {
        let hit = matches!(self.peek(), Tok::Ident(w) if w == word);
        if hit {
            self.bump();
        }
        hit
    }

    fn punct(&mut self, p: &str) -> R<()> {
        if self.eat_punct(p) {
            return Ok(());
        }
        self.fail(format!("`{p}`"))
    }

    fn keyword(&mut self, word: &str) -> R<()> {
        if self.eat_keyword(word) {
            return Ok(());
        }
        self.fail(format!("`{word}`"))
    }

    /// An error at the current (not yet read) token.
    fn fail<T>(&self, expected: impl Into<String>) -> R<T> {
        self.fail_at(self.toks[self.pos], expected)
    }

    fn fail_at<T>(&self, t: Token<'_>, expected: impl Into<String>) -> R<T> {
        Err(ParseError { line: t.line, column: t.column, expected: expected.into(), found: t.tok.describe() })
    }
}

/// `Some(Ok(n))` for `{prefix}{n}`, `Some(Err)` if the digits overflow u32, `None` otherwise.
fn entity_id(word: &str, prefix: char) -> Option<Result<u32, ()>> {
    let digits = word.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().map_err(|_| ()))
}

/// The text of an identifier or number token ("" for others).
fn word<'a>(t: Token<'a>) -> &'a str {
    match t.tok {
        Tok::Ident(w) | Tok::Num(w) => w,
        Tok::Punct(_) | Tok::Eof => "",
    }
}

/// "`a`, `b` or `c`"
fn one_of(items: &[String]) -> String {
    match items.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Something a reference names by id; `declared_name` is `None` when it is not declared.
trait Entity: Copy + std::fmt::Display {
    fn declared_name(self, k: &Kernel) -> Option<&str>;
}

impl Entity for Var {
    fn declared_name(self, k: &Kernel) -> Option<&str> {
        k.vars.get(self.index()).map(|d| d.name.as_str())
    }
}

impl Entity for ParamId {
    fn declared_name(self, k: &Kernel) -> Option<&str> {
        k.params.get(self.index()).map(|d| d.name.as_str())
    }
}

impl Entity for SharedId {
    fn declared_name(self, k: &Kernel) -> Option<&str> {
        k.shared.get(self.index()).map(|d| d.name.as_str())
    }
}
