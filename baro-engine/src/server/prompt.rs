//! From a request's text to prompt token ids: a conversation through the model's chat template
//! (with the assistant's turn opened), or raw text as it is; special-token text such as
//! `<|im_start|>` is the special token, as the template writes it. Adds the model's bos when
//! its metadata asks for one. A template error is the client's (a 400 naming the field).

use crate::server::error::{ApiError, ErrorKind};
use crate::server::App;
use crate::tokenizer::{ChatMessage, ChatOptions, Specials, TokenId};

impl App {
    /// The prompt of a conversation.
    pub fn chat_prompt(&self, messages: &[ChatMessage], field: &str) -> Result<Vec<TokenId>, ApiError> {
        self.chat_prompt_with_tools(messages, None, field)
    }

    /// The prompt of a conversation with the functions the model may call (see `tools`).
    pub fn chat_prompt_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        field: &str,
    ) -> Result<Vec<TokenId>, ApiError> {
        if messages.is_empty() {
            return Err(ApiError::bad_param(field, "at least one message", "an empty list"));
        }
        let options = ChatOptions { add_generation_prompt: true, ..ChatOptions::default() };
        let text = self
            .ready()?
            .template
            .render_with_tools(messages, &options, tools)
            .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("{field}: {e}")))?;
        self.text_prompt(&text, field)
    }

    /// The prompt of raw text.
    pub fn text_prompt(&self, text: &str, field: &str) -> Result<Vec<TokenId>, ApiError> {
        let tokenizer = &self.ready()?.tokenizer;
        let mut ids = tokenizer
            .encode(text, Specials::With)
            .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("{field}: {e}")))?;
        let special = tokenizer.special_ids();
        if let (true, Some(bos)) = (special.add_bos, special.bos) {
            ids.insert(0, bos);
        }
        Ok(ids)
    }

    /// A token's text for logprobs: `token_id:N` when the client asked for ids (vLLM's
    /// `return_tokens_as_token_ids`), else its decoded text (special tokens included).
    pub fn token_text(&self, id: TokenId, as_id: bool) -> String {
        if as_id {
            return format!("token_id:{id}");
        }
        self.ready.get().and_then(|r| r.tokenizer.decode(&[id], Specials::With).ok()).unwrap_or_default()
    }
}
