// Helper functions inside kernels: `#[kernel_helper]` once, `uses = [..]` where called. The
// calls are inlined as value blocks, so the rows sibling is proven against the m=1 kernel as if
// both had been written out, and the helper stays a Rust function for host code.
use baro_macros::{kernel, kernel_helper};

/// The f16 at byte offset `byte` of a little-endian word buffer, widened exactly.
#[kernel_helper]
pub fn f16_at(w: &[u32], byte: usize) -> f32 {
    let h = (w[byte / 4] >> ((byte % 4 * 8) as u32)) & 65535;
    f32::from_bits(
        ((h & 0x8000) << 16)
            | (if (h & 0x7c00) == 0 {
                (((h & 0x3ff) as f32) * 5.9604645e-8).to_bits()
            } else {
                ((h & 0x7fff) << 13) + (if (h & 0x7c00) == 0x7c00 { 0x70000000 } else { 0x38000000 })
            }),
    )
}

/// A helper calling a helper (listed after it in `uses`).
#[kernel_helper]
pub fn scaled_f16(w: &[u32], byte: usize, s: f32) -> f32 {
    let h = f16_at(w, byte);
    h * s
}

#[kernel(grid = [n], uses = [f16_at, scaled_f16])]
pub fn halfdot(x: &[f32], w: &[u32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * scaled_f16(w, (o * k + i) * 2, 0.5));
}

#[kernel(grid = [n], rows_of = halfdot, rows = rows, row_stride(x = k, y = n), verify(k = [1, 31, 70]), uses = [f16_at, scaled_f16])]
pub fn halfdot_rows(x: &[f32], w: &[u32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] =
            sum!(i in 0..k, order = lanes(32).butterfly(), x[r * k + i] * scaled_f16(w, (o * k + i) * 2, 0.5));
    }
}

#[test]
fn runs() {
    let k = halfdot();
    let text = k.to_string();
    assert!(text.contains("let("), "the helper's body is inlined as expression lets:\n{text}");
    assert_eq!(baro_dsl::ir::Kernel::from_text(&text).as_ref(), Ok(&k));
    let _ = halfdot_rows();
    // The helper is still a Rust function: 0x3c00 (1.0) in the high half of word 0.
    assert_eq!(f16_at(&[0x3c00_0000], 2), 1.0);
    assert_eq!(scaled_f16(&[0x0000_3c00], 0, 0.5), 0.5);
}
