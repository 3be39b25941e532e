//! Tool calls: the tools a request offers (OpenAI's and Ollama's `tools`, the same JSON), the
//! choice it makes (`tool_choice`: none, auto, required, or one named function), and the
//! parsing of the model's output into calls.
//!
//! The tools go to the model through its chat template (`tools`); the model answers with
//! Qwen's `<tool_call>` blocks, whose body is either JSON (`{"name": ..., "arguments": {...}}`,
//! the Qwen3 / Hermes form the built-in template teaches) or the XML form of Qwen3-Coder and
//! Qwen3.5 templates (`<function=NAME>` then `<parameter=KEY>\nVALUE\n</parameter>` per
//! argument); both are parsed. `ToolParser` splits a stream of text into content and complete
//! calls, holding back only what may be the start of a `<tool_call>` marker, so content
//! streams as it comes and each call goes out as one delta when its block closes. With
//! `required` or a named function the output is constrained (`constraint_grammar`): one
//! `<tool_call>` block whose JSON body names an offered function and whose arguments match
//! that function's parameter schema. Never decides an API's wire shape: the routes do.

use serde_json::{json, Value};

use crate::server::body::kind_of;
use crate::server::error::ApiError;

pub const OPEN: &str = "<tool_call>";
pub const CLOSE: &str = "</tool_call>";

/// One offered function.
#[derive(Clone, Debug)]
pub struct Tool {
    pub name: String,
    /// Its parameters' JSON schema (`{"type": "object"}` when none was given).
    pub parameters: Value,
}

/// What the request allows or requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// No tools offered, or `tool_choice: none`: the template gets none, nothing is parsed.
    None,
    /// The model may call one (the default with tools).
    Auto,
    /// The model must call one of the offered tools.
    Required,
    /// The model must call this one.
    Named(String),
}

/// The tools of a request, checked: each `{"type": "function", "function": {"name", ...}}`.
/// Returns them with the JSON the template renders (the request's own objects).
pub fn parse_tools(tools: Option<Value>, field: &str) -> Result<(Vec<Tool>, Option<Value>), ApiError> {
    let list = match tools {
        None | Some(Value::Null) => return Ok((Vec::new(), None)),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(ApiError::bad_param(field, "a list of tools", kind_of(&other))),
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let f = t.get("function").filter(|f| f.is_object()).ok_or_else(|| {
            ApiError::bad_param(
                &format!("{field}[{i}]"),
                "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                kind_of(t),
            )
        })?;
        let name =
            f.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(|| {
                ApiError::bad_param(&format!("{field}[{i}].function.name"), "a function name", "none")
            })?;
        let parameters = f.get("parameters").cloned().unwrap_or_else(|| json!({ "type": "object" }));
        out.push(Tool { name: name.to_string(), parameters });
    }
    if out.is_empty() {
        return Ok((out, None));
    }
    Ok((out, Some(Value::Array(list))))
}

/// OpenAI's `tool_choice`: `"none"`, `"auto"`, `"required"` or `{"type": "function",
/// "function": {"name": ...}}` naming an offered tool. Without tools only none/auto pass.
pub fn parse_choice(choice: Option<Value>, tools: &[Tool]) -> Result<Choice, ApiError> {
    let field = "tool_choice";
    let choice = match choice {
        None | Some(Value::Null) => return Ok(if tools.is_empty() { Choice::None } else { Choice::Auto }),
        Some(Value::String(s)) => match s.as_str() {
            "none" => Choice::None,
            "auto" => Choice::Auto,
            "required" => Choice::Required,
            other => {
                return Err(ApiError::bad_param(
                    field,
                    "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    format!("{other:?}"),
                ))
            }
        },
        Some(v @ Value::Object(_)) => match v.get("function").and_then(|f| f.get("name")).and_then(Value::as_str) {
            Some(name) => Choice::Named(name.to_string()),
            None => {
                return Err(ApiError::bad_param(
                    field,
                    "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                    "an object without a function name",
                ))
            }
        },
        Some(other) => return Err(ApiError::bad_param(field, "a string or an object", kind_of(&other))),
    };
    match &choice {
        Choice::Required if tools.is_empty() => {
            Err(ApiError::bad_param(field, "tools to choose from (`tools`)", "\"required\" without tools"))
        }
        Choice::Named(name) if !tools.iter().any(|t| &t.name == name) => {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            Err(ApiError::bad_param(field, format!("one of the offered functions {names:?}"), format!("{name:?}")))
        }
        Choice::Auto if tools.is_empty() => Ok(Choice::None),
        _ => Ok(choice),
    }
}

/// The Lark grammar of one `<tool_call>` block calling one of `tools` (all offered for
/// `Required`, the named one for `Named`); `None` for `None`/`Auto`. `open`/`close` are the
/// marker tokens' ids when the vocabulary has them as single tokens.
pub fn constraint_grammar(choice: &Choice, tools: &[Tool], open: Option<u32>, close: Option<u32>) -> Option<String> {
    let chosen: Vec<&Tool> = match choice {
        Choice::None | Choice::Auto => return None,
        Choice::Required => tools.iter().collect(),
        Choice::Named(name) => tools.iter().filter(|t| &t.name == name).collect(),
    };
    let calls: Vec<Value> = chosen
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": { "name": { "const": t.name }, "arguments": t.parameters },
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let mut schema = if calls.len() == 1 { calls[0].clone() } else { json!({ "anyOf": calls }) };
    // No free whitespace: the call is written as the template shows it.
    schema["x-guidance"] = json!({ "whitespace_flexible": false, "item_separator": ", ", "key_separator": ": " });
    let marker = |id: Option<u32>, text: &str| id.map_or_else(|| format!("{text:?}"), |id| format!("<[{id}]>"));
    Some(format!(
        "start: {} \"\\n\" call \"\\n\" {}\ncall: %json {}\n",
        marker(open, OPEN),
        marker(close, CLOSE),
        schema
    ))
}

/// An incoming message's `tool_calls` (OpenAI's, `arguments` a JSON string; Ollama's, an
/// object) in the form templates read: `{"type": "function", "function": {"name",
/// "arguments": {...}}}`, plus the `id` when given.
pub fn message_calls(calls: Option<Value>, field: &str) -> Result<Vec<Value>, ApiError> {
    let list = match calls {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(ApiError::bad_param(field, "a list of tool calls", kind_of(&other))),
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, c) in list.into_iter().enumerate() {
        let at = format!("{field}[{i}].function");
        let f = c.get("function").ok_or_else(|| ApiError::bad_param(&at, "{\"name\", \"arguments\"}", "none"))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad_param(&format!("{at}.name"), "a function name", "none"))?;
        let arguments = match f.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(Value::String(s)) => serde_json::from_str(s).map_err(|e| {
                ApiError::bad_param(&format!("{at}.arguments"), "a JSON object (as a string)", format!("{s:?} ({e})"))
            })?,
            Some(a) => a.clone(),
        };
        let mut call = json!({ "type": "function", "function": { "name": name, "arguments": arguments } });
        if let Some(id) = c.get("id") {
            call["id"] = id.clone();
        }
        out.push(call);
    }
    Ok(out)
}

/// A parsed call.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub name: String,
    /// The arguments as an object.
    pub arguments: Value,
}

/// What a piece of output holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Content(String),
    Call(Call),
}

/// Splits streamed text into content and tool calls.
#[derive(Default)]
pub struct ToolParser {
    buf: String,
    in_call: bool,
    /// Calls parsed so far.
    pub calls: usize,
}

impl ToolParser {
    /// Takes the next piece of text; returns what is now known.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        loop {
            if !self.in_call {
                match self.buf.find(OPEN) {
                    Some(at) => {
                        let content: String = self.buf.drain(..at + OPEN.len()).take(at).collect();
                        push_content(&mut out, content);
                        self.in_call = true;
                    }
                    None => {
                        // Keep a suffix that may begin the marker.
                        let keep = (1..OPEN.len())
                            .rev()
                            .find(|&n| {
                                self.buf.len() >= n
                                    && self.buf.is_char_boundary(self.buf.len() - n)
                                    && OPEN.starts_with(&self.buf[self.buf.len() - n..])
                            })
                            .unwrap_or(0);
                        let content = self.buf.drain(..self.buf.len() - keep).collect();
                        push_content(&mut out, content);
                        return out;
                    }
                }
            } else {
                let Some(at) = self.buf.find(CLOSE) else { return out };
                let body: String = self.buf.drain(..at + CLOSE.len()).take(at).collect();
                self.in_call = false;
                // Not a call after all: shown as the text it was.
                self.push_call(&mut out, &body, format!("{OPEN}{body}{CLOSE}"));
            }
        }
    }

    /// `body` parsed as a call and counted, or `text` as content where it is not one.
    fn push_call(&mut self, out: &mut Vec<Piece>, body: &str, text: String) {
        match parse_call(body) {
            Some(call) => {
                self.calls += 1;
                out.push(Piece::Call(call));
            }
            None => push_content(out, text),
        }
    }

    /// The end of the output: whatever is held back, as content (an unclosed call is
    /// parsed if its body is complete, else shown as text).
    pub fn finish(&mut self) -> Vec<Piece> {
        let rest = std::mem::take(&mut self.buf);
        let mut out = Vec::new();
        if self.in_call {
            self.in_call = false;
            self.push_call(&mut out, &rest, format!("{OPEN}{rest}"));
        } else {
            push_content(&mut out, rest);
        }
        out
    }
}

fn push_content(out: &mut Vec<Piece>, text: String) {
    if !text.is_empty() {
        out.push(Piece::Content(text));
    }
}

/// A call body: JSON `{"name", "arguments"}` (arguments an object or a JSON string of one),
/// or the XML form `<function=NAME>` with `<parameter=KEY>` blocks.
pub fn parse_call(body: &str) -> Option<Call> {
    let body = body.trim();
    if body.starts_with('{') {
        let v: Value = serde_json::from_str(body).ok()?;
        let name = v.get("name")?.as_str()?.to_string();
        let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
            None | Some(Value::Null) => json!({}),
            Some(Value::String(s)) => serde_json::from_str(s).ok().filter(Value::is_object)?,
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => return None,
        };
        return Some(Call { name, arguments });
    }
    let rest = body.strip_prefix("<function=")?;
    let (name, mut rest) = rest.split_once('>')?;
    let mut arguments = serde_json::Map::new();
    loop {
        rest = rest.trim_start();
        if rest.starts_with("</function>") || rest.is_empty() {
            break;
        }
        let after = rest.strip_prefix("<parameter=")?;
        let (key, after) = after.split_once('>')?;
        let (value, after) = after.split_once("</parameter>")?;
        let value = value.strip_prefix('\n').unwrap_or(value);
        let value = value.strip_suffix('\n').unwrap_or(value);
        // A value that reads as JSON (a number, an object) is that value; anything else text.
        let parsed = serde_json::from_str::<Value>(value)
            .ok()
            .filter(|v| !v.is_string())
            .unwrap_or_else(|| Value::String(value.to_string()));
        arguments.insert(key.trim().to_string(), parsed);
        rest = after;
    }
    Some(Call { name: name.trim().to_string(), arguments: Value::Object(arguments) })
}
