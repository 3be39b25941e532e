use baro_macros::kernel;

// Slot s reads matrix ids[s].
#[kernel(grid = [n, n_slots])]
pub fn expert_matvec(x: &[f32], w: &[f32], ids: &[u32], y: &mut [f32], k: usize, n: usize, n_slots: usize) {
    let o = group_id(0);
    let s = group_id(1);
    let e = ids[s] as usize;
    y[s * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[s * k + i] * w[(e * n + o) * k + i]);
}

// Tiles of 4 rows read one matrix, ids[r0]: row r is `expert_matvec` on row r only where
// ids[r] == ids[r0], which the check makes a precondition of every launch.
#[kernel(grid = [n, (rows + 3) / 4], rows_of = expert_matvec, rows = rows, row_stride(x = k, ids = 1, y = n), verify(n_slots = [1], rows = [1, 4, 6]))]
pub fn expert_matvec_tiles(
    x: &[f32],
    w: &[f32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    n_slots: usize,
    rows: usize,
) {
    let o = group_id(0);
    let r0 = group_id(1) * 4;
    let e = ids[r0] as usize;
    for r in 0..4 {
        check!(ids[(r0 + r).min(rows - 1)] == ids[r0]);
    }
    for r in 0..4 {
        if r0 + r < rows {
            y[(r0 + r) * n + o] =
                sum!(i in 0..k, order = lanes(32).butterfly(), x[(r0 + r) * k + i] * w[(e * n + o) * k + i]);
        }
    }
}

#[test]
fn runs() {
    // The build proved the pair; the verifier run here must agree.
    baro_dsl::verify::check_sibling(&expert_matvec_tiles(), &expert_matvec())
        .expect("expert_matvec_tiles is expert_matvec's rows sibling");
}
