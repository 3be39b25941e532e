//! The settings a `Model` is built with (`EngineOptions`) and the activation precision of its
//! quantized matvecs (`Precision`). Plain data: nothing here touches a device.

/// The settings a `Model` is built with (`Model::new`, `Engine::new`).
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Positions the KV cache holds (capped by the model's context length when it has one).
    pub max_ctx: usize,
    /// Device bytes to plan against; `None`: the device's free memory (the host: no limit).
    pub vram_budget: Option<u64>,
    /// Decode expert slots per layer in staged mode (at least top-k; capped at the expert
    /// count and at what the budget holds).
    pub expert_slots: usize,
    /// What the quantized matvecs multiply the weights with.
    pub precision: Precision,
    /// Replay each resident decode step (`step`, `step_greedy`) as a launch graph instead of
    /// launching its kernels one by one; the same bits either way. Staged decode, prefill and
    /// the batched step always launch one by one.
    pub graphs: bool,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions { max_ctx: 4096, vram_budget: None, expert_slots: 64, precision: Precision::F32, graphs: true }
    }
}

/// The activations the quantized matvecs (Q8_0, Q4_K, Q5_K, Q6_K weights) read. Either way
/// decode, batched prefill and the batched step give the same bits; the modes differ from
/// each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// The f32 activations themselves, each weight dequantized to f32 inside the dot.
    #[default]
    F32,
    /// Activations quantized to 8-bit blocks of 32 (`kernels::q8act`: a scale per block,
    /// int8 rounded half to even) and exact integer dots per block; only the scales are
    /// multiplied in f32, in a declared order. Matrices of other types (F32, F16, BF16) and
    /// inputs whose length is not a multiple of 32 keep the f32 path.
    Q8,
}

impl Precision {
    pub const NAMES: [&'static str; 2] = ["f32", "q8"];

    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Q8 => "q8",
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Precision, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "q8" => Ok(Precision::Q8),
            other => Err(format!("precision: expected one of f32, q8, found {other:?}")),
        }
    }
}
