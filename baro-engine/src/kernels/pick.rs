//! The greedy pick on the device: the index of the largest logit (the lowest index among equal
//! ones), with the checks `sampling::greedy` makes on the host (the first NaN, the first +inf),
//! so a greedy decode reads four integers per token instead of the whole vocabulary's logits.
//! Every operation is exact (comparisons, `max`, integer `min`), so any order gives the host's
//! answer; the orders below are declared all the same.
//!
//! Two launches: `greedy_chunks` reduces chunks of `PICK_CHUNK` logits, one 32-lane team per
//! chunk and eight per workgroup, and `greedy_pick` (one team) reduces the chunks' results.

use baro::kernel;

/// Logits per chunk of `greedy_chunks` (one team of 32 lanes, 32 logits per lane).
pub const PICK_CHUNK: usize = 1024;

/// The number of chunks (`greedy_chunks`' outputs) for `n` logits.
pub fn pick_chunks(n: usize) -> usize {
    n.div_ceil(PICK_CHUNK)
}

/// Per chunk c of logits[c·1024 .. min(n, (c+1)·1024)]: best[c] = its largest value, at[c] =
/// the lowest index holding a value equal to it (n if none: a chunk of NaNs), nan_at[c] and
/// inf_at[c] = the lowest index holding a NaN / +inf (n if none). Eight chunks per workgroup.
#[kernel(grid = [(n + 8191) / 8192], block = 256, verify(n = [1, 31, 1024, 1025, 9000]))]
pub fn greedy_chunks(
    logits: &[f32],
    best: &mut [f32],
    at: &mut [u32],
    nan_at: &mut [u32],
    inf_at: &mut [u32],
    n: usize,
) {
    let cb = group_id(0) * 8;
    let chunks = (n + 1023) / 1024;
    for t in par_team(0..if chunks - cb < 8 { chunks - cb } else { 8 }, 32) {
        let c = cb + t;
        let base = c * 1024;
        let len = if n - base < 1024 { n - base } else { 1024 };
        let m = max!(e in 0..len, order = lanes(32).butterfly(), logits[base + e]);
        best[c] = m;
        at[c] =
            min!(e in 0..len, order = lanes(32).butterfly(), if logits[base + e] == m { base + e } else { n }) as u32;
        nan_at[c] = min!(e in 0..len, order = lanes(32).butterfly(), if logits[base + e] != logits[base + e] { base + e } else { n })
            as u32;
        inf_at[c] = min!(e in 0..len, order = lanes(32).butterfly(), if logits[base + e] == f32::INFINITY { base + e } else { n })
            as u32;
    }
}

/// Over the `chunks` results of `greedy_chunks` for `n` logits: pick[0] = the lowest index of
/// the largest value (n if every value is NaN), pick[1] = the first NaN's index, pick[2] = the
/// first +inf's index (n where there is none), pick[3] = 1 when the largest value is -inf
/// (every logit masked; with no NaN that is the host's `AllMasked`), else 0.
#[kernel(grid = [1], block = 32, verify(chunks = [1, 2, 33, 70], n = [1, 3000]))]
pub fn greedy_pick(
    best: &[f32],
    at: &[u32],
    nan_at: &[u32],
    inf_at: &[u32],
    pick: &mut [u32],
    chunks: usize,
    n: usize,
) {
    let m = max!(c in 0..chunks, order = lanes(32).butterfly(), best[c]);
    pick[0] = min!(c in 0..chunks, order = lanes(32).butterfly(), if best[c] == m { at[c] as usize } else { n }) as u32;
    pick[1] = min!(c in 0..chunks, order = lanes(32).butterfly(), nan_at[c] as usize) as u32;
    pick[2] = min!(c in 0..chunks, order = lanes(32).butterfly(), inf_at[c] as usize) as u32;
    pick[3] = if m == f32::NEG_INFINITY { 1 } else { 0 };
}
