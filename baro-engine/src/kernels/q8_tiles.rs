//! The 8-row tile kernels of the q8 precision mode (issue 14), each family written once over
//! the weight format and instanced per format (issue 16's generic kernels,
//! `#[kernel(instances(..))]`): `matvec_q8_rows8` (x staged in workgroup memory, each weight
//! unit unpacked once for 8 rows) and `matvec_q8_mma` (the integer matrix step), for Q8_0,
//! Q4_K, Q5_K and Q6_K weights. Every instance is its own kernel with the name and parameters
//! the engine launches (`q8act` and `kquant_q8` re-export them), proven at build time the rows
//! sibling of its format's m = 1 kernel (`q8act::matvec_q8_0_q8`, `kquant_q8::matvec_*_q8`,
//! whose module docs say what a unit computes). Nothing here launches them.
//!
//! `FMT` (Q8_0, Q4K, Q5K, Q6K) picks, by `#[when(..)]`, the unit's weight reads and float part
//! and whether the kernel reads block sums (`xsum`, Q4_K and Q5_K only); the tile's id check,
//! the staging of x and the 8-row store are written once. Each float part is the m = 1
//! kernel's, for the 8 rows at once, in its `lanes(32).butterfly()` order. The tile's rows
//! share one matrix (`ids[r0]`, checked equal: a projection's zero ids, or routed experts
//! grouped so that each expert's rows start on a multiple of 8); a row past the last reads the
//! last row's blocks and is not stored.

use baro::kernel;

use crate::kernels::kquant_q8::{
    __baro_helper_byte_i8, __baro_helper_k4_min, __baro_helper_k4_sc, __baro_helper_k4_scale_byte,
};
use crate::kernels::quant::{__baro_helper_f16_at_words, __baro_helper_f16_bits};

/// A q8 matvec over 8 rows of one matrix at once, x staged: the 8 rows' q8 blocks (8 words per
/// block of 32 and one pad of 4 words after every 4 blocks, 9 words a block: block c's words
/// start at 8c + 4·(c / 4), a multiple of 4, so a lane reads them as two 16-byte loads, and the
/// 8 lanes that share a 16-byte load phase fall in 8 different groups of 4 banks), their scales
/// and (Q4_K, Q5_K) block sums are copied into workgroup memory once; then each lane reads a
/// unit's weights (Q8_0: a block's scale and 8 words; K-quants: the unit's scale, min and
/// codes) once for the 8 rows and keeps 8 partials, each in the m = 1 kernel's order. 32
/// outputs per workgroup of 256 threads, four after another on each 32-lane team, so that the
/// staged x serves 32 outputs. k ≤ `q8act::Q8_ROWS8_MAX_K` (Q8_0), `kquant_q8::KQ8_ROWS8_MAX_K`.
#[kernel(grid = [(n + 31) / 32, (rows + 7) / 8], block = 256, uses = [f16_at_words, f16_bits, k4_scale_byte, k4_sc, k4_min, byte_i8], rows = rows,
         row_stride(xq = k / 4, xd = k / 32, xsum = k / 32, ids = 1, y = n), verify(k = [256, 2304], n = [1, 9, 33], x_stride = [0], n_slots = [1], rows = [1, 3, 8, 9, 17]),
         instances(
             matvec_q8_0_q8_rows8(FMT = Q8_0, rows_of = super::q8act::matvec_q8_0_q8, row_stride(xq = k / 4, xd = k / 32, ids = 1, y = n),
                                  verify(k = [32, 1056], n = [1, 9, 33], x_stride = [0], n_slots = [1], rows = [1, 3, 7, 8, 9, 17])),
             matvec_q4_k_q8_rows8(FMT = Q4K, rows_of = super::kquant_q8::matvec_q4_k_q8),
             matvec_q5_k_q8_rows8(FMT = Q5K, rows_of = super::kquant_q8::matvec_q5_k_q8),
             matvec_q6_k_q8_rows8(FMT = Q6K, rows_of = super::kquant_q8::matvec_q6_k_q8, row_stride(xq = k / 4, xd = k / 32, ids = 1, y = n))))]
pub fn matvec_q8_rows8<const FMT: Format>(
    xq: &[u32],
    xd: &[f32],
    #[when(FMT == Q4K || FMT == Q5K)] xsum: &[i32],
    w: &[u32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
    rows: usize,
) {
    let ob = group_id(0) * 32;
    let r0 = group_id(1) * 8;
    let last = rows - 1;
    let e = ids[r0] as usize;
    // The tile's rows share one matrix: the verifier proves row r equal to the m = 1 kernel on
    // row r (which reads ids[r]) under this precondition, and a launch that breaks it fails.
    for r in 0..8 {
        check!(ids[(r0 + r).min(last)] == ids[r0]);
    }
    let nb = k / 32;
    let xs = shared::<u32, 9216>();
    let ds = shared::<f32, 1024>();
    #[when(FMT == Q4K || FMT == Q5K)]
    let ss = shared::<i32, 1024>();
    for j in par(0..nb * 8) {
        for r in 0..8 {
            xs[(r * nb + j / 8) * 8 + (r * nb + j / 8) / 4 * 4 + j % 8] = xq[(r0 + r).min(last) * (k / 4) + j];
        }
    }
    for b in par(0..nb) {
        for r in 0..8 {
            ds[r * nb + b] = xd[(r0 + r).min(last) * nb + b];
            #[when(FMT == Q4K || FMT == Q5K)]
            ss[r * nb + b] = xsum[(r0 + r).min(last) * nb + b];
        }
    }
    for t in par_team(0..if n - ob < 32 { n - ob } else { 32 }, 32) {
        let o = ob + t;
        #[when(FMT == Q8_0)]
        let row = (e * n + o) * nb;
        #[when(FMT != Q8_0)]
        let sb = (e * n + o) * (k / 256);
        #[when(FMT == Q8_0)]
        let ys = sum!(r in 0..8, b in 0..nb, order = lanes(32).butterfly(),
            (f16_at_words(w, (row + b) * 34) * ds[r * nb + b])
            * (sum!(j in 0..8, order = any, dot4_i8(if (row + b) % 2 == 0 { (w[(row + b) * 34 / 4 + j] >> 16) | (w[(row + b) * 34 / 4 + j + 1] << 16) } else { w[(row + b) * 34 / 4 + j + 1] }, xs[(r * nb + b) * 8 + (r * nb + b) / 4 * 4 + j], 0)) as f32));
        #[when(FMT == Q4K)]
        let ys = sum!(r in 0..8, u in 0..nb, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 36] & 65535) * ds[r * nb + u])
                * ((k4_sc(w, (sb + u / 8) * 36, u % 8) * sum!(i in 0..8, order = any, dot4_i8((w[(sb + u / 8) * 36 + 4 + u % 8 / 2 * 8 + i] >> ((u % 8 % 2 * 4) as u32)) & 0x0F0F0F0F, xs[(r * nb + u) * 8 + (r * nb + u) / 4 * 4 + i], 0))) as f32)
            - (f16_bits(w[(sb + u / 8) * 36] >> 16) * ds[r * nb + u]) * ((k4_min(w, (sb + u / 8) * 36, u % 8) * ss[r * nb + u]) as f32));
        #[when(FMT == Q5K)]
        let ys = sum!(r in 0..8, u in 0..nb, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 44] & 65535) * ds[r * nb + u])
                * ((k4_sc(w, (sb + u / 8) * 44, u % 8) * sum!(i in 0..8, order = any, dot4_i8(((w[(sb + u / 8) * 44 + 12 + u % 8 / 2 * 8 + i] >> ((u % 8 % 2 * 4) as u32)) & 0x0F0F0F0F)
                        | (((w[(sb + u / 8) * 44 + 4 + i] >> ((u % 8) as u32)) & 0x01010101) << 4), xs[(r * nb + u) * 8 + (r * nb + u) / 4 * 4 + i], 0))) as f32)
            - (f16_bits(w[(sb + u / 8) * 44] >> 16) * ds[r * nb + u]) * ((k4_min(w, (sb + u / 8) * 44, u % 8) * ss[r * nb + u]) as f32));
        #[when(FMT == Q6K)]
        let ys = sum!(r in 0..8, u in 0..nb, order = lanes(32).butterfly(),
            (f16_at_words(w, (sb + u / 8) * 210 + 208) * ds[r * nb + u])
                * ((byte_i8(w, (sb + u / 8) * 210 + 192 + u % 8 * 2) * sum!(i in 0..4, order = any, dot4_i8((((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i] } else { (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i] >> 16) | (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 1] << 16) }) >> ((u % 4 / 2 * 4) as u32)) & 0x0F0F0F0F)
                        | ((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i] } else { (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i] >> 16) | (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 1] << 16) }) >> ((u % 4 * 2) as u32)) & 0x03030303) << 4)) + 0x60606060) ^ 0x80808080, xs[(r * nb + u) * 8 + (r * nb + u) / 4 * 4 + i], 0))
                    + byte_i8(w, (sb + u / 8) * 210 + 193 + u % 8 * 2) * sum!(i in 0..4, order = any, dot4_i8((((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4] } else { (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4] >> 16) | (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4 + 1] << 16) }) >> ((u % 4 / 2 * 4) as u32)) & 0x0F0F0F0F)
                        | ((((if (sb + u / 8) % 2 == 0 { w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4] } else { (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4] >> 16) | (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4 + 1] << 16) }) >> ((u % 4 * 2) as u32)) & 0x03030303) << 4)) + 0x60606060) ^ 0x80808080, xs[(r * nb + u) * 8 + (r * nb + u) / 4 * 4 + i + 4], 0))) as f32));
        y[r0 * n + o] = ys[0];
        for r in 1..8 {
            if r0 + r < rows {
                y[(r0 + r) * n + o] = ys[r];
            }
        }
    }
}

/// A q8 matvec over 8 rows of one matrix on the integer matrix step (`mma_i8`): `OUT` outputs
/// × 8 rows per workgroup (16; 8 for Q6_K). The row's units go 8 at a time (a chunk: one
/// K-quant super-block): the outputs' weight words of those units as signed bytes (Q8_0: the
/// block's quant words; Q4_K: the low or high nibbles; Q5_K: nibble and high bit; Q6_K: a
/// unit has two halves of 16 with their own sub-scales, so tile row 2o + h holds output o's
/// codes of half h, made signed as the m = 1 kernel makes them, and zero words in the other
/// half: the step's row 2o + h is then exactly the m = 1 kernel's sum of half h) and the 8 rows'
/// activation words are copied into workgroup memory (rows of 12 words, 8 used: the fragment
/// loads of a wave fall in different banks); then each of the 8 teams runs one unit's step,
/// the exact integer dots of that unit (the m = 1 kernel's `sum!(.., order = any, dot4_i8(..))`,
/// proven equal: the sums cannot wrap), stored for every unit (tiles 129 apart, so the lanes of
/// the float part, which walk units, read different banks). The float part is then the m = 1
/// kernel's for the 8 rows at once (the unit's scales decoded once), one or two outputs per
/// team. An output past n reads output n − 1's weights and is not stored. `SX` names the
/// activation tile (`sb` in the Q8_0 instance, as that kernel always named it: the name is in
/// the PTX). k ≤ `q8act::Q8_MMA_MAX_K`.
#[kernel(grid = [(n + 15) / 16, (rows + 7) / 8], block = 256, uses = [f16_at_words, f16_bits, k4_scale_byte, k4_sc, k4_min, byte_i8], rows = rows,
         row_stride(xq = k / 4, xd = k / 32, xsum = k / 32, ids = 1, y = n), verify(k = [256, 1280], n = [1, 9, 17], x_stride = [0], n_slots = [1], rows = [1, 3, 8, 9, 17]),
         instances(
             matvec_q8_0_q8_mma(FMT = Q8_0, OUT = 16, SX = sb, rows_of = super::q8act::matvec_q8_0_q8, row_stride(xq = k / 4, xd = k / 32, ids = 1, y = n),
                                verify(k = [32, 1056], n = [1, 9, 17], x_stride = [0], n_slots = [1], rows = [1, 3, 8, 9, 17])),
             matvec_q4_k_q8_mma(FMT = Q4K, OUT = 16, SX = sx, rows_of = super::kquant_q8::matvec_q4_k_q8),
             matvec_q5_k_q8_mma(FMT = Q5K, OUT = 16, SX = sx, rows_of = super::kquant_q8::matvec_q5_k_q8),
             matvec_q6_k_q8_mma(FMT = Q6K, OUT = 8, SX = sx, rows_of = super::kquant_q8::matvec_q6_k_q8, grid = [(n + 7) / 8, (rows + 7) / 8],
                                row_stride(xq = k / 4, xd = k / 32, ids = 1, y = n))))]
pub fn matvec_q8_mma<const FMT: Format, const OUT: usize, const SX: Name>(
    xq: &[u32],
    xd: &[f32],
    #[when(FMT == Q4K || FMT == Q5K)] xsum: &[i32],
    w: &[u32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
    rows: usize,
) {
    let ob = group_id(0) * OUT;
    let r0 = group_id(1) * 8;
    let last = rows - 1;
    let e = ids[r0] as usize;
    // The tile's rows share one matrix: the verifier proves row r equal to the m = 1 kernel on
    // row r (which reads ids[r]) under this precondition, and a launch that breaks it fails.
    for r in 0..8 {
        check!(ids[(r0 + r).min(last)] == ids[r0]);
    }
    let nb = k / 32;
    let sa = shared::<u32, 1536>();
    let SX = shared::<u32, 768>();
    let sc = shared::<i32, 8256>();
    let ds = shared::<f32, 512>();
    #[when(FMT == Q4K || FMT == Q5K)]
    let ss = shared::<i32, 512>();
    for b in par(0..nb) {
        for r in 0..8 {
            ds[r * nb + b] = xd[(r0 + r).min(last) * nb + b];
            #[when(FMT == Q4K || FMT == Q5K)]
            ss[r * nb + b] = xsum[(r0 + r).min(last) * nb + b];
        }
    }
    for c in 0..(nb + 7) / 8 {
        let nu = (nb - c * 8).min(8);
        for p in par(0..nu * 16) {
            // Item p: unit c · 8 + p / 16 of output p % 16 (Q6_K: tile row p % 16 = 2o + h), its
            // 8 code words. The m = 1 kernel's indices, formed as it forms them (Q8_0: `row +
            // b`; Q6_K: i the word within the half), so the proof compares the same indices.
            #[when(FMT == Q8_0)]
            let blk = (e * n + (ob + p % 16).min(n - 1)) * nb + (c * 8 + p / 16);
            #[when(FMT != Q8_0)]
            let u = c * 8 + p / 16;
            #[when(FMT == Q4K || FMT == Q5K)]
            let sb = (e * n + (ob + p % 16).min(n - 1)) * (k / 256);
            #[when(FMT == Q6K)]
            let sb = (e * n + (ob + p % 16 / 2).min(n - 1)) * (k / 256);
            #[when(FMT == Q8_0)]
            for q in 0..8 {
                sa[p / 16 * 192 + p % 16 * 12 + q] = if blk % 2 == 0 {
                    (w[blk * 34 / 4 + q] >> 16) | (w[blk * 34 / 4 + q + 1] << 16)
                } else {
                    w[blk * 34 / 4 + q + 1]
                };
            }
            #[when(FMT == Q4K)]
            for q in 0..8 {
                sa[p / 16 * 192 + p % 16 * 12 + q] =
                    (w[(sb + u / 8) * 36 + 4 + u % 8 / 2 * 8 + q] >> ((u % 8 % 2 * 4) as u32)) & 0x0F0F0F0F;
            }
            #[when(FMT == Q5K)]
            for q in 0..8 {
                sa[p / 16 * 192 + p % 16 * 12 + q] =
                    ((w[(sb + u / 8) * 44 + 12 + u % 8 / 2 * 8 + q] >> ((u % 8 % 2 * 4) as u32)) & 0x0F0F0F0F)
                        | (((w[(sb + u / 8) * 44 + 4 + q] >> ((u % 8) as u32)) & 0x01010101) << 4);
            }
            #[when(FMT == Q6K)]
            for q in 0..8 {
                let i = q % 4;
                sa[p / 16 * 192 + p % 16 * 12 + q] = if q / 4 == p % 2 {
                    if q < 4 {
                        (((((if (sb + u / 8) % 2 == 0 {
                            w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i]
                        } else {
                            (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i] >> 16)
                                | (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 1] << 16)
                        }) >> ((u % 4 / 2 * 4) as u32))
                            & 0x0F0F0F0F)
                            | ((((if (sb + u / 8) % 2 == 0 {
                                w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i]
                            } else {
                                (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i] >> 16)
                                    | (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 1] << 16)
                            }) >> ((u % 4 * 2) as u32))
                                & 0x03030303)
                                << 4))
                            + 0x60606060)
                            ^ 0x80808080
                    } else {
                        (((((if (sb + u / 8) % 2 == 0 {
                            w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4]
                        } else {
                            (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4] >> 16)
                                | (w[((sb + u / 8) * 210 + 64 * (u % 8 / 4) + 32 * (u % 2)) / 4 + i + 4 + 1] << 16)
                        }) >> ((u % 4 / 2 * 4) as u32))
                            & 0x0F0F0F0F)
                            | ((((if (sb + u / 8) % 2 == 0 {
                                w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4]
                            } else {
                                (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4] >> 16)
                                    | (w[((sb + u / 8) * 210 + 128 + 32 * (u % 8 / 4)) / 4 + i + 4 + 1] << 16)
                            }) >> ((u % 4 * 2) as u32))
                                & 0x03030303)
                                << 4))
                            + 0x60606060)
                            ^ 0x80808080
                    }
                } else {
                    0
                };
            }
        }
        for i in par(0..nu * 64) {
            SX[i / 64 * 96 + i / 8 % 8 * 12 + i % 8] =
                xq[(r0 + i / 8 % 8).min(last) * (k / 4) + (c * 8 + i / 64) * 8 + i % 8];
        }
        for j in par_team(0..nu, 32) {
            mma_i8(sc, (c * 8 + j) * 129, 8, sa, j * 192, 12, SX, j * 96, 12, 1);
        }
    }
    for t in par_team(0..(n - ob).min(OUT), 32) {
        let o = ob + t;
        #[when(FMT == Q8_0)]
        let row = (e * n + o) * nb;
        #[when(FMT != Q8_0)]
        let sb = (e * n + o) * (k / 256);
        #[when(FMT == Q8_0)]
        let ys = sum!(r in 0..8, b in 0..nb, order = lanes(32).butterfly(),
            (f16_at_words(w, (row + b) * 34) * ds[r * nb + b]) * (sc[b * 129 + t * 8 + r] as f32));
        #[when(FMT == Q4K)]
        let ys = sum!(r in 0..8, u in 0..nb, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 36] & 65535) * ds[r * nb + u]) * ((k4_sc(w, (sb + u / 8) * 36, u % 8) * sc[u * 129 + t * 8 + r]) as f32)
            - (f16_bits(w[(sb + u / 8) * 36] >> 16) * ds[r * nb + u]) * ((k4_min(w, (sb + u / 8) * 36, u % 8) * ss[r * nb + u]) as f32));
        #[when(FMT == Q5K)]
        let ys = sum!(r in 0..8, u in 0..nb, order = lanes(32).butterfly(),
            (f16_bits(w[(sb + u / 8) * 44] & 65535) * ds[r * nb + u]) * ((k4_sc(w, (sb + u / 8) * 44, u % 8) * sc[u * 129 + t * 8 + r]) as f32)
            - (f16_bits(w[(sb + u / 8) * 44] >> 16) * ds[r * nb + u]) * ((k4_min(w, (sb + u / 8) * 44, u % 8) * ss[r * nb + u]) as f32));
        #[when(FMT == Q6K)]
        let ys = sum!(r in 0..8, u in 0..nb, order = lanes(32).butterfly(),
            (f16_at_words(w, (sb + u / 8) * 210 + 208) * ds[r * nb + u])
                * ((byte_i8(w, (sb + u / 8) * 210 + 192 + u % 8 * 2) * sc[u * 129 + t * 16 + r]
                    + byte_i8(w, (sb + u / 8) * 210 + 193 + u % 8 * 2) * sc[u * 129 + t * 16 + 8 + r]) as f32));
        y[r0 * n + o] = ys[0];
        for r in 1..8 {
            if r0 + r < rows {
                y[(r0 + r) * n + o] = ys[r];
            }
        }
    }
}
