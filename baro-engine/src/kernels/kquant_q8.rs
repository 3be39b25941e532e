//! The K-quant matvecs of the q8 precision mode (issue 14; the engine's `Precision::Q8`): Q4_K,
//! Q5_K and Q6_K weights times activations quantized by `q8act` (8-bit blocks of 32 with an
//! f32 scale and the block sum). The three m = 1 kernels are instances of one generic kernel
//! over the format (`matvec_kquant_q8`), each with a rows sibling derived by `rows(..)`, 8-row
//! siblings over tiles of one matrix (`_rows8`: the tile's q8 blocks staged in workgroup
//! memory, each weight unit unpacked once for 8 rows, the tile's ids checked equal by
//! `check!`; `_mma` on the integer matrix step: instances of `q8_tiles`' generic kernels,
//! re-exported here) and a plain-Rust reference in its order; nothing here launches them.
//!
//! The unit of every kernel is one 32-element block of the row, the q8 block it meets (a
//! Q4_K/Q5_K sub-block; two consecutive 16-element Q6_K sub-blocks). Per unit u
//! everything integer is exact, and the float part is a short, fixed expression:
//!
//! - Q4_K, Q5_K: `r_u = (d · xd_u) · (A_u as f32) − (dmin · xd_u) · (B_u as f32)`, with
//!   `A_u = sc_u · Σ_i q_i · x_i` (q the 4- or 5-bit code 0..15 / 0..31, x the q8 bytes: eight
//!   `dot4_i8` summed `order = any`; the codes are below 128, so signed bytes hold them and the
//!   integer matrix step, which multiplies signed bytes, computes the same dots) and `B_u = m_u · xsum_u` (the 6-bit min times the q8
//!   block sum from `q8act`), both in i32. |A_u| ≤ 63 · 32 · 31 · 128 < 2^23 and
//!   |B_u| ≤ 63 · 4096, so both convert to f32 exactly; the four products and the difference
//!   are each rounded once, in this order.
//! - Q6_K: `r_u = (d · xd_u) · (A_u as f32)`, `A_u = sc_2u' · Σ_{i<16} q_i·x_i +
//!   sc_2u'+1 · Σ_{16≤i<32} q_i·x_i` (u' = u mod 8, the sub-scales signed i8, q = code − 32 in
//!   −32..31 formed as signed bytes, four `dot4_i8` per half summed `order = any`), in i32;
//!   |A_u| ≤ 2 · 128 · 16 · 32 · 128 = 2^24, exact in f32.
//!
//! The row's unit results are summed in `lanes(32).butterfly()` order over its k / 32 units
//! (lane l: units l, l + 32, .. in sequence from +0.0; then the xor butterfly), as in
//! `matvec_q8_0_q8` and the f32 K-quant matvecs. The verifier proves each `order = any` sum
//! cannot overflow i32 (eight u8·i8 or four i8·i8 dot4s), so only the float part has an
//! order, and it is declared: the rows siblings give each row this kernel's bits.
//!
//! Weights are the raw GGUF super-blocks seen as little-endian u32 words (`DeviceArg::words`,
//! as the `_xs` f32 matvecs read them). Q4_K (144 bytes) and Q5_K (176) super-blocks start on
//! a word; a Q6_K super-block (210 bytes) starts on a word when its index is even and on a
//! half-word when odd, so its 32-byte runs are read as nine words, joined in pairs where odd.
//! Each lane reads its unit's 32-byte run of codes as 8 words (Q6_K: 9 + 9) plus its scale
//! bytes: the quant bytes shared by two units (Q4_K/Q5_K low and high nibbles, Q6_K's ql) or
//! by four/eight (Q6_K's qh, Q5_K's qh) are loaded by each of them. Word i of a unit's codes
//! holds elements 4i..4i + 4, one per byte: Q4_K the nibble `(qs >> 4·(j % 2)) & 0x0F0F0F0F`
//! of sub-block j's byte run; Q5_K that nibble `| ((qh >> j) & 0x01010101) << 4`; Q6_K the
//! `ql` nibble `| ((qh >> 2·(b % 4)) & 0x03030303) << 4` (`model::dequant`'s layout: half
//! b / 4, group b % 4), made signed as `(c + 0x60606060) ^ 0x80808080`, which is c − 32 per
//! byte as an i8 with no carry between bytes (c + 0x60 ≤ 0x9f). These word reads are written
//! out in the kernels, not in helpers: an index behind a helper's `let` is not one the loop
//! versioning recognises, and the bounds checks would stay in the dot loops.
//!
//! Expert-capable as every matvec: slot s uses matrix ids[s] and q8 blocks from element
//! s · x_stride (a multiple of 32); eight outputs per 256-thread workgroup, one 32-lane team
//! each.

use baro::reference::sum_lanes_butterfly;
use baro::{kernel, kernel_helper};
use half::f16;

pub use crate::kernels::q8_tiles::{
    matvec_q4_k_q8_mma, matvec_q4_k_q8_rows8, matvec_q5_k_q8_mma, matvec_q5_k_q8_rows8, matvec_q6_k_q8_mma,
    matvec_q6_k_q8_rows8,
};
use crate::kernels::quant::{__baro_helper_f16_at_words, __baro_helper_f16_bits};
use crate::model::dequant::{scale_min_k4, Q4_K_BLOCK_BYTES, Q5_K_BLOCK_BYTES, Q6_K_BLOCK_BYTES, QK_K};
use crate::model::TensorType;

/// Byte `i` (0..12) of the packed 6-bit scales and mins of the Q4_K/Q5_K super-block whose
/// first word is `sb` (the scales are bytes 4..16).
#[kernel_helper]
pub fn k4_scale_byte(w: &[u32], sb: usize, i: usize) -> u32 {
    (w[sb + 1 + i / 4] >> ((i % 4 * 8) as u32)) & 255
}

/// The 6-bit scale of sub-block `j` (0..8): `model::dequant::scale_min_k4`'s first value.
/// `(j + 4) % 8` is byte j − 4 where it is used (j ≥ 4) and an in-range byte otherwise (both
/// arms of the select are evaluated).
#[kernel_helper]
pub fn k4_sc(w: &[u32], sb: usize, j: usize) -> i32 {
    let a = k4_scale_byte(w, sb, j);
    let b = k4_scale_byte(w, sb, j + 4);
    let c = k4_scale_byte(w, sb, (j + 4) % 8);
    (if j < 4 { a & 63 } else { (b & 15) | ((c >> 6) << 4) }) as i32
}

/// The 6-bit min of sub-block `j` (0..8): `scale_min_k4`'s second value.
#[kernel_helper]
pub fn k4_min(w: &[u32], sb: usize, j: usize) -> i32 {
    let a = k4_scale_byte(w, sb, j);
    let b = k4_scale_byte(w, sb, j + 4);
    (if j < 4 { b & 63 } else { (b >> 4) | ((a >> 6) << 4) }) as i32
}

/// The i8 at byte `at` (a Q6_K sub-scale), widened.
#[kernel_helper]
pub fn byte_i8(w: &[u32], at: usize) -> i32 {
    ((w[at / 4] >> ((at % 4 * 8) as u32)) as i8) as i32
}

/// The K-quant weights × q8 activations (`xq`, `xd`, `xsum` as `q8act` writes them: 8 words,
/// one scale and one block sum per 32 elements; k a multiple of 256), one definition for the
/// three formats (`FMT`: Q4K, Q5K, Q6K), each instance with its rows sibling derived by
/// `rows(..)` (`ROWS`). Q4_K: unit u of row o is sub-block u % 8 of super-block u / 8;
/// y = Σ_u r_u in `lanes(32).butterfly()` order, `r_u = (d·xd_u)·(sc_u·idot_u) −
/// (dmin·xd_u)·(m_u·xsum_u)` (module doc). Q5_K: the same with 5-bit codes (176-byte
/// super-blocks). Q6_K (no block sums: the codes are made signed): unit u is q8 block u % 8 of
/// super-block u / 8 (its sub-blocks 2(u % 8) and 2(u % 8) + 1), `r_u = (d·xd_u)·(sc_lo·idot_lo +
/// sc_hi·idot_hi)`.
#[kernel(grid = [(n + 7) / 8, n_slots], block = 256, uses = [f16_at_words, f16_bits, k4_scale_byte, k4_sc, k4_min, byte_i8],
         verify(k = [256, 512, 1280], n = [1, 9], x_stride = [0, 256], n_slots = [1, 2]),
         rows(name = ROWS, tile = 8, axis = 1, row_stride(xq = k / 4, xd = k / 32, xsum = k / 32, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(k = [256, 1280], rows = [1, 3, 9])),
         instances(matvec_q4_k_q8(FMT = Q4K, ROWS = matvec_q4_k_q8_rows),
                   matvec_q5_k_q8(FMT = Q5K, ROWS = matvec_q5_k_q8_rows),
                   matvec_q6_k_q8(FMT = Q6K, ROWS = matvec_q6_k_q8_rows,
                                  rows(name = ROWS, tile = 8, axis = 1, row_stride(xq = k / 4, xd = k / 32, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(k = [256, 1280], rows = [1, 3, 9])))))]
pub fn matvec_kquant_q8<const FMT: Format, const ROWS: Name>(
    xq: &[u32],
    xd: &[f32],
    #[when(FMT != Q6K)] xsum: &[i32],
    w: &[u32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
) {
    let ob = group_id(0) * 8;
    let s = group_id(1);
    let e = ids[s] as usize;
    let xb = s * x_stride / 32;
    for t in par_team(0..if n - ob < 8 { n - ob } else { 8 }, 32) {
        let o = ob + t;
        let sb = (e * n + o) * (k / 256);
        #[when(FMT == Q4K)]
        y[s * n + o] = sum!(u in 0..k / 32, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 36] & 65535) * xd[xb + u])
                * ((k4_sc(w, (sb + u / 8) * 36, u % 8) * sum!(i in 0..8, order = any, dot4_i8((w[(sb + u / 8) * 36 + 4 + u % 8 / 2 * 8 + i] >> ((u % 8 % 2 * 4) as u32)) & 0x0F0F0F0F, xq[(xb + u) * 8 + i], 0))) as f32)
            - (f16_bits(w[(sb + u / 8) * 36] >> 16) * xd[xb + u]) * ((k4_min(w, (sb + u / 8) * 36, u % 8) * xsum[xb + u]) as f32));
        #[when(FMT == Q5K)]
        y[s * n + o] = sum!(u in 0..k / 32, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 44] & 65535) * xd[xb + u])
                * ((k4_sc(w, (sb + u / 8) * 44, u % 8) * sum!(i in 0..8, order = any, dot4_i8(((w[(sb + u / 8) * 44 + 12 + u % 8 / 2 * 8 + i] >> ((u % 8 % 2 * 4) as u32)) & 0x0F0F0F0F)
                        | (((w[(sb + u / 8) * 44 + 4 + i] >> ((u % 8) as u32)) & 0x01010101) << 4), xq[(xb + u) * 8 + i], 0))) as f32)
            - (f16_bits(w[(sb + u / 8) * 44] >> 16) * xd[xb + u]) * ((k4_min(w, (sb + u / 8) * 44, u % 8) * xsum[xb + u]) as f32));
        #[when(FMT == Q6K)]
        y[s * n + o] = sum!(u in 0..k / 32, order = lanes(32).butterfly(),
            (f16_at_words(w, (sb + u / 8) * 210 + 208) * xd[xb + u])
                * ((byte_i8(w, (sb + u / 8) * 210 + 192 + u % 8 * 2) * sum!(i in 0..4, order = any, dot4_i8((((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i] } else { (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i] >> 16) | (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 1] << 16) }) >> ((u % 4 / 2 * 4) as u32)) & 0x0F0F0F0F)
                        | ((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i] } else { (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i] >> 16) | (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 1] << 16) }) >> ((u % 4 * 2) as u32)) & 0x03030303) << 4)) + 0x60606060) ^ 0x80808080, xq[(xb + u) * 8 + i], 0))
                    + byte_i8(w, (sb + u / 8) * 210 + 193 + u % 8 * 2) * sum!(i in 0..4, order = any, dot4_i8((((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4] } else { (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4] >> 16) | (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4 + 1] << 16) }) >> ((u % 4 / 2 * 4) as u32)) & 0x0F0F0F0F)
                        | ((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4] } else { (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4] >> 16) | (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4 + 1] << 16) }) >> ((u % 4 * 2) as u32)) & 0x03030303) << 4)) + 0x60606060) ^ 0x80808080, xq[(xb + u) * 8 + i + 4], 0))) as f32));
    }
}

/// The largest k the 8-row K-quant q8 matvecs take: their workgroup arrays hold 8 rows of that
/// many quantized activations (9 words per block of 32: 36 KiB), their scales (4 KiB) and, for
/// Q4_K and Q5_K, their block sums (4 KiB): 44 KiB, within the 48 KiB of static workgroup
/// memory every target gives. A larger k is a bounds error on the workgroup arrays.
pub const KQ8_ROWS8_MAX_K: usize = 4096;

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Element `e` (0..256) of a K-quant super-block as its integer code: 0..15 (Q4_K), 0..31
/// (Q5_K) or −32..31 (Q6_K), through `model::dequant`'s layouts.
fn code(ty: TensorType, blk: &[u8], e: usize) -> i32 {
    let sub = e / 32;
    match ty {
        TensorType::Q4_K => {
            let byte = blk[16 + (e / 64) * 32 + e % 32];
            i32::from(if sub.is_multiple_of(2) { byte & 0xF } else { byte >> 4 })
        }
        TensorType::Q5_K => {
            let byte = blk[48 + (e / 64) * 32 + e % 32];
            let low = if sub.is_multiple_of(2) { byte & 0xF } else { byte >> 4 };
            i32::from(low | (((blk[16 + e % 32] >> sub) & 1) << 4))
        }
        _ => {
            let (half, p) = (e / 128, e % 128);
            let (group, l) = (p / 32, p % 32);
            let ql = blk[64 * half + l + 32 * (group % 2)];
            let low = if group < 2 { ql & 0xF } else { ql >> 4 };
            let high = (blk[128 + 32 * half + l] >> (2 * group)) & 3;
            i32::from(low | (high << 4)) - 32
        }
    }
}

/// Any of the three K-quant × q8 matvecs in plain Rust (bytes, not words; `half`'s f16 and
/// `model::dequant`'s `scale_min_k4`), in the kernels' order: per slot and output, the unit
/// results of the module doc summed by `sum_lanes_butterfly(.., 32, ..)`. `ty` is Q4_K, Q5_K
/// or Q6_K; `w` is the stack's raw bytes; `xsum` is read for Q4_K and Q5_K only.
#[allow(clippy::too_many_arguments)]
pub fn matvec_kquant_q8_reference(
    ty: TensorType,
    xq: &[u32],
    xd: &[f32],
    xsum: &[i32],
    w: &[u8],
    ids: &[u32],
    k: usize,
    n: usize,
    x_stride: usize,
) -> Vec<f32> {
    let bytes = match ty {
        TensorType::Q4_K => Q4_K_BLOCK_BYTES,
        TensorType::Q5_K => Q5_K_BLOCK_BYTES,
        TensorType::Q6_K => Q6_K_BLOCK_BYTES,
        other => panic!("matvec_kquant_q8_reference: expected Q4_K, Q5_K or Q6_K, found {other:?}"),
    };
    let nb = k / QK_K;
    let mut y = Vec::with_capacity(ids.len() * n);
    for (s, &e) in ids.iter().enumerate() {
        let xb = s * x_stride / 32;
        for o in 0..n {
            let row = (e as usize * n + o) * nb;
            y.push(sum_lanes_butterfly(k / 32, 32, |u| {
                let blk = &w[(row + u / 8) * bytes..(row + u / 8 + 1) * bytes];
                let j = u % 8;
                let x: Vec<i32> = xq[(xb + u) * 8..(xb + u + 1) * 8]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .map(|b| i32::from(b as i8))
                    .collect();
                let idot = |from: usize, to: usize| (from..to).map(|i| code(ty, blk, j * 32 + i) * x[i]).sum::<i32>();
                if ty == TensorType::Q6_K {
                    let (lo, hi) = (i32::from(blk[192 + 2 * j] as i8), i32::from(blk[193 + 2 * j] as i8));
                    let a = lo * idot(0, 16) + hi * idot(16, 32);
                    (f16_at(blk, 208) * xd[xb + u]) * a as f32
                } else {
                    let (sc, m) = scale_min_k4(j, &blk[4..16]);
                    let a = i32::from(sc) * idot(0, 32);
                    let b = i32::from(m) * xsum[xb + u];
                    (f16_at(blk, 0) * xd[xb + u]) * a as f32 - (f16_at(blk, 2) * xd[xb + u]) * b as f32
                }
            }));
        }
    }
    y
}
