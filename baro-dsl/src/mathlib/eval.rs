//! The plain-Rust interpretation of `Arith`: the twins of the IR expansion.
//!
//! Every operation here must be the single IEEE (or wrapping integer) operation its IR
//! counterpart lowers to; never call libm beyond `sqrt` and `floor` (both exact).

use super::algo::Arith;

pub(crate) struct Eval;

impl Arith for Eval {
    type F = f32;
    type I = i32;
    type B = bool;
    fn fc(&self, v: f32) -> f32 {
        v
    }
    fn ic(&self, v: i32) -> i32 {
        v
    }
    fn share_f(&self, v: f32) -> f32 {
        v
    }
    fn share_i(&self, v: i32) -> i32 {
        v
    }
    fn add(&self, a: f32, b: f32) -> f32 {
        a + b
    }
    fn sub(&self, a: f32, b: f32) -> f32 {
        a - b
    }
    fn mul(&self, a: f32, b: f32) -> f32 {
        a * b
    }
    fn div(&self, a: f32, b: f32) -> f32 {
        a / b
    }
    fn neg(&self, a: f32) -> f32 {
        -a
    }
    fn sqrt(&self, a: f32) -> f32 {
        a.sqrt()
    }
    fn floor(&self, a: f32) -> f32 {
        a.floor()
    }
    fn lt(&self, a: f32, b: f32) -> bool {
        a < b
    }
    fn gt(&self, a: f32, b: f32) -> bool {
        a > b
    }
    fn feq(&self, a: f32, b: f32) -> bool {
        a == b
    }
    fn fne(&self, a: f32, b: f32) -> bool {
        a != b
    }
    fn sel(&self, c: bool, a: f32, b: f32) -> f32 {
        if c {
            a
        } else {
            b
        }
    }
    fn isel(&self, c: bool, a: i32, b: i32) -> i32 {
        if c {
            a
        } else {
            b
        }
    }
    fn iadd(&self, a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    fn isub(&self, a: i32, b: i32) -> i32 {
        a.wrapping_sub(b)
    }
    fn iand(&self, a: i32, b: i32) -> i32 {
        a & b
    }
    fn ior(&self, a: i32, b: i32) -> i32 {
        a | b
    }
    fn ishl(&self, a: i32, n: u32) -> i32 {
        a.wrapping_shl(n)
    }
    fn ishr(&self, a: i32, n: u32) -> i32 {
        a.wrapping_shr(n)
    }
    fn to_int(&self, a: f32) -> i32 {
        a as i32
    }
    fn to_float(&self, a: i32) -> f32 {
        a as f32
    }
    fn bits(&self, a: f32) -> i32 {
        a.to_bits() as i32
    }
    fn f32_from_bits(&self, a: i32) -> f32 {
        f32::from_bits(a as u32)
    }
}
