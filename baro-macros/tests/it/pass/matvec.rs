// The matvec pair from the docs: the rows sibling is checked against `matvec` at build time,
// once in the same module and once from a submodule through `super::`.
use baro_macros::kernel;
use half::bf16;

#[kernel(grid = [n])]
pub fn matvec(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i].to_f32());
}

#[kernel(grid = [n], rows_of = matvec, rows = rows, row_stride(x = k, y = n))]
pub fn matvec_rows(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[r * k + i] * w[o * k + i].to_f32());
    }
}

mod batched {
    use baro_macros::kernel;
    use half::bf16;

    /// Rows on the second grid axis, one workgroup per (output, row).
    #[kernel(grid = [n, rows], rows_of = super::matvec, rows = rows, row_stride(x = k, y = n))]
    pub fn matvec_rows_2d(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize, rows: usize) {
        let o = group_id(0);
        let r = group_id(1);
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).strided().butterfly(), x[r * k + i] * w[o * k + i].to_f32());
    }
}

#[test]
fn runs() {
    let m1 = matvec();
    let rows = matvec_rows();
    assert_eq!(m1.name, "matvec");
    assert_eq!(rows.sibling.as_ref().map(|s| s.of.as_str()), Some("matvec"));
    assert_eq!(batched::matvec_rows_2d().grid.len(), 2);
    baro_dsl::verify::check_sibling(&rows, &m1).expect("rows sibling verifies at run time too");
}
