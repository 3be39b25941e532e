//! The mixture-of-experts block of the reference: router softmax over all experts, top-k
//! (lower expert id first among equal probabilities), renormalised; routed SwiGLU experts
//! weighted and summed in top-k order; the sigmoid-gated shared expert added last.
//!
//! ```text
//! p = softmax(W_router x);  top = top_k(p);  r_j = p[top_j] / ((0 + p[top_0]) + …)
//! y = ((0 + down_e0(h_e0)·r_0) + down_e1(h_e1)·r_1) + …,  h_e = silu(gate_e x) · (up_e x)
//! out = y + sigmoid(w_sg · x) · down_s(silu(gate_s x) · (up_s x))
//! ```
//! transformers adds the routed experts in ascending expert id (`index_add_` per expert hit);
//! top-k order is what the engine does, and the two differ only by rounding.

use crate::model::ModelConfig;
use crate::reference::ops::{matvec, sigmoid, silu, softmax, top_k};
use crate::reference::real::Real;
use crate::reference::weights::{Matrix, RefError, Weights};

pub(crate) struct Moe<'a, T> {
    router: Matrix<'a>,     // (n_experts, hidden)
    shared_gate: Vec<T>,    // (hidden)
    gate_exps: Matrix<'a>,  // (n_experts, expert_ffn_dim, hidden)
    up_exps: Matrix<'a>,    // (n_experts, expert_ffn_dim, hidden)
    down_exps: Matrix<'a>,  // (n_experts, hidden, expert_ffn_dim)
    gate_shexp: Matrix<'a>, // (shared_ffn_dim, hidden)
    up_shexp: Matrix<'a>,   // (shared_ffn_dim, hidden)
    down_shexp: Matrix<'a>, // (hidden, shared_ffn_dim)
}

/// The routing decision for one token.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing<T> {
    /// Experts in top-k order.
    pub experts: Vec<usize>,
    /// Their renormalised weights.
    pub weights: Vec<T>,
}

impl<'a, T: Real> Moe<'a, T> {
    pub fn load(w: &mut Weights<'a>, layer: usize) -> Result<Self, RefError> {
        let b = |s: &str| format!("blk.{layer}.{s}");
        Ok(Moe {
            router: w.take_matrix(&b("ffn_gate_inp.weight"))?,
            shared_gate: w.take_values(&b("ffn_gate_inp_shexp.weight"))?,
            gate_exps: w.take_matrix(&b("ffn_gate_exps.weight"))?,
            up_exps: w.take_matrix(&b("ffn_up_exps.weight"))?,
            down_exps: w.take_matrix(&b("ffn_down_exps.weight"))?,
            gate_shexp: w.take_matrix(&b("ffn_gate_shexp.weight"))?,
            up_shexp: w.take_matrix(&b("ffn_up_shexp.weight"))?,
            down_shexp: w.take_matrix(&b("ffn_down_shexp.weight"))?,
        })
    }

    pub fn route(&self, cfg: &ModelConfig, x: &[T]) -> Routing<T> {
        let p = softmax(&matvec(&self.router, 0, cfg.n_experts, x));
        let experts = top_k(&p, cfg.n_experts_used);
        let sum = experts.iter().fold(T::ZERO, |acc, &e| acc + p[e]);
        let weights = experts.iter().map(|&e| p[e] / sum).collect();
        Routing { experts, weights }
    }

    /// `x` is the normed hidden state, `routing` what `route` chose for it.
    pub fn apply(&self, cfg: &ModelConfig, routing: &Routing<T>, x: &[T]) -> Vec<T> {
        let (h, fi) = (cfg.hidden_dim, cfg.expert_ffn_dim);
        let mut y = vec![T::ZERO; h];
        for (&e, &r) in routing.experts.iter().zip(&routing.weights) {
            let out = swiglu(&self.gate_exps, &self.up_exps, &self.down_exps, e * fi, fi, e * h, h, x);
            for (acc, o) in y.iter_mut().zip(out) {
                *acc = *acc + o * r;
            }
        }
        let fs = cfg.shared_ffn_dim;
        let shared = swiglu(&self.gate_shexp, &self.up_shexp, &self.down_shexp, 0, fs, 0, h, x);
        let g = sigmoid(self.shared_gate.iter().zip(x).fold(T::ZERO, |acc, (&w, &x)| acc + w * x));
        y.iter().zip(shared).map(|(&y, s)| y + g * s).collect()
    }
}

/// `down(silu(gate x) · (up x))` over rows `ffn_row..+ffn_len` of gate/up and
/// `out_row..+out_len` of down.
#[allow(clippy::too_many_arguments)]
fn swiglu<T: Real>(
    gate: &Matrix<'_>,
    up: &Matrix<'_>,
    down: &Matrix<'_>,
    ffn_row: usize,
    ffn_len: usize,
    out_row: usize,
    out_len: usize,
    x: &[T],
) -> Vec<T> {
    let g = matvec(gate, ffn_row, ffn_len, x);
    let u = matvec(up, ffn_row, ffn_len, x);
    let hidden: Vec<T> = g.into_iter().zip(u).map(|(g, u)| silu(g) * u).collect();
    matvec(down, out_row, out_len, &hidden)
}
