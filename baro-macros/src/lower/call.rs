//! Method calls and function calls: conversions (`to_f32`, `from_f32`, `to_bits`,
//! `from_bits`), `sqrt`/`abs`/`floor`/`max`/`min`, baro's math functions, `fma`,
//! the byte dots `dot4_i8`/`dot4_u8i8` and `group_id`.
//!
//! Each maps to exactly one IR node; nothing here rewrites or fuses arithmetic.

use super::stmt::strip;
use super::{Lower, Typed};
use crate::diag::{show, R};
use baro_dsl::ir::{BinOp, Dot4Kind, Expr, MathFn, ScalarType, UnOp};

impl Lower<'_> {
    pub(super) fn method(&mut self, m: &syn::ExprMethodCall, hint: Option<ScalarType>) -> R<Typed> {
        let name = m.method.to_string();
        if let Some(t) = &m.turbofish {
            return Err(self.fail(t, format!("`.{name}::<..>()`: expected no type arguments")));
        }
        let n_args = match name.as_str() {
            "to_f32" | "to_bits" | "sqrt" | "abs" | "floor" => 0,
            "max" | "min" => 1,
            _ => return Err(self.fail(m, super::expr::unsupported(&syn::Expr::MethodCall(m.clone())))),
        };
        if m.args.len() != n_args {
            return Err(self.fail(m, format!("`.{name}()` takes {n_args} argument(s), found {}", m.args.len())));
        }
        let recv_hint = if n_args == 1 { hint } else { None };
        let x = self.expr(&m.receiver, recv_hint)?;
        let t = x.ty;
        let bad = |what: &str| format!("`.{name}()` does not apply to {t}: expected {what}");
        match name.as_str() {
            "to_f32" => {
                if t == ScalarType::F32 || t == ScalarType::Bool {
                    return Err(self.fail(m, bad("f16, bf16 or an integer")));
                }
                Ok(Typed { e: Expr::cast(ScalarType::F32, x.e), ty: ScalarType::F32 })
            }
            "to_bits" => match t {
                ScalarType::F32 => Ok(Typed { e: Expr::bitcast(ScalarType::U32, x.e), ty: ScalarType::U32 }),
                ScalarType::F16 | ScalarType::BF16 => {
                    Err(self.fail(m, format!("`.to_bits()` of {t} would be a u16, which kernels do not have: expected f32 (convert with `.to_f32()` first)")))
                }
                _ => Err(self.fail(m, bad("f32"))),
            },
            "sqrt" | "floor" => {
                if t != ScalarType::F32 {
                    return Err(self.fail(m, bad("f32 (convert f16/bf16 with `.to_f32()`)")));
                }
                let op = if name == "sqrt" { UnOp::Sqrt } else { UnOp::Floor };
                Ok(Typed { e: Expr::un(op, x.e), ty: t })
            }
            "abs" => {
                if !(t == ScalarType::F32 || t.is_signed()) {
                    return Err(self.fail(m, bad("f32 or a signed integer")));
                }
                Ok(Typed { e: Expr::un(UnOp::Abs, x.e), ty: t })
            }
            _ => {
                let op = if name == "max" { BinOp::Max } else { BinOp::Min };
                let Some(arg) = m.args.first() else { return Err(super::Reported) };
                let y = self.expr(arg, Some(t))?;
                if y.ty != t {
                    return Err(self.fail(arg, format!("mismatched types: `.{name}()` of {t} and {}: expected one type", y.ty)));
                }
                if !(t == ScalarType::F32 || t.is_int()) {
                    return Err(self.fail(m, bad("f32 or an integer")));
                }
                Ok(Typed { e: Expr::bin(op, x.e, y.e), ty: t })
            }
        }
    }

    pub(super) fn call(&mut self, c: &syn::ExprCall) -> R<Typed> {
        let path = match &*c.func {
            syn::Expr::Path(p) if p.qself.is_none() => p,
            _ => return Err(self.fail(c, super::expr::unsupported(&syn::Expr::Call(c.clone())))),
        };
        let segs: Vec<String> = path.path.segments.iter().map(|s| s.ident.to_string()).collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let one_arg = |lw: &mut Self| -> R<&syn::Expr> {
            match c.args.first() {
                Some(a) if c.args.len() == 1 => Ok(a),
                _ => Err(lw.fail(c, format!("`{}` takes 1 argument, found {}", show(&c.func), c.args.len()))),
            }
        };
        match segs.as_slice() {
            ["group_id"] => {
                let arg = one_arg(self)?;
                let axis = match strip(arg) {
                    syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse::<u8>().ok(),
                    _ => None,
                };
                let axes = self.k.grid.len().max(1);
                match axis {
                    Some(a) if (a as usize) < axes => Ok(Typed { e: Expr::GroupId(a), ty: ScalarType::INDEX }),
                    _ => Err(self.fail(
                        arg,
                        format!(
                            "`group_id({})`: expected an axis literal below {axes}, the number of grid axes",
                            show(arg)
                        ),
                    )),
                }
            }
            [f] if MathFn::from_name(f).is_some() => {
                let func = MathFn::from_name(f).ok_or(super::Reported)?;
                let arg = one_arg(self)?;
                let x = self.f32_arg(arg, f)?;
                Ok(Typed { e: Expr::call(func, x), ty: ScalarType::F32 })
            }
            ["fma"] => {
                let [a, b, cc] = match c.args.iter().collect::<Vec<_>>().as_slice() {
                    [a, b, cc] => [*a, *b, *cc],
                    _ => return Err(self.fail(c, format!("`fma` takes 3 arguments (`fma(a, b, c)` is `a * b + c` rounded once), found {}; `fma(x, w)` is only the whole body of a `sum!`, which then accumulates `acc = fma(x_i, w_i, acc)`", c.args.len()))),
                };
                let a = self.f32_arg(a, "fma")?;
                let b = self.f32_arg(b, "fma")?;
                let cc = self.f32_arg(cc, "fma")?;
                Ok(Typed { e: Expr::fma(a, b, cc), ty: ScalarType::F32 })
            }
            [f] if Dot4Kind::from_name(f).is_some() => {
                let kind = Dot4Kind::from_name(f).ok_or(super::Reported)?;
                let usage = format!("`{f}(a, b, c)` (`c` plus the dot of the four bytes of the words `a` and `b`)");
                let [a, b, cc] = match c.args.iter().collect::<Vec<_>>().as_slice() {
                    [a, b, cc] => [*a, *b, *cc],
                    _ => return Err(self.fail(c, format!("{usage} takes 3 arguments, found {}", c.args.len()))),
                };
                let arg = |lw: &mut Self, e: &syn::Expr, want: ScalarType, which: &str| -> R<Expr> {
                    let x = lw.expr(e, Some(want))?;
                    if x.ty != want {
                        return Err(
                            lw.fail(e, format!("{usage}: its {which} argument has type {}, expected {want}", x.ty))
                        );
                    }
                    Ok(x.e)
                };
                let a = arg(self, a, ScalarType::U32, "first")?;
                let b = arg(self, b, ScalarType::U32, "second")?;
                let cc = arg(self, cc, ScalarType::I32, "third")?;
                Ok(Typed { e: Expr::dot4(kind, a, b, cc), ty: ScalarType::I32 })
            }
            ["f16", "from_f32"] | ["half", "f16", "from_f32"] | ["bf16", "from_f32"] | ["half", "bf16", "from_f32"] => {
                let to = if segs.contains(&"f16") { ScalarType::F16 } else { ScalarType::BF16 };
                let arg = one_arg(self)?;
                let x = self.f32_arg(arg, &show(&c.func))?;
                let func = &c.func;
                self.uses.push(quote::quote!(let _ = #func;));
                Ok(Typed { e: Expr::cast(to, x), ty: to })
            }
            ["f32", "from_bits"] => {
                let arg = one_arg(self)?;
                let x = self.expr(arg, Some(ScalarType::U32))?;
                if x.ty != ScalarType::U32 {
                    return Err(self.fail(arg, format!("`f32::from_bits` takes u32, found {}", x.ty)));
                }
                Ok(Typed { e: Expr::bitcast(ScalarType::F32, x.e), ty: ScalarType::F32 })
            }
            ["barrier"] => Err(self.fail(c, "`barrier()` is a statement: expected `barrier();` on its own")),
            ["mma_i8"] => Err(self.fail(
                c,
                "`mma_i8(..)` is a statement that stores its 16×8 tile into a workgroup array: expected `mma_i8(c, c_offset, c_stride, a, a_offset, a_stride, b, b_offset, b_stride, steps);` on its own",
            )),
            ["shared"] => Err(self.fail(
                c,
                "`shared::<T, N>()` allocates a workgroup array: expected it as `let name = shared::<T, N>();`",
            )),
            ["par"] => {
                Err(self.fail(c, "`par(0..n)` is only a `for` loop's range: expected `for i in par(0..n) { ... }`"))
            }
            _ => Err(self.fail(c, super::expr::unsupported(&syn::Expr::Call(c.clone())))),
        }
    }

    pub(super) fn f32_arg(&mut self, arg: &syn::Expr, func: &str) -> R<Expr> {
        let x = self.expr(arg, Some(ScalarType::F32))?;
        if x.ty != ScalarType::F32 {
            return Err(
                self.fail(arg, format!("`{func}` takes f32, found {}: convert with `.to_f32()` or `as f32`", x.ty))
            );
        }
        Ok(x.e)
    }
}
