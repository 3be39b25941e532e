use baro_macros::kernel;

// An instance must give every const parameter a value of its kind, and nothing else but
// `#[kernel]` keys.
#[kernel(grid = [n], instances(scale_a(R = 2), scale_b(R = Q4K, FMT = F32), scale_c(FMT = F32, R = 2, FTM = F32)))]
pub fn scale<const FMT: Format, const R: usize>(x: &mut [f32], n: usize) {
    let o = group_id(0);
    x[o] = x[o] * (R as f32);
}

fn main() {}
