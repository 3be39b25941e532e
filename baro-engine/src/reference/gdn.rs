//! One decode step of a gated delta net layer in the reference, in the canonical (GGUF) layout:
//! channels q | k | v with the value heads tiled, so value head p reads key head p % n_key.
//!
//! ```text
//! qkv = W_qkv x;  z = W_z x;  b = W_beta x;  a = W_alpha x
//! c[ch] = silu(((0 + w[ch,0]·x[t−K+1]) + …) + w[ch,K−1]·x[t])     causal conv over the ring
//! q_h = l2norm(q_h) / sqrt(d_k);  k_h = l2norm(k_h)                per key head
//! beta = sigmoid(b);  g = ssm_a · softplus(a + dt_bias);  ssm_a = −exp(A_log)   per value head
//! S = S · exp(g);  kv[j] = Σ_i S[i,j]·k[i];  delta = (v − kv)·beta;  S[i,j] = S[i,j] + k[i]·delta[j]
//! o[j] = Σ_i S[i,j]·q[i];  o = gated_rmsnorm(o, z);  out = W_out o
//! ```
//! (transformers' recurrent decode, `torch_recurrent_gated_delta_rule`; never the chunked
//! prefill).

use crate::model::ModelConfig;
use crate::reference::ops::{gated_rms_norm, l2_norm, matvec, sigmoid, silu, softplus};
use crate::reference::real::Real;
use crate::reference::state::GdnState;
use crate::reference::weights::{Matrix, RefError, Weights};

pub(crate) struct Gdn<'a, T> {
    qkv: Matrix<'a>,   // (conv_dim, hidden)
    z: Matrix<'a>,     // (n_value_heads · value_dim, hidden)
    beta: Matrix<'a>,  // (n_value_heads, hidden)
    alpha: Matrix<'a>, // (n_value_heads, hidden)
    ssm_a: Vec<T>,     // (n_value_heads), −exp(A_log)
    dt_bias: Vec<T>,   // (n_value_heads)
    conv: Vec<T>,      // (conv_dim, conv_kernel)
    norm: Vec<T>,      // (value_dim), plain weight
    out: Matrix<'a>,   // (hidden, n_value_heads · value_dim)
}

impl<'a, T: Real> Gdn<'a, T> {
    pub fn load(w: &mut Weights<'a>, layer: usize) -> Result<Self, RefError> {
        let b = |s: &str| format!("blk.{layer}.{s}");
        Ok(Gdn {
            qkv: w.take_matrix(&b("attn_qkv.weight"))?,
            z: w.take_matrix(&b("attn_gate.weight"))?,
            beta: w.take_matrix(&b("ssm_beta.weight"))?,
            alpha: w.take_matrix(&b("ssm_alpha.weight"))?,
            ssm_a: w.take_values(&b("ssm_a"))?,
            dt_bias: w.take_values(&b("ssm_dt.bias"))?,
            conv: w.take_values(&b("ssm_conv1d.weight"))?,
            norm: w.take_values(&b("ssm_norm.weight"))?,
            out: w.take_matrix(&b("ssm_out.weight"))?,
        })
    }

    /// `x` is the normed hidden state; advances the conv ring and the delta-rule state.
    pub fn step(&self, cfg: &ModelConfig, state: &mut GdnState<T>, x: &[T]) -> Vec<T> {
        let (nk, nv, dk, dv) = (cfg.gdn_n_key_heads, cfg.gdn_n_value_heads, cfg.gdn_key_dim, cfg.gdn_value_dim);
        let (channels, taps) = (cfg.gdn_conv_dim(), cfg.conv_kernel);
        let eps = T::from_f32(cfg.rms_eps);
        let qkv = matvec(&self.qkv, 0, channels, x);
        let z = matvec(&self.z, 0, nv * dv, x);
        let b = matvec(&self.beta, 0, nv, x);
        let a = matvec(&self.alpha, 0, nv, x);

        let slots = taps - 1;
        let conv: Vec<T> = (0..channels)
            .map(|ch| {
                let w = &self.conv[ch * taps..(ch + 1) * taps];
                let past = (0..slots)
                    .fold(T::ZERO, |acc, j| acc + w[j] * state.conv[((state.conv_oldest + j) % slots) * channels + ch]);
                silu(past + w[slots] * qkv[ch])
            })
            .collect();
        if slots > 0 {
            state.conv[state.conv_oldest * channels..(state.conv_oldest + 1) * channels].copy_from_slice(&qkv);
            state.conv_oldest = (state.conv_oldest + 1) % slots;
        }

        let l2_eps = T::from_f64(1e-6);
        let q_scale = T::from_f64((dk as f64).sqrt());
        let key_head = |base: usize, h: usize| &conv[base + h * dk..base + (h + 1) * dk];
        let q: Vec<Vec<T>> =
            (0..nk).map(|h| l2_norm(key_head(0, h), l2_eps).into_iter().map(|v| v / q_scale).collect()).collect();
        let k: Vec<Vec<T>> = (0..nk).map(|h| l2_norm(key_head(nk * dk, h), l2_eps)).collect();
        let v_all = &conv[2 * nk * dk..];

        let mut normed = Vec::with_capacity(nv * dv);
        for p in 0..nv {
            let (q, k) = (&q[p % nk], &k[p % nk]);
            let v = &v_all[p * dv..(p + 1) * dv];
            let beta = sigmoid(b[p]);
            let decay = (self.ssm_a[p] * softplus(a[p] + self.dt_bias[p])).exp();
            let s = &mut state.s[p * dk * dv..(p + 1) * dk * dv]; // (key_dim, value_dim)
            for e in s.iter_mut() {
                *e = *e * decay;
            }
            let delta: Vec<T> = (0..dv)
                .map(|j| {
                    let kv = (0..dk).fold(T::ZERO, |acc, i| acc + s[i * dv + j] * k[i]);
                    (v[j] - kv) * beta
                })
                .collect();
            for i in 0..dk {
                for j in 0..dv {
                    s[i * dv + j] = s[i * dv + j] + k[i] * delta[j];
                }
            }
            let o: Vec<T> = (0..dv).map(|j| (0..dk).fold(T::ZERO, |acc, i| acc + s[i * dv + j] * q[i])).collect();
            normed.extend(gated_rms_norm(&o, &z[p * dv..(p + 1) * dv], &self.norm, eps));
        }
        matvec(&self.out, 0, self.out.rows, &normed)
    }
}
