//! The type of an expression, computed from the kernel's declarations.
//!
//! Lowerings and the symbolic executor call `type_of` on verified IR. It reports a type
//! error as a `TypeError` instead of panicking, so the verifier can use it too.

use super::kernel::{BinOp, Expr, Kernel, ParamKind, UnOp};
use super::types::ScalarType;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TypeError(pub String);

impl Kernel {
    /// The type of `e`, or what is wrong with it.
    pub fn type_of(&self, e: &Expr) -> Result<ScalarType, TypeError> {
        let err = |s: String| Err(TypeError(s));
        match e {
            Expr::Const(c) => Ok(c.ty),
            Expr::Var(v) => match self.vars.get(v.index()) {
                Some(d) => Ok(d.ty),
                None => err(format!("variable {v} is not declared (the kernel has {} variables)", self.vars.len())),
            },
            Expr::Param(p) => match self.params.get(p.index()).map(|x| &x.kind) {
                Some(ParamKind::Scalar(t)) => Ok(*t),
                Some(ParamKind::Buffer { .. }) => {
                    err(format!("buffer `{}` used as a scalar value", self.params[p.index()].name))
                }
                None => err(format!("parameter {p} does not exist (the kernel has {})", self.params.len())),
            },
            Expr::GroupId(axis) => {
                if *axis < 3 {
                    Ok(ScalarType::INDEX)
                } else {
                    err(format!("group id axis {axis}: expected 0, 1 or 2"))
                }
            }
            Expr::Load { buf, index } => {
                let it = self.type_of(index)?;
                if !it.is_int() {
                    return err(format!("index into `{}` has type {it}: expected an integer", self.buf_name(*buf)));
                }
                match self.buf_elem(*buf) {
                    Some(t) => Ok(t),
                    None => err(format!("load from {buf:?}, which is not a buffer")),
                }
            }
            Expr::Unary { op, arg } => {
                let t = self.type_of(arg)?;
                let ok = match op {
                    UnOp::Neg => t.is_float() || t.is_signed(),
                    UnOp::Not => t.is_int() || t == ScalarType::Bool,
                    UnOp::Abs => t.is_float() || t.is_signed(),
                    UnOp::Sqrt | UnOp::Floor => t.is_float(),
                };
                if ok {
                    Ok(t)
                } else {
                    err(format!("`{}` does not apply to {t}", op.name()))
                }
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.type_of(lhs)?;
                let b = self.type_of(rhs)?;
                if a != b {
                    return err(format!("`{}` of {a} and {b}: both operands must have one type", op.name()));
                }
                let ok = match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => {
                        a.is_float() || a.is_int()
                    }
                    BinOp::Rem | BinOp::Shl | BinOp::Shr => a.is_int(),
                    BinOp::And | BinOp::Or | BinOp::Xor => a.is_int() || a == ScalarType::Bool,
                    BinOp::Eq | BinOp::Ne => true,
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => a != ScalarType::Bool,
                };
                if !ok {
                    return err(format!("`{}` does not apply to {a}", op.name()));
                }
                Ok(if op.is_comparison() { ScalarType::Bool } else { a })
            }
            Expr::Select { cond, then, els } => {
                let c = self.type_of(cond)?;
                if c != ScalarType::Bool {
                    return err(format!("select condition has type {c}: expected bool"));
                }
                let a = self.type_of(then)?;
                let b = self.type_of(els)?;
                if a != b {
                    return err(format!("select arms have types {a} and {b}: expected one type"));
                }
                Ok(a)
            }
            Expr::Cast { to, arg } => {
                self.type_of(arg)?;
                Ok(*to)
            }
            Expr::Bitcast { to, arg } => {
                let t = self.type_of(arg)?;
                if t.bits() != to.bits() || t == ScalarType::Bool || *to == ScalarType::Bool {
                    return err(format!("bitcast from {t} to {to}: expected two non-bool types of one width"));
                }
                Ok(*to)
            }
            Expr::Call { func, arg } => {
                let t = self.type_of(arg)?;
                if t != ScalarType::F32 {
                    return err(format!("`{}` takes f32, found {t}", func.name()));
                }
                Ok(ScalarType::F32)
            }
            Expr::Fma { a, b, c } => {
                for (x, which) in [(a, "first"), (b, "second"), (c, "third")] {
                    let t = self.type_of(x)?;
                    if t != ScalarType::F32 {
                        return err(format!("`fma`'s {which} operand has type {t}: expected f32"));
                    }
                }
                Ok(ScalarType::F32)
            }
            Expr::Dot4 { kind, a, b, c } => {
                for (x, which, want) in
                    [(a, "first", ScalarType::U32), (b, "second", ScalarType::U32), (c, "third", ScalarType::I32)]
                {
                    let t = self.type_of(x)?;
                    if t != want {
                        return err(format!("`{}`'s {which} operand has type {t}: expected {want}", kind.name()));
                    }
                }
                Ok(ScalarType::I32)
            }
            Expr::Let { var, value, body } => {
                let t = self.type_of(value)?;
                let d = self.type_of(&Expr::Var(*var))?;
                if t != d {
                    return err(format!("let {var} declared {d}, bound to a {t}"));
                }
                self.type_of(body)
            }
            Expr::Reduce(r) => {
                let lt = self.type_of(&r.len)?;
                if !lt.is_int() {
                    return err(format!("reduction length has type {lt}: expected an integer"));
                }
                let bt = self.type_of(&r.body)?;
                if bt != r.ty {
                    return err(format!("reduction declared {} but its body is {bt}", r.ty));
                }
                Ok(r.ty)
            }
            Expr::ShuffleXor { value, .. } => self.type_of(value),
        }
    }
}
