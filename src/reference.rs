//! Plain-Rust references that follow baro's schedules by hand, written independently of
//! `baro_dsl::schedule` so that tests compare two implementations of one order.
//!
//! Nothing here calls baro; everything is ordinary f32 arithmetic in a spelled-out order.

/// `lanes(lanes).butterfly()`: lane `l` sums `f(l), f(l + lanes), ...` from `+0.0`, then
/// `lanes/2, ..., 1` xor steps where each lane adds its partner to itself; lane 0's value.
pub fn sum_lanes_butterfly(len: usize, lanes: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut parts: Vec<f32> = (0..lanes)
        .map(|l| {
            let mut s = 0.0f32;
            let mut i = l;
            while i < len {
                s += f(i);
                i += lanes;
            }
            s
        })
        .collect();
    let mut mask = lanes / 2;
    while mask > 0 {
        parts = (0..lanes).map(|l| parts[l] + parts[l ^ mask]).collect();
        mask /= 2;
    }
    parts[0]
}

/// The same lane split, combined with `max` (exact in any order for non-NaN values).
pub fn max_lanes_butterfly(len: usize, lanes: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut parts: Vec<f32> =
        (0..lanes).map(|l| (l..len).step_by(lanes).fold(f32::NEG_INFINITY, |m, i| m.max(f(i)))).collect();
    let mut mask = lanes / 2;
    while mask > 0 {
        parts = (0..lanes).map(|l| parts[l].max(parts[l ^ mask])).collect();
        mask /= 2;
    }
    parts[0]
}

/// `seq`: `((0 + f(0)) + f(1)) + ...`
pub fn sum_sequential(len: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut s = 0.0f32;
    for i in 0..len {
        s += f(i);
    }
    s
}

/// A small deterministic generator (xorshift64*) for test and example inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [-1, 1), with a spread of magnitudes so sums are order-sensitive.
    pub fn f32(&mut self) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        let e = (self.next_u64() % 8) as i32;
        (u * 2.0 - 1.0) * 2f32.powi(e - 4)
    }
    pub fn vec_f32(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The bit patterns of a slice of f32, for byte-for-byte comparisons with readable diffs.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}
