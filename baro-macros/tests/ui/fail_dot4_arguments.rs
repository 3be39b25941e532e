use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot4_two_arguments(a: &[u32], b: &[u32], y: &mut [i32], n: usize) {
    let o = group_id(0);
    y[o] = dot4_i8(a[o], b[o]);
}

#[kernel(grid = [n])]
pub fn dot4_byte_operand(a: &[i8], b: &[u32], y: &mut [i32], n: usize) {
    let o = group_id(0);
    y[o] = dot4_u8i8(a[o], b[o], 0);
}

fn main() {}
