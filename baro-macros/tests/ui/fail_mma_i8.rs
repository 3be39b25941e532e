// The integer matrix step `mma_i8` is refused where it cannot be exact on every target: a
// step count with no bound when the kernel is compiled (its i32 sums could wrap), a step not
// run by a whole 32-lane wave, and tiles that are not workgroup arrays of the right types.
use baro_macros::kernel;

/// `steps` has no bound: 4096 steps of 32 products could reach 2^31.
#[kernel(grid = [1])]
pub fn unbounded_steps(y: &mut [i32], steps: usize) {
    let sa = shared::<u32, 512>();
    let sb = shared::<u32, 256>();
    let sc = shared::<i32, 128>();
    mma_i8(sc, 0, 8, sa, 0, 8, sb, 0, 8, steps);
    y[0] = sc[0];
}

/// A plain `par` loop's iterations are single lanes, not waves.
#[kernel(grid = [1])]
pub fn in_par_loop(y: &mut [i32]) {
    let sa = shared::<u32, 512>();
    let sb = shared::<u32, 256>();
    let sc = shared::<i32, 128>();
    for i in par(0..2) {
        mma_i8(sc, 0, 8, sa, 0, 8, sb, 0, 8, 1);
    }
    y[0] = sc[0];
}

/// The left tile must hold u32 words of four i8.
#[kernel(grid = [1])]
pub fn wrong_tile_type(y: &mut [i32]) {
    let sa = shared::<i32, 512>();
    let sb = shared::<u32, 256>();
    let sc = shared::<i32, 128>();
    mma_i8(sc, 0, 8, sa, 0, 8, sb, 0, 8, 1);
    y[0] = sc[0];
}

/// The step stores a tile: it is a statement, not a value.
#[kernel(grid = [1])]
pub fn as_value(y: &mut [i32]) {
    let sa = shared::<u32, 512>();
    let sb = shared::<u32, 256>();
    let sc = shared::<i32, 128>();
    y[0] = mma_i8(sc, 0, 8, sa, 0, 8, sb, 0, 8, 1);
}

fn main() {}
