//! Chat templates: turns a conversation into the prompt text a model was trained on.
//!
//! Templates are Jinja (rendered by `minijinja` with Python string methods from
//! `minijinja-contrib` and Hugging Face's settings: `trim_blocks`, `lstrip_blocks`,
//! `raise_exception`), either the built-in Qwen3.5 one or a template string from the model's
//! metadata (GGUF `tokenizer.chat_template`, `chat_template` in tokenizer_config.json). The
//! template variables are `messages` (role, content, and when present `tool_calls`,
//! `tool_call_id`, `name`), `tools` (only with `render_with_tools`), `add_generation_prompt`,
//! `enable_thinking` (left undefined when not set, as Hugging Face does), `bos_token`,
//! `eos_token`; `tojson` writes JSON as Hugging Face's does (Python's separators). A template error (syntax, or `raise_exception` from the template) is a
//! `TokenizerError::Template`; rendering never panics, and a template cannot build a value that
//! holds itself (`chat_guard.rs`: the stack overflow that would follow is a template error).

use std::collections::BTreeMap;

use minijinja::{Environment, Error, ErrorKind, Value};
use serde::Serialize;

use crate::tokenizer::TokenizerError;
use crate::tokenizer::{chat_guard, guard};

/// The Qwen3.5 chat format: `<|im_start|>role\ncontent<|im_end|>\n` per message; earlier
/// assistant turns lose their `<think>…</think>` part; the generation prompt is
/// `<|im_start|>assistant\n`, followed by an empty think block when thinking is off. With
/// `tools`, a system turn lists them (`# Tools`, one JSON line each inside `<tools>`) and says
/// how to call them; an assistant's `tool_calls` are `<tool_call>` blocks with a JSON body, and
/// consecutive `tool` messages go back as `<tool_response>` blocks in one user turn.
pub const QWEN35_TEMPLATE: &str = r##"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" + (tool | tojson) }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- endif %}
{%- for message in messages %}
    {%- if tools and loop.first and message.role == "system" %}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
        {{- '<|im_start|>assistant\n' + content }}
        {%- for call in message.tool_calls or [] %}
            {%- set call = call.function if call.function is defined else call %}
            {%- if content or not loop.first %}{{- '\n' }}{%- endif %}
            {{- '<tool_call>\n{"name": "' + call.name + '", "arguments": ' + (call.arguments if call.arguments is string else call.arguments | tojson) + '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or messages[loop.index0 - 1].role != "tool" %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != "tool" %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"##;

/// One message of a conversation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
    /// An assistant's calls, each `{"type": "function", "function": {"name", "arguments"}}`
    /// with `arguments` an object (templates render it with `tojson`); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<serde_json::Value>,
    /// A tool message's call id and function name, when the client gave them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage { role: role.to_string(), content: content.to_string(), ..ChatMessage::default() }
    }
}

/// How to render: whether to open the assistant's turn, and whether the model should think.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatOptions {
    pub add_generation_prompt: bool,
    /// `None` leaves `enable_thinking` undefined (the template's default applies).
    pub enable_thinking: Option<bool>,
    pub bos_token: String,
    pub eos_token: String,
}

/// A parsed chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

const NAME: &str = "chat";

impl ChatTemplate {
    /// The built-in Qwen3.5 template.
    pub fn qwen35() -> ChatTemplate {
        match ChatTemplate::from_source(QWEN35_TEMPLATE) {
            Ok(t) => t,
            // A test renders the built-in template; it parses.
            Err(e) => unreachable!("the built-in qwen3.5 chat template does not parse: {e}"),
        }
    }

    /// Parses a template string (from model metadata).
    pub fn from_source(source: &str) -> Result<ChatTemplate, TokenizerError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_function("namespace", chat_guard::namespace);
        env.add_function(chat_guard::CHECK_FN, chat_guard::namespaces_ok);
        let instrumented = chat_guard::instrument(source);
        guard::guarded(|| env.add_template_owned(NAME, instrumented)).map_err(panicked)?.map_err(template_error)?;
        Ok(ChatTemplate { env })
    }

    /// Renders `messages` into prompt text.
    pub fn render(&self, messages: &[ChatMessage], options: &ChatOptions) -> Result<String, TokenizerError> {
        self.render_with_tools(messages, options, None)
    }

    /// Renders `messages` with the functions the model may call (`tools`, a list of
    /// `{"type": "function", "function": {...}}`; `None` leaves `tools` undefined).
    pub fn render_with_tools(
        &self,
        messages: &[ChatMessage],
        options: &ChatOptions,
        tools: Option<&serde_json::Value>,
    ) -> Result<String, TokenizerError> {
        let mut ctx: BTreeMap<&str, Value> = BTreeMap::new();
        if let Some(tools) = tools {
            ctx.insert("tools", Value::from_serialize(tools));
        }
        ctx.insert("messages", Value::from_serialize(messages));
        ctx.insert("add_generation_prompt", Value::from(options.add_generation_prompt));
        if let Some(thinking) = options.enable_thinking {
            ctx.insert("enable_thinking", Value::from(thinking));
        }
        ctx.insert("bos_token", Value::from(options.bos_token.as_str()));
        ctx.insert("eos_token", Value::from(options.eos_token.as_str()));
        let template = self.env.get_template(NAME).map_err(template_error)?;
        chat_guard::reset();
        let rendered =
            guard::guarded(|| template.render(ctx)).map_err(panicked).and_then(|r| r.map_err(template_error));
        chat_guard::reset();
        rendered
    }
}

/// Hugging Face's `tojson` (Python's `json.dumps`, `ensure_ascii=False`): `", "` between
/// items and `": "` after keys, as the model saw tool schemas and call arguments in training;
/// `indent` gives the indented form. minijinja's own filter writes compact JSON.
fn tojson(value: &Value, indent: Option<usize>) -> Result<Value, Error> {
    let json =
        serde_json::to_value(value).map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let mut out = Vec::new();
    let result = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let mut ser =
                serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(&pad));
            serde::Serialize::serialize(&json, &mut ser)
        }
        None => {
            let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
            serde::Serialize::serialize(&json, &mut ser)
        }
    };
    result.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(Value::from_safe_string(String::from_utf8_lossy(&out).into_owned()))
}

/// `json.dumps`'s default separators.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// minijinja panics on some templates (2.24: `''[::-1]`, a backwards slice of an empty string,
/// indexes past the end): a template error too.
fn panicked(message: String) -> TokenizerError {
    TokenizerError::Template { message: format!("the template engine panicked: {message}") }
}

fn template_error(e: Error) -> TokenizerError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    TokenizerError::Template { message }
}
