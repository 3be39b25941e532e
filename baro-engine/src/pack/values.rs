//! What the values of each synthetic tensor look like, and how one f32 value is drawn from 64
//! random bits. The ranges follow `transformers`' initialisation of `Qwen3_5Moe` converted to
//! the GGUF conventions (`names.rs`): weights N(0, 0.02)-like, stored norms 1 + w near 1,
//! `ssm_a` = −exp(A_log) with A_log = log U(1, 16), `ssm_dt.bias` = softplus⁻¹(dt) with dt
//! log-uniform in [1e-3, 0.1], conv taps uniform in ±1/√4. Deterministic functions of the
//! bits; never a source of randomness itself.

/// The standard deviation of every synthetic weight matrix.
pub const WEIGHT_STD: f32 = 0.02;
/// The spread of stored norm weights around 1.
pub const NORM_SPREAD: f32 = 0.1;
/// `ssm_a` lies in [−SSM_A_MAX, −1].
pub const SSM_A_MAX: f32 = 16.0;
/// dt lies in [DT_MIN, DT_MAX] before the inverse softplus.
pub const DT_MIN: f64 = 1e-3;
pub const DT_MAX: f64 = 0.1;
/// Conv taps lie in ±CONV_BOUND.
pub const CONV_BOUND: f32 = 0.5;

/// The distribution a tensor's values follow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueKind {
    /// Zero mean, standard deviation `std`, normal-like (bounded at about ±3.5 std).
    Weight { std: f32 },
    /// 1 + w with w zero-mean of spread `NORM_SPREAD` (every stored `*norm.weight`).
    Norm,
    /// `ssm_a`, uniform in [−SSM_A_MAX, −1].
    Decay,
    /// `ssm_dt.bias` = softplus⁻¹(dt), dt log-uniform in [DT_MIN, DT_MAX].
    DtBias,
    /// `ssm_conv1d.weight`, uniform in ±CONV_BOUND.
    Conv,
}

impl ValueKind {
    /// The kind of the GGUF tensor `name`.
    pub fn of(name: &str) -> ValueKind {
        if name.ends_with("norm.weight") {
            ValueKind::Norm
        } else if name.ends_with("ssm_a") {
            ValueKind::Decay
        } else if name.ends_with("ssm_dt.bias") {
            ValueKind::DtBias
        } else if name.ends_with("ssm_conv1d.weight") {
            ValueKind::Conv
        } else {
            ValueKind::Weight { std: WEIGHT_STD }
        }
    }

    /// The closed interval every value of this kind lies in (before any rounding to a
    /// smaller type).
    pub fn bounds(self) -> (f32, f32) {
        let softplus_inv = |dt: f64| (dt + (-(-dt).exp_m1()).ln()) as f32;
        match self {
            ValueKind::Weight { std } => (-NORMAL_BOUND * std, NORMAL_BOUND * std),
            ValueKind::Norm => (1.0 - NORMAL_BOUND * NORM_SPREAD, 1.0 + NORMAL_BOUND * NORM_SPREAD),
            ValueKind::Decay => (-SSM_A_MAX, -1.0),
            ValueKind::DtBias => (softplus_inv(DT_MIN), softplus_inv(DT_MAX)),
            ValueKind::Conv => (-CONV_BOUND, CONV_BOUND),
        }
    }

    /// One value from 64 random bits.
    pub fn draw(self, bits: u64) -> f32 {
        match self {
            ValueKind::Weight { std } => std * normal_like(bits),
            ValueKind::Norm => 1.0 + NORM_SPREAD * normal_like(bits),
            ValueKind::Decay => -(1.0 + (SSM_A_MAX - 1.0) * unit(bits)),
            ValueKind::DtBias => {
                let u = f64::from(unit(bits));
                let dt = (DT_MIN.ln() + u * (DT_MAX.ln() - DT_MIN.ln())).exp();
                (dt + (-(-dt).exp_m1()).ln()) as f32
            }
            ValueKind::Conv => CONV_BOUND * (2.0 * unit(bits) - 1.0),
        }
    }
}

/// |normal_like| never exceeds this: 2·√3.
pub const NORMAL_BOUND: f32 = 3.464_102;

/// Zero mean, unit variance, normal-like: the Irwin–Hall sum of four 16-bit uniforms.
fn normal_like(bits: u64) -> f32 {
    let sum = (bits & 0xFFFF) + ((bits >> 16) & 0xFFFF) + ((bits >> 32) & 0xFFFF) + (bits >> 48);
    // Each term is uniform on 0..=65535: mean 32767.5, variance (65536² − 1) / 12.
    let centred = sum as f32 - 4.0 * 32767.5;
    centred / (2.0 * 18918.6)
}

/// Uniform in [0, 1].
fn unit(bits: u64) -> f32 {
    (bits >> 40) as f32 / ((1u64 << 24) - 1) as f32
}
