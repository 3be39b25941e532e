//! The reference `qwen35moe` text model: embedding, decoder layers
//! (`h = x + mixer(norm1(x)); out = h + moe(norm2(h))`), final norm, output head; decoding one
//! token at a time against a `DecodeState`. Plain Rust, single-threaded, generic over the float
//! it computes in; weights are read (and dequantized) row by row as they are used.

use crate::model::{LayerKind, ModelConfig};
use crate::reference::attention::Attention;
use crate::reference::gdn::Gdn;
use crate::reference::moe::{Moe, Routing};
use crate::reference::ops::{argmax, matvec, rms_norm};
use crate::reference::real::Real;
use crate::reference::state::{DecodeState, LayerState};
use crate::reference::weights::{Matrix, RefError, Weights};
use crate::tokenizer::TokenId;

enum Mixer<'a, T> {
    Attention(Attention<'a, T>),
    Gdn(Gdn<'a, T>),
}

struct Layer<'a, T> {
    attn_norm: Vec<T>, // (hidden), 1 + w
    post_norm: Vec<T>, // (hidden), 1 + w
    mixer: Mixer<'a, T>,
    moe: Moe<'a, T>,
}

/// A loaded reference model computing in `T`.
pub struct ReferenceModel<'a, T> {
    config: ModelConfig,
    embedding: Matrix<'a>, // (vocab, hidden)
    layers: Vec<Layer<'a, T>>,
    output_norm: Vec<T>,        // (hidden), 1 + w
    output: Option<Matrix<'a>>, // (vocab, hidden); None: tied to the embedding
}

impl<'a, T: Real> ReferenceModel<'a, T> {
    /// Builds the model from canonical weights (see `Weights::from_hf`, `Weights::from_gguf`).
    pub fn new(mut w: Weights<'a>) -> Result<Self, RefError> {
        let cfg = w.config.clone();
        let embedding = w.take_matrix("token_embd.weight")?;
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for (l, kind) in cfg.layer_kinds.iter().enumerate() {
            let b = |s: &str| format!("blk.{l}.{s}");
            let mixer = match kind {
                LayerKind::Attention => Mixer::Attention(Attention::load(&cfg, &mut w, l)?),
                LayerKind::Gdn => Mixer::Gdn(Gdn::load(&mut w, l)?),
            };
            layers.push(Layer {
                attn_norm: w.take_values(&b("attn_norm.weight"))?,
                post_norm: w.take_values(&b("post_attention_norm.weight"))?,
                mixer,
                moe: Moe::load(&mut w, l)?,
            });
        }
        let output_norm = w.take_values("output_norm.weight")?;
        let output = if cfg.tied_embeddings { None } else { Some(w.take_matrix("output.weight")?) };
        Ok(ReferenceModel { config: cfg, embedding, layers, output_norm, output })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// An empty decode state for this model.
    pub fn new_state(&self) -> DecodeState<T> {
        DecodeState::new(&self.config)
    }

    /// Feeds `token` at position `state.position`, advances the state, and returns the logits
    /// for the next token (vocab_size values).
    pub fn step(&self, state: &mut DecodeState<T>, token: TokenId) -> Result<Vec<T>, RefError> {
        self.step_traced(state, token, &mut |_, _| {})
    }

    /// `step`, reporting each layer's routing decision to `on_route(layer, routing)`.
    pub fn step_traced(
        &self,
        state: &mut DecodeState<T>,
        token: TokenId,
        on_route: &mut dyn FnMut(usize, &Routing<T>),
    ) -> Result<Vec<T>, RefError> {
        let cfg = &self.config;
        let t = token as usize;
        if t >= cfg.vocab_size {
            return Err(RefError::TokenOutOfRange { token: u64::from(token), vocab: cfg.vocab_size });
        }
        let eps = T::from_f32(cfg.rms_eps);
        let mut buf = Vec::new();
        let mut x: Vec<T> = self.embedding.row(t, &mut buf).iter().map(|&v| T::from_f32(v)).collect();
        if state.config != self.config {
            return Err(RefError::StateMismatch);
        }
        let position = state.position;
        for (l, (layer, layer_state)) in self.layers.iter().zip(state.layers.iter_mut()).enumerate() {
            let normed = rms_norm(&x, &layer.attn_norm, eps);
            let mixed = match (&layer.mixer, layer_state) {
                (Mixer::Attention(a), LayerState::Attention(cache)) => a.step(cfg, cache, position, &normed),
                (Mixer::Gdn(g), LayerState::Gdn(s)) => g.step(cfg, s, &normed),
                _ => return Err(RefError::StateMismatch),
            };
            let h: Vec<T> = x.iter().zip(mixed).map(|(&x, m)| x + m).collect();
            let normed = rms_norm(&h, &layer.post_norm, eps);
            let routing = layer.moe.route(cfg, &normed);
            on_route(l, &routing);
            let ffn = layer.moe.apply(cfg, &routing, &normed);
            x = h.iter().zip(ffn).map(|(&h, f)| h + f).collect();
        }
        state.position += 1;
        let normed = rms_norm(&x, &self.output_norm, eps);
        let head = self.output.as_ref().unwrap_or(&self.embedding);
        Ok(matvec(head, 0, cfg.vocab_size, &normed))
    }

    /// Feeds `prompt` token by token, then `n` greedy tokens (argmax, lowest id on ties).
    /// Returns the logits after every fed token (prompt.len() + n − 1 rows when n > 0, the
    /// last greedy token is not fed) and the greedy tokens.
    pub fn greedy(&self, prompt: &[TokenId], n: usize) -> Result<(Vec<Vec<T>>, Vec<TokenId>), RefError> {
        let mut state = self.new_state();
        let mut rows = Vec::new();
        for &t in prompt {
            rows.push(self.step(&mut state, t)?);
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let Some(last) = rows.last() else { break };
            let next = argmax(last) as TokenId;
            out.push(next);
            if i + 1 < n {
                rows.push(self.step(&mut state, next)?);
            }
        }
        Ok((rows, out))
    }
}
