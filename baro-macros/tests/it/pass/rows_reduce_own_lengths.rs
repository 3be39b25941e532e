use baro_macros::kernel;

// A causal weighted sum: output d of a row is Σ_t p[t] · v[t, d] over the row's own `len`
// positions, in sequence.
#[kernel(grid = [n])]
pub fn causal(p: &[f32], v: &[f32], y: &mut [f32], len: usize, n: usize, ps: usize) {
    let d = group_id(0);
    y[d] = sum!(t in 0..len, order = seq, p[t] * v[t * n + d]);
}

// Four rows per workgroup, row r attending to len + r positions, in one reduction over rows
// whose length reads the row: v[t, d] is loaded once per position for the four rows, and row
// j's partial takes p[t] · v[t, d] only while t < its own length, in increasing t, which is
// `causal`'s sum on that row.
#[kernel(grid = [n, (rows + 3) / 4], rows_of = causal, rows = rows, row_stride(p = ps, y = n), row_step(len = 1),
         verify(ps = [12], len = [1, 2, 5]))]
pub fn causal_rows4(p: &[f32], v: &[f32], y: &mut [f32], len: usize, n: usize, ps: usize, rows: usize) {
    let d = group_id(0);
    let r0 = group_id(1) * 4;
    let last = rows - 1;
    let ys = sum!(r in 0..4, t in 0..len + (r0 + r).min(last), order = seq,
                  p[(r0 + r).min(last) * ps + t] * v[t * n + d]);
    y[r0 * n + d] = ys[0];
    for r in 1..4 {
        if r0 + r < rows {
            y[(r0 + r) * n + d] = ys[r];
        }
    }
}

// The same with lanes: each row's lane l takes its elements l, l + 4, .. below its own length.
#[kernel(grid = [n])]
pub fn causal_lanes(p: &[f32], v: &[f32], y: &mut [f32], len: usize, n: usize, ps: usize) {
    let d = group_id(0);
    y[d] = sum!(t in 0..len, order = lanes(4).butterfly(), fma(p[t], v[t * n + d]));
}

#[kernel(grid = [n, (rows + 1) / 2], rows_of = causal_lanes, rows = rows, row_stride(p = ps, y = n), row_step(len = 1),
         verify(ps = [12], len = [1, 3, 6]))]
pub fn causal_lanes_rows2(p: &[f32], v: &[f32], y: &mut [f32], len: usize, n: usize, ps: usize, rows: usize) {
    let d = group_id(0);
    let r0 = group_id(1) * 2;
    let last = rows - 1;
    let [y0, y1] = sum!(r in 0..2, t in 0..len + (r0 + r).min(last), order = lanes(4).butterfly(),
                        fma(p[(r0 + r).min(last) * ps + t], v[t * n + d]));
    y[r0 * n + d] = y0;
    if r0 + 1 < rows {
        y[(r0 + 1) * n + d] = y1;
    }
}

#[test]
fn runs() {
    // Each rows kernel holds one reduction over rows, and it expands (the rows sharing one
    // loop below the shortest length, then each guarded by its own).
    for k in [causal_rows4(), causal_lanes_rows2()] {
        assert!(k.body.iter().any(|s| matches!(s, baro_dsl::ir::Stmt::LetRows { .. })), "{}", k.name);
        let x = baro_dsl::lanes::expand(&k).unwrap().to_string();
        assert!(x.contains("shortest") && x.contains("longest"), "{x}");
    }
}
