//! `#[kernel]`: the front end of baro. A function written in a small Rust subset becomes a
//! function returning its `baro_dsl::ir::Kernel`, built and checked while the crate compiles;
//! a rows kernel declared `rows_of` an m=1 kernel, or derived from one with `rows(..)`, is
//! checked against it at build time.
//!
//! The macro never panics on user input: every problem is a compile error at the user's
//! tokens, all of them are reported together, and a failing kernel still leaves a stub with
//! the same signature so the rest of the crate type-checks.

mod args;
mod attr;
mod derive;
mod diag;
mod emit;
mod expand;
mod generic;
mod helpers;
mod lower;
mod sibling;
mod signature;
mod verifier;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Turns a kernel written in baro's Rust subset into `fn name() -> baro_dsl::ir::Kernel`.
///
/// ```text
/// #[kernel(grid = [n])]
/// pub fn matvec(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize) {
///     let o = group_id(0);
///     y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i].to_f32());
/// }
///
/// #[kernel(grid = [n], rows_of = matvec, rows = rows, row_stride(x = k, y = n))]
/// pub fn matvec_rows(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize, rows: usize) { .. }
/// ```
///
/// Attribute keys: `grid = [e0, e1?, e2?]` (workgroups per axis, over scalar parameters;
/// required), `block = N` (threads per workgroup), `rows_of = path` (the m=1 kernel),
/// `rows = param` (the row count), `row_stride(buf = expr, ..)` (elements between rows of a
/// per-row buffer; other buffers are shared by all rows), `row_step(param = expr, ..)` (row r
/// sees `param + r·expr`), `carry(buf, ..)` (state carried from row to row),
/// `verify(param = [v, ..], ..)` (shapes the verifier tries), `uses = [helper, ..]` (the
/// `#[kernel_helper]` functions the body calls), `instances(..)` (below).
///
/// On an m=1 kernel, `rows(name = ident, tile = T, axis = A, row_stride(..), row_step(..),
/// fix(param = v, ..), verify(..))` also emits its rows sibling, written from the m=1 body
/// (row r runs it with each per-row buffer offset by r·stride, stepped parameters advanced,
/// fixed parameters held at their value; T rows per workgroup along grid axis A) and proven
/// exactly like a hand-written `rows_of` kernel:
///
/// ```text
/// #[kernel(grid = [n, n_slots], rows(name = matvec_rows, tile = 8, axis = 1,
///          row_stride(x = k, y = n), fix(n_slots = 1)))]
/// pub fn matvec(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize, n_slots: usize) { .. }
/// ```
///
/// A generic kernel is one definition made into several kernels: `const` parameters, and
/// `instances(name(P = value, .., key .., ..), ..)` naming the kernels to make, each with a
/// value for every parameter and, if it needs them, `#[kernel]` keys of its own that replace the
/// definition's key of the same name (`rows_of`, `row_stride`, `verify`, `grid`, `rows(..)`..):
///
/// ```text
/// #[kernel(grid = [n, (rows + 1) / 2], rows = rows, row_stride(x = k, y = n),
///          instances(dot_rows2(FMT = F32, R = 2, rows_of = dot),
///                    dot_scaled_rows4(FMT = SCALED, R = 4, rows_of = dot_scaled, grid = [n, (rows + 3) / 4])))]
/// pub fn dot_tile<const FMT: Format, const R: usize>(x: &[f32], w: &[f32],
///         #[when(FMT == SCALED)] s: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
///     let ys = sum!(r in 0..R, i in 0..k, order = lanes(32).butterfly(), ..);
///     #[when(FMT == SCALED)]
///     let sc = s[group_id(0)];
///     ..
/// }
/// ```
///
/// A parameter typed with an integer type takes an integer literal, `bool` takes `true` or
/// `false`, any other type (`Format`) a word (an identifier). Each instance is the definition
/// with every parameter replaced by its value (so `shared::<T, N>()`, `sum!(r in 0..R, ..)` and
/// loops over `0..R` see literals) and every statement or parameter marked `#[when(cond)]`
/// kept where `cond` holds and dropped elsewhere (`cond`: parameters, literals, the words the
/// instances give, `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&`, `||`, `!`); it is then expanded,
/// verified and proven as if written out by hand, as `fn name() -> Kernel`. The definition's
/// own name makes no kernel.
///
/// Parameters: `&[T]`, `&mut [T]` or `T` with T one of f32, f16, bf16, i8, u8, i32, u32,
/// i64, u64, usize, bool.
///
/// Beside `fn matvec() -> Kernel` the macro writes `MatvecArgs<'a>` (the kernel's name in
/// CamelCase plus `Args`), its typed launch arguments where baro-dsl's runtime is built: one
/// public field per parameter, named as the parameter, `&[T]` a `&'a dyn ReadArg` (a `Buffer`
/// or its `words()`), `&mut [T]` a `&'a mut Buffer`, a scalar its Rust type, converted to the
/// positional list in declaration order by `baro_dsl::runtime::KernelArgs`:
///
/// ```text
/// device.launch_args(stream, &kernel, MatvecArgs { x: &x, w: &w, y: &mut y, k, n })?;
/// device.launch_args(stream, &rows_kernel, Rows(MatvecArgs { .. }, rows))?; // + the row count
/// ```
///
/// Statements: `let [mut] x [: T] = e;`, `x = e;`, `x op= e;`, `buf[i] = e;`,
/// `for i in a..b {}`, `for i in (a..b).step_by(s) {}`, `for i in par(0..n) {}` (iterations
/// independent, spread over lanes, barrier at the end), `if c {} else {}`, `barrier();`,
/// `let tile = shared::<T, N>();` (a workgroup array).
///
/// Expressions: literals (unsuffixed integers take the other operand's type, else `usize`;
/// unsuffixed floats are f32), names, `buf[i]`, `-`, `!`, arithmetic, bitwise, shifts,
/// comparisons, `&&`/`||` (both sides are always evaluated), `e as T`, `x.to_f32()`,
/// `bf16::from_f32(x)`, `f16::from_f32(x)`, `x.to_bits()`, `f32::from_bits(b)`, `x.sqrt()`,
/// `x.abs()`, `x.floor()`, `x.max(y)`, `x.min(y)`, `exp`, `log`, `sigmoid`, `silu`,
/// `softplus`, `rsqrt`, `fma(a, b, c)` (f32 `a * b + c` rounded once; `a * b + c` itself
/// is never fused), `if c { a } else { b }` (a select: both arms evaluated),
/// `group_id(axis)`, and the reductions `sum!`/`max!`/`min!(i in 0..len, order = ORDER, body)`
/// with ORDER one of `seq`, `lanes(N).butterfly()`, `lanes(N).strided().butterfly()`,
/// `lanes(N).pairwise()`, `lanes(N).seq()`, `chunked(C)`, `chunked(C).pairwise()`,
/// `blocked(B, ORDER)`. `sum!(i in 0..len, order = ORDER, fma(x, w))` (f32, two arguments)
/// is a fused sum: every partial of the order accumulates `acc = fma(x_i, w_i, acc)`, and
/// the partials are added as the order says.
///
/// A float accumulation in a loop (`acc += x` with `acc` declared outside the loop) is an
/// error: its order would be undeclared. `acc = acc.max(x)` is allowed (exact for non-NaN).
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::kernel(attr.into(), item.into()).into()
}

/// The build-time sibling check behind `rows_of` (expanded from the hidden macro each
/// kernel defines); not for direct use.
#[doc(hidden)]
#[proc_macro]
pub fn __check_sibling(input: TokenStream) -> TokenStream {
    sibling::check(input.into()).into()
}

/// A function kernels may call: `#[kernel_helper] fn f16_bits(h: u32) -> f32 { let .. ; value }`,
/// used by `#[kernel(uses = [f16_bits], ..)]`. Each call is inlined as a value block (the
/// parameters bound by `let`, a buffer parameter replaced by the buffer named), so the kernel
/// is verified and lowered as if written out. Its body is `let` statements and a value (no
/// reductions, no stores); it remains an ordinary Rust function for host code. Define it
/// before the kernels that use it (its tokens travel in a `macro_rules!`).
#[proc_macro_attribute]
pub fn kernel_helper(attr: TokenStream, item: TokenStream) -> TokenStream {
    helpers::definition(attr.into(), item.into()).into()
}

/// The last step of `uses = [..]`: a kernel with its helpers' functions; not for direct use.
#[doc(hidden)]
#[proc_macro]
pub fn __kernel_with_helpers(input: TokenStream) -> TokenStream {
    helpers::with_helpers(input.into()).into()
}
