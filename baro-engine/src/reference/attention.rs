//! One decode step of a full (gated) attention layer in the reference: q (with its output
//! gate), k, v projections; zero-centred RMSNorm per head on q and k; partial NeoX RoPE; GQA
//! over the KV cache; output gate; `o_proj`. Never batches positions.
//!
//! ```text
//! [q_h | gate_h] = rows of W_q x per head;  q_h = rope(rmsnorm(q_h));  k_g = rope(rmsnorm(k_g))
//! s_t = ((0 + q·k_t[0]) + …) · head_dim^-1/2      over cached positions t, kv head g = h / (n_heads / n_kv)
//! p = softmax(s);  o[d] = (0 + p_0·v_0[d]) + …;  o[d] = o[d] · sigmoid(gate_h[d]);  out = W_o o
//! ```

use crate::model::ModelConfig;
use crate::reference::ops::{matvec, rms_norm, sigmoid, softmax};
use crate::reference::real::Real;
use crate::reference::state::KvCache;
use crate::reference::weights::{Matrix, RefError, Weights};

pub(crate) struct Attention<'a, T> {
    q: Matrix<'a>,      // (n_heads · [query | gate] · head_dim, hidden)
    k: Matrix<'a>,      // (n_kv_heads · head_dim, hidden)
    v: Matrix<'a>,      // (n_kv_heads · head_dim, hidden)
    output: Matrix<'a>, // (hidden, n_heads · head_dim)
    q_norm: Vec<T>,     // (head_dim), 1 + w
    k_norm: Vec<T>,     // (head_dim), 1 + w
    /// RoPE inverse frequencies 1 / theta^(2i / rope_dim).
    inv_freq: Vec<T>, // (rope_dim / 2)
}

impl<'a, T: Real> Attention<'a, T> {
    pub fn load(cfg: &ModelConfig, w: &mut Weights<'a>, layer: usize) -> Result<Self, RefError> {
        let b = |s: &str| format!("blk.{layer}.{s}");
        // As transformers' default rope init: exponent (2i) / rope_dim rounded, then pow, then 1 / ·.
        let theta = T::from_f64(cfg.rope_theta);
        let inv_freq = (0..cfg.rope_dim / 2)
            .map(|i| T::ONE / theta.powf(T::from_usize(2 * i) / T::from_usize(cfg.rope_dim)))
            .collect();
        Ok(Attention {
            q: w.take_matrix(&b("attn_q.weight"))?,
            k: w.take_matrix(&b("attn_k.weight"))?,
            v: w.take_matrix(&b("attn_v.weight"))?,
            output: w.take_matrix(&b("attn_output.weight"))?,
            q_norm: w.take_values(&b("attn_q_norm.weight"))?,
            k_norm: w.take_values(&b("attn_k_norm.weight"))?,
            inv_freq,
        })
    }

    /// Rotates the first `rope_dim` dims of one head in place: pairs (i, i + rope_dim/2);
    /// `x1' = x1·cos + (−x2)·sin`, `x2' = x2·cos + x1·sin`, with cos/sin of the angle
    /// `position · inv_freq[i]` (rounded once).
    fn rope(&self, head: &mut [T], position: usize) {
        let half = self.inv_freq.len();
        for (i, &f) in self.inv_freq.iter().enumerate() {
            let angle = T::from_usize(position) * f;
            let (cos, sin) = (angle.cos(), angle.sin());
            let (x1, x2) = (head[i], head[i + half]);
            head[i] = x1 * cos + (-x2) * sin;
            head[i + half] = x2 * cos + x1 * sin;
        }
    }

    /// `x` is the normed hidden state; appends this position's key and value to `cache`.
    pub fn step(&self, cfg: &ModelConfig, cache: &mut KvCache<T>, position: usize, x: &[T]) -> Vec<T> {
        let (nh, nkv, hd) = (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim);
        let eps = T::from_f32(cfg.rms_eps);
        let q_and_gate = matvec(&self.q, 0, self.q.rows, x);
        let k = matvec(&self.k, 0, self.k.rows, x);
        let v = matvec(&self.v, 0, self.v.rows, x);
        for head in 0..nkv {
            let mut kh = rms_norm(&k[head * hd..(head + 1) * hd], &self.k_norm, eps);
            self.rope(&mut kh, position);
            cache.keys.extend_from_slice(&kh);
        }
        cache.values.extend_from_slice(&v);
        let n_positions = position + 1;
        // scale = head_dim^-1/2 rounded once (transformers' Python-float `head_dim**-0.5`),
        // applied to the finished dot product.
        let scale = T::from_f64((hd as f64).powf(-0.5));
        let mut gated = Vec::with_capacity(nh * hd);
        for head in 0..nh {
            let base = head * 2 * hd;
            let mut q = rms_norm(&q_and_gate[base..base + hd], &self.q_norm, eps);
            self.rope(&mut q, position);
            let gate = &q_and_gate[base + hd..base + 2 * hd];
            let kv_head = head / (nh / nkv);
            let at = |t: usize| (t * nkv + kv_head) * hd;
            let scores: Vec<T> = (0..n_positions)
                .map(|t| {
                    let key = &cache.keys[at(t)..at(t) + hd];
                    q.iter().zip(key).fold(T::ZERO, |acc, (&a, &b)| acc + a * b) * scale
                })
                .collect();
            let p = softmax(&scores);
            for (d, &g) in gate.iter().enumerate() {
                let o = (0..n_positions).fold(T::ZERO, |acc, t| acc + p[t] * cache.values[at(t) + d]);
                gated.push(o * sigmoid(g));
            }
        }
        matvec(&self.output, 0, self.output.rows, &gated)
    }
}
