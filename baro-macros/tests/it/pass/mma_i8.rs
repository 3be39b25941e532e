// `mma_i8(c, c_offset, c_stride, a, a_offset, a_stride, b, b_offset, b_stride, steps)`: the
// integer matrix step. It sets the 16×8 i32 tile `c[c_offset + m · c_stride + n]` to the exact
// product of 16 rows of `a` and 8 columns of `b` (u32 words of four i8, `8 · steps` words a
// row or column, all three workgroup arrays), run by a whole 32-lane wave: in uniform code, or
// at the top of a `par_team(.., 32)` body (one tile per team).
use baro_macros::kernel;

/// One tile of up to four steps of 32.
#[kernel(grid = [1])]
pub fn mma_tile(a: &[u32], b: &[u32], y: &mut [i32], steps: usize) {
    let sa = shared::<u32, 512>();
    let sb = shared::<u32, 256>();
    let sc = shared::<i32, 128>();
    let s = steps.min(4);
    for i in par(0..128 * s) {
        sa[i] = a[i];
    }
    for i in par(0..64 * s) {
        sb[i] = b[i];
    }
    mma_i8(sc, 0, 8, sa, 0, 8 * s, sb, 0, 8 * s, s);
    for i in par(0..128) {
        y[i] = sc[i];
    }
}

/// Two tiles of one step that share `b`, one per team of 32.
#[kernel(grid = [1], block = 64)]
pub fn mma_two_tiles(a: &[u32], b: &[u32], y: &mut [i32]) {
    let sa = shared::<u32, 256>();
    let sb = shared::<u32, 64>();
    let sc = shared::<i32, 256>();
    for i in par(0..256) {
        sa[i] = a[i];
    }
    for i in par(0..64) {
        sb[i] = b[i];
    }
    for t in par_team(0..2, 32) {
        mma_i8(sc, t * 128, 8, sa, t * 128, 8, sb, 0, 8, 1);
    }
    for i in par(0..256) {
        y[i] = sc[i];
    }
}

#[test]
fn runs() {
    for k in [mma_tile(), mma_two_tiles()] {
        baro_dsl::verify::check_wellformed(&k).expect("well formed");
        baro_dsl::verify::check_races(&k).expect("race free");
        let text = k.to_string();
        assert!(text.contains("mma_i8 s2:sc["), "{text}");
        assert_eq!(baro_dsl::ir::Kernel::from_text(&text).as_ref(), Ok(&k));
    }
}
