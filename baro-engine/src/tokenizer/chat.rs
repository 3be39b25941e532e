//! Chat templates: turns a conversation into the prompt text a model was trained on.
//!
//! Templates are Jinja (rendered by `minijinja` with Python string methods from
//! `minijinja-contrib` and Hugging Face's settings: `trim_blocks`, `lstrip_blocks`,
//! `raise_exception`), either the built-in Qwen3.5 one or a template string from the model's
//! metadata (GGUF `tokenizer.chat_template`, `chat_template` in tokenizer_config.json). The
//! template variables are `messages` (role, content), `add_generation_prompt`,
//! `enable_thinking` (left undefined when not set, as Hugging Face does), `bos_token`,
//! `eos_token`. A template error (syntax, or `raise_exception` from the template) is a
//! `TokenizerError::Template`; rendering never panics.

use std::collections::BTreeMap;

use minijinja::{Environment, Error, ErrorKind, Value};
use serde::Serialize;

use crate::tokenizer::TokenizerError;

/// The Qwen3.5 chat format: `<|im_start|>role\ncontent<|im_end|>\n` per message; earlier
/// assistant turns lose their `<think>…</think>` part; the generation prompt is
/// `<|im_start|>assistant\n`, followed by an empty think block when thinking is off.
pub const QWEN35_TEMPLATE: &str = r#"{%- for message in messages %}
    {%- if message.role == "assistant" %}
        {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
        {{- '<|im_start|>assistant\n' + content + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"#;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage { role: role.to_string(), content: content.to_string() }
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
        env.add_template_owned(NAME, source.to_string()).map_err(template_error)?;
        Ok(ChatTemplate { env })
    }

    /// Renders `messages` into prompt text.
    pub fn render(&self, messages: &[ChatMessage], options: &ChatOptions) -> Result<String, TokenizerError> {
        let mut ctx: BTreeMap<&str, Value> = BTreeMap::new();
        ctx.insert("messages", Value::from_serialize(messages));
        ctx.insert("add_generation_prompt", Value::from(options.add_generation_prompt));
        if let Some(thinking) = options.enable_thinking {
            ctx.insert("enable_thinking", Value::from(thinking));
        }
        ctx.insert("bos_token", Value::from(options.bos_token.as_str()));
        ctx.insert("eos_token", Value::from(options.eos_token.as_str()));
        let template = self.env.get_template(NAME).map_err(template_error)?;
        template.render(ctx).map_err(template_error)
    }
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
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
