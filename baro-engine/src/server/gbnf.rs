//! GBNF (llama.cpp's grammar format) to Lark (llguidance's), so the `grammar` field takes
//! either. A rule `name ::= expr` becomes `g_name: expr` on one line (`root` becomes `start`;
//! the prefix keeps GBNF's names, which may hold `-` or capitals, apart from Lark's), a
//! character class `[...]` becomes the regex `/[...]/`, `.` becomes `/(?s:.)/`; strings,
//! alternatives, groups and the repetition operators (`* + ? {m,n}`) read the same in both;
//! comments go. Only the text is rewritten: what the grammar means is llguidance's to check,
//! and an input that is not GBNF comes back as an error saying where.

/// Whether `text` looks like GBNF (a `::=` outside any string).
pub fn is_gbnf(text: &str) -> bool {
    text.contains("::=")
}

fn rule_name(name: &str) -> String {
    if name == "root" {
        return "start".to_string();
    }
    format!("g_{}", name.to_lowercase().replace('-', "_"))
}

/// The Lark form of a GBNF grammar.
pub fn to_lark(gbnf: &str) -> Result<String, String> {
    let chars: Vec<char> = gbnf.chars().collect();
    let mut rules: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    // Tokens of the current rule, and the identifier seen last (maybe the next rule's name).
    let mut pending_ident: Option<String> = None;
    let push = |rules: &mut Vec<(String, String)>, piece: String| -> Result<(), String> {
        let Some(rule) = rules.last_mut() else {
            return Err(format!("expected a rule (`name ::= ...`) first, found {piece:?}"));
        };
        if !rule.1.is_empty() {
            rule.1.push(' ');
        }
        rule.1.push_str(&piece);
        Ok(())
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            c if c.is_whitespace() => i += 1,
            ':' if chars[i..].starts_with(&[':', ':', '=']) => {
                let name = pending_ident
                    .take()
                    .ok_or_else(|| format!("at character {i}: expected a rule name before `::=`, found none"))?;
                rules.push((rule_name(&name), String::new()));
                i += 3;
            }
            _ => {
                if let Some(ident) = pending_ident.take() {
                    push(&mut rules, rule_name(&ident))?;
                }
                match c {
                    c if c.is_ascii_alphanumeric() || c == '_' || c == '-' => {
                        let start = i;
                        while i < chars.len()
                            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '-')
                        {
                            i += 1;
                        }
                        pending_ident = Some(chars[start..i].iter().collect());
                    }
                    '"' => {
                        let start = i;
                        i += 1;
                        while i < chars.len() && chars[i] != '"' {
                            i += if chars[i] == '\\' { 2 } else { 1 };
                        }
                        if i >= chars.len() {
                            return Err(format!("at character {start}: expected a closing `\"`, found the end"));
                        }
                        i += 1;
                        push(&mut rules, chars[start..i].iter().collect())?;
                    }
                    '[' => {
                        let start = i;
                        i += 1;
                        let mut class = String::from("[");
                        while i < chars.len() && chars[i] != ']' {
                            if chars[i] == '\\' && i + 1 < chars.len() {
                                class.push('\\');
                                class.push(chars[i + 1]);
                                i += 2;
                            } else {
                                if chars[i] == '/' {
                                    class.push('\\');
                                }
                                class.push(chars[i]);
                                i += 1;
                            }
                        }
                        if i >= chars.len() {
                            return Err(format!("at character {start}: expected a closing `]`, found the end"));
                        }
                        i += 1;
                        class.push(']');
                        push(&mut rules, format!("/{class}/"))?;
                    }
                    '.' => {
                        i += 1;
                        push(&mut rules, "/(?s:.)/".to_string())?;
                    }
                    '{' => {
                        let start = i;
                        while i < chars.len() && chars[i] != '}' {
                            i += 1;
                        }
                        i += 1;
                        let rep: String =
                            chars[start..i.min(chars.len())].iter().filter(|c| !c.is_whitespace()).collect();
                        // Attached to what it repeats.
                        match rules.last_mut() {
                            Some(rule) => rule.1.push_str(&rep),
                            None => return Err(format!("at character {start}: expected a rule before {rep:?}")),
                        }
                    }
                    '*' | '+' | '?' => {
                        i += 1;
                        match rules.last_mut() {
                            Some(rule) => rule.1.push(c),
                            None => return Err(format!("at character {i}: expected a rule before {c:?}")),
                        }
                    }
                    '|' | '(' | ')' => {
                        i += 1;
                        push(&mut rules, c.to_string())?;
                    }
                    other => return Err(format!("at character {i}: expected GBNF, found {other:?}")),
                }
            }
        }
    }
    if let Some(ident) = pending_ident.take() {
        push(&mut rules, rule_name(&ident))?;
    }
    if !rules.iter().any(|(name, _)| name == "start") {
        return Err("expected a `root ::= ...` rule, found none".to_string());
    }
    Ok(rules.into_iter().map(|(name, body)| format!("{name}: {body}\n")).collect())
}
