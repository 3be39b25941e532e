// Every kernel has a typed argument struct: `foo_bar` → `FooBarArgs`, one field per parameter
// (`&[T]` a `&dyn ReadArg`, `&mut [T]` a `&mut Buffer`, scalars their type); a derived rows
// sibling has its own (its row count last), and `Rows` runs a rows kernel from the m = 1 struct.
use baro_dsl::runtime::{Buffer, KernelArgs, Rows};
use baro_macros::kernel;
use half::bf16;

#[kernel(grid = [1], rows(name = scale_rows, axis = 0, row_stride(x = n, y = n)))]
pub fn scale(x: &[f32], y: &mut [f32], n: usize, s: bf16, on: bool) {
    for i in par(0..n) {
        y[i] = if on { x[i] * s.to_f32() } else { x[i] };
    }
}

fn args<'a>(x: &'a Buffer, y: &'a mut Buffer) -> ScaleArgs<'a> {
    ScaleArgs { x, y, n: 4, s: bf16::from_f32(2.0), on: true }
}

fn rows_args<'a>(x: &'a Buffer, y: &'a mut Buffer) -> Rows<ScaleArgs<'a>> {
    Rows(args(x, y), 3)
}

#[test]
fn runs() {
    let _ = (args, rows_args);
    assert_eq!(<ScaleArgs<'_> as KernelArgs<'_>>::KERNEL, "scale");
    assert_eq!(<ScaleArgs<'_> as KernelArgs<'_>>::PARAMS, ["x", "y", "n", "s", "on"]);
    assert_eq!(<ScaleRowsArgs<'_> as KernelArgs<'_>>::PARAMS, ["x", "y", "n", "s", "on", "rows"]);
}
