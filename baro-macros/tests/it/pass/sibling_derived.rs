use baro_macros::kernel;

// Rows siblings derived from their m=1 kernels with `rows(..)`: the macro writes each one
// from the m=1 body and proves it like a hand-written `rows_of` kernel.

// Slots on grid axis 1 (one in a plain projection): the rows kernel runs tiles of 4 rows
// along that axis, the slot held at 0 and the stride of x held at 0.
#[kernel(grid = [(n + 7) / 8, n_slots], block = 256, verify(n = [1, 9], x_stride = [0, 3], n_slots = [1, 2]),
         rows(name = matvec_rows, tile = 4, axis = 1, row_stride(x = k, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(rows = [1, 3, 5])))]
pub fn matvec(x: &[f32], w: &[f32], ids: &[u32], y: &mut [f32], k: usize, n: usize, x_stride: usize, n_slots: usize) {
    let ob = group_id(0) * 8;
    let s = group_id(1);
    let xb = s * x_stride;
    for t in par_team(0..if n - ob < 8 { n - ob } else { 8 }, 32) {
        let o = ob + t;
        let wb = ((ids[s] as usize) * n + o) * k;
        y[s * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[xb + i] * w[wb + i]);
    }
}

// In place, one row per workgroup on a new grid axis, a position stepped by one per row
// (a `u32`, so the step is cast) and the row count named `m`.
#[kernel(grid = [n_heads], verify(n_heads = [1, 2]), rows(name = scale_rows, rows = m, row_stride(x = n_heads * 4), row_step(pos = 1)))]
pub fn scale(x: &mut [f32], table: &[f32], pos: u32, n_heads: usize) {
    let h = group_id(0);
    for i in par(0..4) {
        x[h * 4 + i] = x[h * 4 + i] * table[pos as usize];
    }
}

// The README's form: a new grid axis of row tiles (8 rows per workgroup, one after another).
#[kernel(grid = [n], rows(name = plain_rows, tile = 8, row_stride(x = k, y = n)))]
pub fn plain(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).strided().butterfly(), x[i] * w[o * k + i]);
}

#[test]
fn runs() {
    let (m1, rows) = (matvec(), matvec_rows());
    let sibling = rows.sibling.as_ref().expect("a derived kernel declares its sibling");
    assert_eq!(sibling.of, "matvec");
    assert_eq!(rows.params.len(), m1.params.len() + 1);
    assert_eq!(rows.block, Some(256));
    assert_eq!(rows.grid.len(), 2);
    // Proven while this file compiled; the check runs the same way at run time.
    baro_dsl::verify::check_sibling(&rows, &m1).expect("matvec_rows is matvec's sibling");
    baro_dsl::verify::check_sibling(&scale_rows(), &scale()).expect("scale_rows is scale's sibling");
    baro_dsl::verify::check_sibling(&plain_rows(), &plain()).expect("plain_rows is plain's sibling");
    assert_eq!(plain_rows().grid.len(), 2);
    assert_eq!(scale_rows().params.last().map(|p| p.name.as_str()), Some("m"));
}
