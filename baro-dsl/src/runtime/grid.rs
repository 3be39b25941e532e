//! Grid evaluation: the workgroup counts of a launch, from a kernel's grid expressions and
//! the launch's scalar arguments. Every runtime (host, CUDA, HIP) calls this one function, so
//! a grid means the same thing on every target.
//!
//! Evaluation is exact integer arithmetic (i128, checked); it never panics and never wraps.

use super::error::LaunchError;
use crate::ir::{BinOp, Expr, Kernel, ParamKind};

/// Workgroups per axis (x, y, z), each at least 1 (missing axes are 1), their product within
/// u64. `scalars[i]` holds the canonical bits of parameter `i` (ignored for buffers).
pub fn grid_size(k: &Kernel, scalars: &[u64]) -> Result<[u64; 3], LaunchError> {
    let mut g = [1u64; 3];
    if k.grid.len() > 3 {
        return Err(LaunchError::Grid {
            kernel: k.name.clone(),
            axis: 3,
            message: format!("expected 1 to 3 grid axes, found {}", k.grid.len()),
        });
    }
    for (axis, e) in k.grid.iter().enumerate() {
        let err = |message: String| LaunchError::Grid { kernel: k.name.clone(), axis, message };
        let v = eval(k, e, scalars).map_err(err)?;
        if v <= 0 {
            return Err(err(format!("expected at least 1 workgroup, found {v}")));
        }
        g[axis] = u64::try_from(v).map_err(|_| err(format!("{v} workgroups overflow u64")))?;
    }
    if g[0].checked_mul(g[1]).and_then(|p| p.checked_mul(g[2])).is_none() {
        return Err(LaunchError::Grid {
            kernel: k.name.clone(),
            axis: 2,
            message: format!("{} x {} x {} workgroups overflow u64", g[0], g[1], g[2]),
        });
    }
    Ok(g)
}

/// Checks a grid against a device's per-axis limits (CUDA: 2^31-1, 65535, 65535).
pub fn check_limits(k: &Kernel, grid: [u64; 3], limits: [u64; 3]) -> Result<[u32; 3], LaunchError> {
    let mut out = [1u32; 3];
    for axis in 0..3 {
        if grid[axis] > limits[axis] {
            return Err(LaunchError::Grid {
                kernel: k.name.clone(),
                axis,
                message: format!("expected at most {} workgroups on this device, found {}", limits[axis], grid[axis]),
            });
        }
        out[axis] = u32::try_from(grid[axis]).map_err(|_| LaunchError::Grid {
            kernel: k.name.clone(),
            axis,
            message: format!("expected at most {} workgroups, found {}", u32::MAX, grid[axis]),
        })?;
    }
    Ok(out)
}

/// Evaluates a grid expression over scalar parameters, in exact integer arithmetic.
fn eval(k: &Kernel, e: &Expr, scalars: &[u64]) -> Result<i128, String> {
    let ovf = || "the grid size overflows".to_string();
    Ok(match e {
        Expr::Const(c) if c.ty.is_int() => {
            if c.ty.is_signed() {
                c.bits as i64 as i128
            } else {
                c.bits as i128
            }
        }
        Expr::Param(p) => match k.params.get(p.index()).map(|x| &x.kind) {
            Some(ParamKind::Scalar(t)) if t.is_int() => {
                let b = scalars.get(p.index()).copied().unwrap_or(0);
                if t.is_signed() {
                    b as i64 as i128
                } else {
                    b as i128
                }
            }
            _ => return Err(format!("parameter {p} is not an integer scalar")),
        },
        Expr::Cast { to, arg } if to.is_int() => eval(k, arg, scalars)?,
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (eval(k, lhs, scalars)?, eval(k, rhs, scalars)?);
            match op {
                BinOp::Add => a.checked_add(b).ok_or_else(ovf)?,
                BinOp::Sub => a.checked_sub(b).ok_or_else(ovf)?,
                BinOp::Mul => a.checked_mul(b).ok_or_else(ovf)?,
                BinOp::Div => a.checked_div(b).ok_or("division by zero in the grid size")?,
                BinOp::Rem => a.checked_rem(b).ok_or("remainder by zero in the grid size")?,
                BinOp::Min => a.min(b),
                BinOp::Max => a.max(b),
                BinOp::Eq => i128::from(a == b),
                BinOp::Ne => i128::from(a != b),
                BinOp::Lt => i128::from(a < b),
                BinOp::Le => i128::from(a <= b),
                BinOp::Gt => i128::from(a > b),
                BinOp::Ge => i128::from(a >= b),
                _ => return Err(format!("`{}` is not supported in a grid size", op.name())),
            }
        }
        // A launch shape chosen by size (`if n >= 4096 { (n + 15) / 16 } else { (n + 7) / 8 }`).
        Expr::Select { cond, then, els } => {
            if eval(k, cond, scalars)? != 0 {
                eval(k, then, scalars)?
            } else {
                eval(k, els, scalars)?
            }
        }
        other => return Err(format!("expected an integer expression over scalar parameters, found {other:?}")),
    })
}
