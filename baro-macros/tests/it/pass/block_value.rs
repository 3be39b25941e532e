// A block used as a value: `let`s scoped to the block, then the value. Inside a lane
// reduction's body it is one expression per term, so the rows sibling is still proven.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn scaled(x: &[f32], w: &[u32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), {
        let bits = w[o * k + i];
        let scale = ((bits >> 16) as f32) * 0.0625;
        x[i] * (((bits & 0xffff) as f32) - scale)
    });
}

#[kernel(grid = [n], rows_of = scaled, rows = rows, row_stride(x = k, y = n), verify(k = [1, 31, 70]))]
pub fn scaled_rows(x: &[f32], w: &[u32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), {
            let bits = w[o * k + i];
            let scale = ((bits >> 16) as f32) * 0.0625;
            x[r * k + i] * (((bits & 0xffff) as f32) - scale)
        });
    }
}

#[test]
fn runs() {
    let k = scaled_rows();
    let text = k.to_string();
    assert_eq!(text.matches("let(v").count(), 2, "the block's lets are expression lets:\n{text}");
    assert_eq!(baro_dsl::ir::Kernel::from_text(&text).as_ref(), Ok(&k));
    let _ = scaled();
}
