use baro_macros::kernel;

// `#[when(..)]` names const parameters and the words instances give them; outside a generic
// kernel it has nothing to decide.
#[kernel(grid = [n], instances(scale_f32(FMT = F32), scale_f16(FMT = F16)))]
pub fn scale<const FMT: Format>(x: &mut [f32], n: usize) {
    let o = group_id(0);
    #[when(FMT == F64)]
    x[o] = x[o] * 2.0;
}

#[kernel(grid = [n])]
pub fn plain(x: &mut [f32], n: usize) {
    let o = group_id(0);
    #[when(FMT == F32)]
    x[o] = x[o] * 2.0;
}

fn main() {}
