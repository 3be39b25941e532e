//! Splits IR text into tokens with their line and column.
//!
//! The lexer only cuts text; it never interprets numbers or names (the parser does, so that a
//! bad literal is reported with what was expected of it).

use super::ParseError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tok<'a> {
    /// `[A-Za-z_][A-Za-z0-9_]*`
    Ident(&'a str),
    /// A literal starting with a digit or `-digit`; its text is checked by the parser.
    Num(&'a str),
    Punct(&'static str),
    Eof,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Token<'a> {
    pub tok: Tok<'a>,
    pub line: u32,
    pub column: u32,
}

impl Tok<'_> {
    /// How the token reads in an error message.
    pub fn describe(self) -> String {
        match self {
            Tok::Ident(s) | Tok::Num(s) => format!("`{s}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

const PUNCTS: [&str; 14] = ["..", "{", "}", "(", ")", "[", "]", "<", ">", ",", ":", ";", "=", "&"];

/// Tokenizes `text`; the last token is always `Eof`.
pub(super) fn tokens(text: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let mut out = Vec::new();
    let (mut line, mut column) = (1u32, 1u32);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\n' {
            line = line.saturating_add(1);
            column = 1;
            rest = &rest[1..];
            continue;
        }
        if c.is_whitespace() {
            column = column.saturating_add(1);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest = &rest[end..];
            continue;
        }
        let (tok, len) = if c.is_ascii_alphabetic() || c == '_' {
            let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            (Tok::Ident(&rest[..len]), len)
        } else if c.is_ascii_digit() || (c == '-' && rest[1..].starts_with(|d: char| d.is_ascii_digit())) {
            let len = number_len(rest);
            (Tok::Num(&rest[..len]), len)
        } else if let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            (Tok::Punct(p), p.len())
        } else {
            return Err(ParseError { line, column, expected: "a token".to_string(), found: format!("`{c}`") });
        };
        out.push(Token { tok, line, column });
        // Every token is ASCII, so its byte length is its width in characters.
        column = column.saturating_add(len as u32);
        rest = &rest[len..];
    }
    out.push(Token { tok: Tok::Eof, line, column });
    Ok(out)
}

/// The byte length of the number literal at the start of `s` (`-1.5e-7`, `0x7fc00001`, `42`).
fn number_len(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = usize::from(b[0] == b'-');
    let hex = s[i..].starts_with("0x") || s[i..].starts_with("0X");
    while i < b.len() {
        let c = b[i];
        let exponent_sign = !hex && (c == b'-' || c == b'+') && i > 0 && matches!(b[i - 1], b'e' | b'E');
        let dot = c == b'.' && b.get(i + 1) != Some(&b'.');
        if c.is_ascii_alphanumeric() || c == b'_' || dot || exponent_sign {
            i += 1;
        } else {
            break;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok<'_>> {
        tokens(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_stop_at_ranges_and_type_suffixes() {
        assert_eq!(
            toks("0:usize..-1.5e-7:f32"),
            vec![
                Tok::Num("0"),
                Tok::Punct(":"),
                Tok::Ident("usize"),
                Tok::Punct(".."),
                Tok::Num("-1.5e-7"),
                Tok::Punct(":"),
                Tok::Ident("f32"),
                Tok::Eof
            ]
        );
        assert_eq!(toks("0x1e-5"), vec![Tok::Num("0x1e"), Tok::Num("-5"), Tok::Eof]);
    }

    #[test]
    fn positions_count_characters_and_skip_comments() {
        let t = tokens("// héllo\n  é").unwrap_err();
        assert_eq!((t.line, t.column), (2, 3));
        let t = tokens("a // x\n\tb").unwrap();
        assert_eq!((t[1].tok, t[1].line, t[1].column), (Tok::Ident("b"), 2, 2));
    }
}
