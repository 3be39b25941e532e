//! Quantized matrix-vector products on raw GGUF bytes: Q8_0, Q4_K, Q5_K, Q6_K, dequantized
//! inside the dot (never a full-precision copy), expert-capable as in `matvec.rs`.
//!
//! Schedule (all four): the row is cut into its scale units (Q8_0 blocks and Q4_K/Q5_K
//! sub-blocks of 32, Q6_K sub-blocks of 16); unit results are combined by
//! `lanes(32).butterfly()` over the units of the row; inside a unit,
//! - Q8_0: `d · seq(q_i · x_i)`;
//! - Q4_K, Q5_K: `(d · sc) · seq(q_i · x_i) − (dmin · m) · seq(x_i)`;
//! - Q6_K: `(d · sc) · seq(q_i · x_i)`.
//!
//! `d · sc` and `dmin · m` are the products `model::dequant` forms, so a unit's result is the
//! factored form of dequant's `d·sc·q − dmin·m`, not its element-wise sum: equal in exact
//! arithmetic, compared to the dequantized dot within a tolerance. The scale and quant bit
//! unpacking is `model::dequant`'s, element for element.
//!
//! The f16 scale decode is written once (`f16_bits`, `f16_at_bytes`, `f16_at_words`,
//! `#[kernel_helper]`s) and inlined by the macro where a scale is read.
//!
//! Every kernel's rows sibling (`_rows`) is derived from it by `rows(..)`, as in `matvec.rs`:
//! 8 rows per workgroup, each running the m = 1 body (one output per workgroup for the plain
//! kernels; for `_xs`, x staged per row and 8 or 16 outputs).

use baro::reference::{sum_lanes_butterfly, sum_sequential};
use baro::{kernel, kernel_helper};
use half::f16;

use crate::model::dequant::{
    scale_min_k4, Q4_K_BLOCK_BYTES, Q5_K_BLOCK_BYTES, Q6_K_BLOCK_BYTES, Q8_0_BLOCK_BYTES, QK_K,
};

/// The f16 whose bits are the low 16 of `h`, widened to f32 exactly (normal, subnormal,
/// infinity and NaN), by integer operations and one exact multiply.
#[kernel_helper]
pub fn f16_bits(h: u32) -> f32 {
    f32::from_bits(
        ((h & 0x8000) << 16)
            | (if (h & 0x7c00) == 0 {
                (((h & 0x3ff) as f32) * 5.9604645e-8).to_bits()
            } else {
                ((h & 0x7fff) << 13) + (if (h & 0x7c00) == 0x7c00 { 0x70000000 } else { 0x38000000 })
            }),
    )
}

/// The little-endian f16 at byte `byte` of a byte buffer.
#[kernel_helper]
pub fn f16_at_bytes(w: &[u8], byte: usize) -> f32 {
    let h = (w[byte] as u32) | ((w[byte + 1] as u32) << 8);
    f16_bits(h)
}

/// The little-endian f16 at byte `byte` (even) of the same bytes seen as u32 words.
#[kernel_helper]
pub fn f16_at_words(w: &[u32], byte: usize) -> f32 {
    let h = (w[byte / 4] >> ((byte % 4 * 8) as u32)) & 65535;
    f16_bits(h)
}

/// The quantized matvecs, one definition over the weight format (`FMT`), each instance with
/// its rows sibling derived by `rows(..)` (`ROWS`):
/// - Q8_0 (k a multiple of 32): rows of k/32 blocks `{ f16 d; i8 q[32] }`;
/// - Q4_K (k a multiple of 256): super-blocks `{ f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }`;
/// - Q5_K (k a multiple of 256): `{ f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }`;
/// - Q6_K (k a multiple of 256): `{ u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }`; unit u is
///   sub-block u % 16 of super-block u / 16; its element t is element e = (u % 16)·16 + t.
#[kernel(grid = [n, n_slots], uses = [f16_at_bytes, f16_bits],
         rows(name = ROWS, tile = 8, axis = 1, row_stride(x = k, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(rows = [1, 3, 9])),
         instances(matvec_q8_0(FMT = Q8_0, ROWS = matvec_q8_0_rows),
                   matvec_q4_k(FMT = Q4K, ROWS = matvec_q4_k_rows, verify(k = [256, 512, 8448], n = [1, 2], x_stride = [0, 3], n_slots = [1, 2])),
                   matvec_q5_k(FMT = Q5K, ROWS = matvec_q5_k_rows, verify(k = [256, 512, 8448], n = [1, 2], x_stride = [0, 3], n_slots = [1, 2])),
                   matvec_q6_k(FMT = Q6K, ROWS = matvec_q6_k_rows, verify(k = [256, 512, 8448], n = [1, 2], x_stride = [0, 3], n_slots = [1, 2]))))]
pub fn matvec_quant<const FMT: Format, const ROWS: Name>(
    x: &[f32],
    w: &[u8],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
) {
    let o = group_id(0);
    let s = group_id(1);
    let xb = s * x_stride;
    #[when(FMT == Q8_0)]
    let nb = k / 32;
    #[when(FMT == Q8_0)]
    let row = ((ids[s] as usize) * n + o) * nb;
    #[when(FMT != Q8_0)]
    let sb = ((ids[s] as usize) * n + o) * (k / 256);
    #[when(FMT == Q8_0)]
    y[s * n + o] = sum!(b in 0..nb, order = lanes(32).butterfly(),
        f16_at_bytes(w, (row + b) * 34) * sum!(j in 0..32, order = seq, ((w[(row + b) * 34 + 2 + j] as i8) as f32) * x[xb + b * 32 + j]));
    #[when(FMT == Q4K)]
    y[s * n + o] = sum!(u in 0..k / 32, order = lanes(32).butterfly(),
        (f16_at_bytes(w, (sb + u / 8) * 144) * ((if u % 8 < 4 { w[(sb + u / 8) * 144 + 4 + u % 8] & 63 } else { (w[(sb + u / 8) * 144 + 8 + u % 8] & 15) | ((w[(sb + u / 8) * 144 + 4 + (u % 8 + 4) % 8] >> 6) << 4) }) as f32))
            * sum!(i in 0..32, order = seq, (((w[(sb + u / 8) * 144 + 16 + (u % 8 / 2) * 32 + i] >> ((u % 2 * 4) as u8)) & 15) as f32) * x[xb + u * 32 + i])
        - (f16_at_bytes(w, (sb + u / 8) * 144 + 2) * ((if u % 8 < 4 { w[(sb + u / 8) * 144 + 8 + u % 8] & 63 } else { (w[(sb + u / 8) * 144 + 8 + u % 8] >> 4) | ((w[(sb + u / 8) * 144 + 4 + u % 8] >> 6) << 4) }) as f32))
            * sum!(i in 0..32, order = seq, x[xb + u * 32 + i]));
    #[when(FMT == Q5K)]
    y[s * n + o] = sum!(u in 0..k / 32, order = lanes(32).butterfly(),
        (f16_at_bytes(w, (sb + u / 8) * 176) * ((if u % 8 < 4 { w[(sb + u / 8) * 176 + 4 + u % 8] & 63 } else { (w[(sb + u / 8) * 176 + 8 + u % 8] & 15) | ((w[(sb + u / 8) * 176 + 4 + (u % 8 + 4) % 8] >> 6) << 4) }) as f32))
            * sum!(i in 0..32, order = seq, ((((w[(sb + u / 8) * 176 + 48 + (u % 8 / 2) * 32 + i] >> ((u % 2 * 4) as u8)) & 15) | (((w[(sb + u / 8) * 176 + 16 + i] >> ((u % 8) as u8)) & 1) << 4)) as f32) * x[xb + u * 32 + i])
        - (f16_at_bytes(w, (sb + u / 8) * 176 + 2) * ((if u % 8 < 4 { w[(sb + u / 8) * 176 + 8 + u % 8] & 63 } else { (w[(sb + u / 8) * 176 + 8 + u % 8] >> 4) | ((w[(sb + u / 8) * 176 + 4 + u % 8] >> 6) << 4) }) as f32))
            * sum!(i in 0..32, order = seq, x[xb + u * 32 + i]));
    #[when(FMT == Q6K)]
    y[s * n + o] = sum!(u in 0..k / 16, order = lanes(32).butterfly(),
        (f16_at_bytes(w, (sb + u / 16) * 210 + 208) * ((w[(sb + u / 16) * 210 + 192 + u % 16] as i8) as f32))
            * sum!(t in 0..16, order = seq,
                (((((w[(sb + u / 16) * 210 + 64 * (u % 16 / 8) + (u % 2) * 16 + t + 32 * (u % 8 / 2 % 2)] >> ((u % 8 / 4 * 4) as u8)) & 15)
                    | (((w[(sb + u / 16) * 210 + 128 + 32 * (u % 16 / 8) + (u % 2) * 16 + t] >> ((u % 8 / 2 * 2) as u8)) & 3) << 4)) as i32 - 32) as f32)
                * x[xb + u * 16 + t]));
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// A quantized format's scale units: (units per 256 elements, elements per unit).
fn unit_shape(ty: crate::model::TensorType) -> (usize, usize) {
    use crate::model::TensorType as T;
    match ty {
        T::Q6_K => (16, 16),
        _ => (8, 32),
    }
}

/// One unit's result in the kernel's order; `blk` is the unit's block, `j` its index there.
fn unit(ty: crate::model::TensorType, blk: &[u8], j: usize, x: &[f32]) -> f32 {
    use crate::model::TensorType as T;
    match ty {
        T::Q8_0 => f16_at(blk, 0) * sum_sequential(32, |i| f32::from(blk[2 + i] as i8) * x[i]),
        T::Q4_K | T::Q5_K => {
            let (sc, m) = scale_min_k4(j, &blk[4..16]);
            let (d, dmin) = (f16_at(blk, 0) * f32::from(sc), f16_at(blk, 2) * f32::from(m));
            let q = |i: usize| {
                let e = j * 32 + i;
                if ty == T::Q4_K {
                    let byte = blk[16 + (e / 64) * 32 + e % 32];
                    if j.is_multiple_of(2) {
                        byte & 0xF
                    } else {
                        byte >> 4
                    }
                } else {
                    let byte = blk[48 + (e / 64) * 32 + e % 32];
                    let low = if j.is_multiple_of(2) { byte & 0xF } else { byte >> 4 };
                    low | (((blk[16 + e % 32] >> j) & 1) << 4)
                }
            };
            d * sum_sequential(32, |i| f32::from(q(i)) * x[i]) - dmin * sum_sequential(32, |i| x[i])
        }
        T::Q6_K => {
            let d = f16_at(blk, Q6_K_BLOCK_BYTES - 2) * f32::from(blk[192 + j] as i8);
            d * sum_sequential(16, |t| {
                let e = j * 16 + t;
                let (half, p) = (e / 128, e % 128);
                let (group, l) = (p / 32, p % 32);
                let ql = blk[64 * half + l + 32 * (group % 2)];
                let low = if group < 2 { ql & 0xF } else { ql >> 4 };
                let high = (blk[128 + 32 * half + l] >> (2 * group)) & 3;
                (i32::from(low | (high << 4)) - 32) as f32 * x[t]
            })
        }
        T::F32 | T::F16 | T::BF16 => f32::NAN,
    }
}

// ---------------------------------------------------------------------------------------------
// The same four products with x staged in workgroup memory first (`_xs`), for k ≤ XS_MAX_K.
//
// Each lane of the kernels above walks its own scale unit of x: in one load instruction the 32
// lanes read 32 addresses a unit apart (32 cache lines for f32 units of 32), so the L1 handles
// every x load as 32 requests. Here the workgroup first copies x (k floats, consecutive lanes
// reading consecutive elements) into a shared array laid out with one pad element after every
// 32 (`xs[j + j / 32] = x[j]`), and the units read x from there: lane l's element i of unit u is
// `xs[u·33 + i]` (`xs[u·16 + t + u/2]` for Q6_K's units of 16), 32 different banks. Every float
// operation, its operands and its order are those of the kernel above: the results are the same
// bits (`tests/it/kernels_matvec.rs` compares them byte for byte), only where x is read from
// changes. The array holds XS_MAX_K floats plus the pads; a larger k is launched on the kernels
// above (`Kernels::matvec_for`), and would be a bounds error here, never a wrong result.
//
// These kernels also read the weight bytes four at a time: `w` is the same raw GGUF bytes seen
// as little-endian u32 words (`DeviceArg::words`; allocations are whole words, the padding
// reads 0), and each byte is `(w[a / 4] >> (a % 4 · 8)) & 255`. Where a unit's bytes start on a
// word boundary (K-quant super-blocks of 144 and 176 bytes) the 32 bytes of a unit are 8 loads
// instead of 32; where they start on a half-word (Q8_0 blocks of 34 bytes, Q6_K's of 210, by
// the parity of the block index) both alignments are written with word offsets that are
// constant once the element loop is unrolled, and the parity selects between them. Only the
// integer extraction of each quant changes; every float operation and its order is as above.
// ---------------------------------------------------------------------------------------------

/// The largest k the `_xs` matvecs stage (x floats per row in workgroup memory).
pub const XS_MAX_K: usize = 4096;

/// From this many outputs in a launch (n · n_slots), the `_xs` matvecs give each workgroup 16
/// outputs (each team of 32 lanes two, one after the other) instead of 8: staging x and the
/// per-warp set-up are then paid once per 128 weights per lane instead of 64. Below it, fewer
/// workgroups would leave the GPU half idle (measured on an H100 in bench/NOTES.md,
/// 2026-12-06: 16 per workgroup was 1.1–1.2× faster at n · n_slots ≥ 4096 and 1.3× slower at
/// 512 and 2048). Which workgroup computes an output never changes its arithmetic. A kernel
/// cannot read a Rust constant: the four kernels write it as the literal 4096 in their grid
/// and body (`tests/it/kernels_matvec.rs` runs both sides of it). Their derived rows siblings
/// fix `n_slots` to 1, so there the test reads `n · 1 ≥ 4096`: a launch's outputs per row.
pub const XS_WIDE_OUTPUTS: usize = 4096;

/// The `_xs` matvecs by weight type: (type, m = 1 kernel, rows kernel).
pub const XS_KERNELS: [(crate::model::TensorType, &str, &str); 4] = [
    (crate::model::TensorType::Q8_0, "matvec_q8_0_xs", "matvec_q8_0_xs_rows"),
    (crate::model::TensorType::Q4_K, "matvec_q4_k_xs", "matvec_q4_k_xs_rows"),
    (crate::model::TensorType::Q5_K, "matvec_q5_k_xs", "matvec_q5_k_xs_rows"),
    (crate::model::TensorType::Q6_K, "matvec_q6_k_xs", "matvec_q6_k_xs_rows"),
];

/// `matvec_quant` with x staged in workgroup memory (k ≤ XS_MAX_K) and the weights read as
/// little-endian u32 words, 8 or 16 outputs per workgroup of 256 threads (`XS_WIDE_OUTPUTS`;
/// eight teams of 32 lanes, one output after another) sharing the staged x: the same bits as
/// `matvec_quant`'s instance of the same format.
#[kernel(grid = [if n * n_slots >= 4096 { (n + 15) / 16 } else { (n + 7) / 8 }, n_slots], block = 256, uses = [f16_at_words, f16_bits],
         rows(name = ROWS, tile = 8, axis = 1, row_stride(x = k, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(rows = [1, 3, 9])),
         instances(matvec_q8_0_xs(FMT = Q8_0, ROWS = matvec_q8_0_xs_rows),
                   matvec_q4_k_xs(FMT = Q4K, ROWS = matvec_q4_k_xs_rows, verify(k = [256, 512, 4096], n = [1, 17], x_stride = [0, 3], n_slots = [1, 2])),
                   matvec_q5_k_xs(FMT = Q5K, ROWS = matvec_q5_k_xs_rows, verify(k = [256, 512, 4096], n = [1, 17], x_stride = [0, 3], n_slots = [1, 2])),
                   matvec_q6_k_xs(FMT = Q6K, ROWS = matvec_q6_k_xs_rows, verify(k = [256, 512, 4096], n = [1, 17], x_stride = [0, 3], n_slots = [1, 2]))))]
pub fn matvec_quant_xs<const FMT: Format, const ROWS: Name>(
    x: &[f32],
    w: &[u32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
) {
    let g = if n * n_slots >= 4096 { 16 } else { 8 };
    let ob = group_id(0) * g;
    let s = group_id(1);
    let xb = s * x_stride;
    // The expert id is read before x is staged, so its load is in flight during the staging
    // rather than after the barrier, ahead of the first weight address.
    let e = ids[s] as usize;
    let xs = shared::<f32, 4224>();
    for j in par(0..k) {
        xs[j + j / 32] = x[xb + j];
    }
    for t in par_team(0..if n - ob < g { n - ob } else { g }, 32) {
        let o = ob + t;
        #[when(FMT == Q8_0)]
        let nb = k / 32;
        #[when(FMT == Q8_0)]
        let row = (e * n + o) * nb;
        #[when(FMT != Q8_0)]
        let sb = (e * n + o) * (k / 256);
        #[when(FMT == Q8_0)]
        y[s * n + o] = sum!(b in 0..nb, order = lanes(32).butterfly(),
            f16_at_words(w, (row + b) * 34)
            * sum!(j in 0..32, order = seq, (((if (row + b) % 2 == 0 { w[(row + b) * 34 / 4 + (j + 2) / 4] >> (((j + 2) % 4 * 8) as u32) } else { w[(row + b) * 34 / 4 + 1 + j / 4] >> ((j % 4 * 8) as u32) }) as i8) as f32) * xs[b * 33 + j]));
        #[when(FMT == Q4K)]
        y[s * n + o] = sum!(u in 0..k / 32, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 36] & 65535) * ((if u % 8 < 4 { ((w[(sb + u / 8) * 36 + 1 + (u % 8) / 4] >> (((u % 8) % 4 * 8) as u32)) & 255) & 63 } else { (((w[(sb + u / 8) * 36 + 1 + (u % 8 + 4) / 4] >> (((u % 8 + 4) % 4 * 8) as u32)) & 255) & 15) | ((((w[(sb + u / 8) * 36 + 1 + ((u % 8 + 4) % 8) / 4] >> ((((u % 8 + 4) % 8) % 4 * 8) as u32)) & 255) >> 6) << 4) }) as f32))
                * sum!(i in 0..32, order = seq, (((w[(sb + u / 8) * 36 + 4 + (u % 8 / 2) * 8 + i / 4] >> ((i % 4 * 8 + u % 2 * 4) as u32)) & 15) as f32) * xs[u * 33 + i])
            - (f16_bits(w[(sb + u / 8) * 36] >> 16) * ((if u % 8 < 4 { ((w[(sb + u / 8) * 36 + 1 + (u % 8 + 4) / 4] >> (((u % 8 + 4) % 4 * 8) as u32)) & 255) & 63 } else { (((w[(sb + u / 8) * 36 + 1 + (u % 8 + 4) / 4] >> (((u % 8 + 4) % 4 * 8) as u32)) & 255) >> 4) | ((((w[(sb + u / 8) * 36 + 1 + (u % 8) / 4] >> (((u % 8) % 4 * 8) as u32)) & 255) >> 6) << 4) }) as f32))
                * sum!(i in 0..32, order = seq, xs[u * 33 + i]));
        #[when(FMT == Q5K)]
        y[s * n + o] = sum!(u in 0..k / 32, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 44] & 65535) * ((if u % 8 < 4 { ((w[(sb + u / 8) * 44 + 1 + (u % 8) / 4] >> (((u % 8) % 4 * 8) as u32)) & 255) & 63 } else { (((w[(sb + u / 8) * 44 + 1 + (u % 8 + 4) / 4] >> (((u % 8 + 4) % 4 * 8) as u32)) & 255) & 15) | ((((w[(sb + u / 8) * 44 + 1 + ((u % 8 + 4) % 8) / 4] >> ((((u % 8 + 4) % 8) % 4 * 8) as u32)) & 255) >> 6) << 4) }) as f32))
                * sum!(i in 0..32, order = seq, ((((w[(sb + u / 8) * 44 + 12 + (u % 8 / 2) * 8 + i / 4] >> ((i % 4 * 8 + u % 2 * 4) as u32)) & 15) | (((w[(sb + u / 8) * 44 + 4 + i / 4] >> ((i % 4 * 8 + u % 8) as u32)) & 1) << 4)) as f32) * xs[u * 33 + i])
            - (f16_bits(w[(sb + u / 8) * 44] >> 16) * ((if u % 8 < 4 { ((w[(sb + u / 8) * 44 + 1 + (u % 8 + 4) / 4] >> (((u % 8 + 4) % 4 * 8) as u32)) & 255) & 63 } else { (((w[(sb + u / 8) * 44 + 1 + (u % 8 + 4) / 4] >> (((u % 8 + 4) % 4 * 8) as u32)) & 255) >> 4) | ((((w[(sb + u / 8) * 44 + 1 + (u % 8) / 4] >> (((u % 8) % 4 * 8) as u32)) & 255) >> 6) << 4) }) as f32))
                * sum!(i in 0..32, order = seq, xs[u * 33 + i]));
        #[when(FMT == Q6K)]
        y[s * n + o] = sum!(u in 0..k / 16, order = lanes(32).butterfly(),
            (f16_at_words(w, ((sb + u / 16) * 210 + 208)) * ((w[((sb + u / 16) * 210 + 192 + u % 16) / 4] >> ((((sb + u / 16) * 210 + 192 + u % 16) % 4 * 8) as u32)) as i8) as f32)
                * sum!(t in 0..16, order = seq, (((((if (sb + u / 16) % 2 == 0 { w[((sb + u / 16) * 210 + 64 * (u % 16 / 8) + (u % 2) * 16 + 32 * (u % 8 / 2 % 2)) / 4 + t / 4] >> ((t % 4 * 8 + u % 8 / 4 * 4) as u32) } else { w[((sb + u / 16) * 210 + 64 * (u % 16 / 8) + (u % 2) * 16 + 32 * (u % 8 / 2 % 2)) / 4 + (t + 2) / 4] >> (((t + 2) % 4 * 8 + u % 8 / 4 * 4) as u32) }) & 15) | (((if (sb + u / 16) % 2 == 0 { w[((sb + u / 16) * 210 + 128 + 32 * (u % 16 / 8) + (u % 2) * 16) / 4 + t / 4] >> ((t % 4 * 8 + u % 8 / 2 * 2) as u32) } else { w[((sb + u / 16) * 210 + 128 + 32 * (u % 16 / 8) + (u % 2) * 16) / 4 + (t + 2) / 4] >> (((t + 2) % 4 * 8 + u % 8 / 2 * 2) as u32) }) & 3) << 4)) as i32 - 32) as f32) * xs[u * 16 + t + u / 2]));
    }
}

/// `matvec_q8_0_xs` over 8 rows of one matrix at once (`ids[0]` for every row: a plain
/// projection): each team's output is one reduction over rows, so a lane reads a unit's scale
/// and its 8–9 weight words and unpacks its 32 bytes once for the 8 rows, keeping 8 partials,
/// each in `matvec_q8_0_xs`'s own order (lanes over units, butterfly; a sequential dot per
/// unit). x is read from global memory (8 rows of it would not fit the workgroup array), so
/// there is no `XS_MAX_K` limit; the staged x of the m = 1 kernel holds the same values, so
/// the arithmetic is the same. A row past the last reads the last row's x and is not stored.
#[kernel(grid = [(n + 7) / 8, (rows + 7) / 8], block = 256, uses = [f16_at_words, f16_bits], rows_of = matvec_q8_0_xs, rows = rows,
         row_stride(x = k, y = n), verify(x_stride = [0], n_slots = [1], rows = [1, 3, 7, 8, 9, 17]))]
pub fn matvec_q8_0_rows8(
    x: &[f32],
    w: &[u32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
    rows: usize,
) {
    let ob = group_id(0) * 8;
    let r0 = group_id(1) * 8;
    let last = rows - 1;
    let e = ids[0] as usize;
    for t in par_team(0..if n - ob < 8 { n - ob } else { 8 }, 32) {
        let o = ob + t;
        let nb = k / 32;
        let row = (e * n + o) * nb;
        let ys = sum!(r in 0..8, b in 0..nb, order = lanes(32).butterfly(),
            f16_at_words(w, (row + b) * 34)
            * sum!(j in 0..32, order = seq, (((if (row + b) % 2 == 0 { w[(row + b) * 34 / 4 + (j + 2) / 4] >> (((j + 2) % 4 * 8) as u32) } else { w[(row + b) * 34 / 4 + 1 + j / 4] >> ((j % 4 * 8) as u32) }) as i8) as f32) * x[(r0 + r).min(last) * k + b * 32 + j]));
        y[r0 * n + o] = ys[0];
        for r in 1..8 {
            if r0 + r < rows {
                y[(r0 + r) * n + o] = ys[r];
            }
        }
    }
}

/// Any of the four quantized matvecs in plain Rust, in the kernel's order (through
/// `model::dequant`'s `scale_min_k4` and `half`'s f16, independent of the kernels' inline
/// decode). `ty` must be Q8_0, Q4_K, Q5_K or Q6_K.
pub fn matvec_quant_reference(
    ty: crate::model::TensorType,
    x: &[f32],
    w: &[u8],
    ids: &[u32],
    k: usize,
    n: usize,
    x_stride: usize,
) -> Vec<f32> {
    use crate::model::TensorType as T;
    let (block_len, block_bytes, per_block, unit_len) = match ty {
        T::Q8_0 => (32, Q8_0_BLOCK_BYTES, 1, 32),
        T::Q4_K => (QK_K, Q4_K_BLOCK_BYTES, unit_shape(ty).0, unit_shape(ty).1),
        T::Q5_K => (QK_K, Q5_K_BLOCK_BYTES, unit_shape(ty).0, unit_shape(ty).1),
        _ => (QK_K, Q6_K_BLOCK_BYTES, unit_shape(ty).0, unit_shape(ty).1),
    };
    let nb = k / block_len;
    let mut y = Vec::with_capacity(ids.len() * n);
    for (s, &e) in ids.iter().enumerate() {
        let xs = &x[s * x_stride..];
        for o in 0..n {
            let row = (e as usize * n + o) * nb;
            y.push(sum_lanes_butterfly(nb * per_block, 32, |u| {
                let (b, j) = (u / per_block, u % per_block);
                let blk = &w[(row + b) * block_bytes..(row + b + 1) * block_bytes];
                unit(ty, blk, j, &xs[u * unit_len..])
            }));
        }
    }
    y
}
