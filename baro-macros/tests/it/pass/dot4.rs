// `dot4_i8(a, b, c)` / `dot4_u8i8(a, b, c)`: `c` plus the dot of the four bytes of the words
// `a` and `b` (i8·i8, or u8·i8), wrapping in i32 like PTX `dp4a`.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot4_words(a: &[u32], b: &[u32], c: &[i32], y: &mut [i32], z: &mut [i32], n: usize) {
    let o = group_id(0);
    y[o] = dot4_i8(a[o], b[o], c[o]);
    z[o] = dot4_u8i8(a[o], b[o], 0);
}

#[test]
fn runs() {
    let k = dot4_words();
    baro_dsl::verify::check_wellformed(&k).expect("well formed");
    let text = k.to_string();
    assert!(text.contains("dot4_i8(") && text.contains("dot4_u8i8("), "{text}");
}
