// Eight outputs per 256-thread workgroup, one 32-lane team each; the tail workgroup runs
// fewer teams. Same order as one output per workgroup, so the rows sibling of the one-output
// kernel is still proven against it.
use baro_macros::kernel;

#[kernel(grid = [(n + 7) / 8], block = 256, verify(n = [1, 7, 8, 9, 17]))]
pub fn matvec8(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let base = group_id(0) * 8;
    for t in par_team(0..if n - base < 8 { n - base } else { 8 }, 32) {
        let o = base + t;
        y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
    }
}

#[test]
fn runs() {
    let k = matvec8();
    assert_eq!(k.block, Some(256));
    let text = k.to_string();
    assert!(text.contains("team 32"), "the text form names the team:\n{text}");
    assert_eq!(baro_dsl::ir::Kernel::from_text(&text).as_ref(), Ok(&k));
}
