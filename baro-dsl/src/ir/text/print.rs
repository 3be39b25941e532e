//! Prints a kernel in the text form the parser reads back (grammar in `text/mod.rs`).
//!
//! The printer writes every field of the kernel and nothing else; it never checks or fixes
//! the kernel, so an ill-formed kernel prints as it is (undeclared ids print bare).

use std::fmt::{self, Formatter};

use crate::ir::kernel::{Access, Buf, Expr, Kernel, ParamId, ParamKind, Reduce, Stmt, Tile, Var};

const INDENT: &str = "    ";

pub(super) fn kernel(k: &Kernel, f: &mut Formatter<'_>) -> fmt::Result {
    let p = Printer { k };
    writeln!(f, "kernel {} {{", k.name)?;
    for (i, param) in k.params.iter().enumerate() {
        let id = ParamId(i as u32);
        match &param.kind {
            ParamKind::Buffer { elem, access: Access::Read } => {
                writeln!(f, "{INDENT}param {id} {}: &[{elem}]", param.name)?
            }
            ParamKind::Buffer { elem, access: Access::ReadWrite } => {
                writeln!(f, "{INDENT}param {id} {}: &mut [{elem}]", param.name)?
            }
            ParamKind::Scalar(t) => writeln!(f, "{INDENT}param {id} {}: {t}", param.name)?,
        }
    }
    for (i, s) in k.shared.iter().enumerate() {
        writeln!(f, "{INDENT}shared s{i} {}: [{}; {}]", s.name, s.elem, s.len)?;
    }
    for (i, v) in k.vars.iter().enumerate() {
        let m = if v.mutable { "mut " } else { "" };
        writeln!(f, "{INDENT}var v{i} {}: {m}{}", v.name, v.ty)?;
    }
    write!(f, "{INDENT}grid [")?;
    for (i, g) in k.grid.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        p.expr(g, f)?;
    }
    writeln!(f, "]")?;
    if let Some(b) = k.block {
        writeln!(f, "{INDENT}block {b}")?;
    }
    if let Some(g) = k.min_groups {
        writeln!(f, "{INDENT}min_groups {g}")?;
    }
    if let Some(s) = &k.sibling {
        write!(f, "{INDENT}sibling of {} rows ", s.of)?;
        p.param(s.rows, f)?;
        f.write_str(" strides [")?;
        for (i, (buf, stride)) in s.row_strides.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            p.param(*buf, f)?;
            f.write_str(" = ")?;
            p.expr(stride, f)?;
        }
        f.write_str("]")?;
        if !s.row_steps.is_empty() {
            f.write_str(" steps [")?;
            for (i, (scalar, step)) in s.row_steps.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                p.param(*scalar, f)?;
                f.write_str(" = ")?;
                p.expr(step, f)?;
            }
            f.write_str("]")?;
        }
        if !s.carried.is_empty() {
            f.write_str(" carry [")?;
            for (i, buf) in s.carried.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                p.param(*buf, f)?;
            }
            f.write_str("]")?;
        }
        writeln!(f)?;
    }
    for (param, values) in &k.verify_shapes.values {
        write!(f, "{INDENT}verify ")?;
        p.param(*param, f)?;
        let values: Vec<String> = values.iter().map(u64::to_string).collect();
        writeln!(f, " in [{}]", values.join(", "))?;
    }
    write!(f, "{INDENT}body")?;
    p.block(&k.body, 1, f)?;
    writeln!(f)?;
    writeln!(f, "}}")
}

/// Prints one expression or statement with `k`'s names (for diagnostics and listings).
pub(super) fn expr_text(k: &Kernel, e: &Expr) -> String {
    Text(|f: &mut Formatter<'_>| Printer { k }.expr(e, f)).to_string()
}

pub(super) fn stmt_text(k: &Kernel, s: &Stmt) -> String {
    Text(|f: &mut Formatter<'_>| Printer { k }.stmt(s, 0, f)).to_string()
}

struct Text<F: Fn(&mut Formatter<'_>) -> fmt::Result>(F);

impl<F: Fn(&mut Formatter<'_>) -> fmt::Result> fmt::Display for Text<F> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        (self.0)(f)
    }
}

struct Printer<'k> {
    k: &'k Kernel,
}

impl Printer<'_> {
    /// Writes ` {`, the statements one per line at `depth + 1`, and `}` at `depth`.
    fn block(&self, stmts: &[Stmt], depth: usize, f: &mut Formatter<'_>) -> fmt::Result {
        if stmts.is_empty() {
            return f.write_str(" {}");
        }
        f.write_str(" {\n")?;
        for s in stmts {
            self.stmt(s, depth + 1, f)?;
            f.write_str("\n")?;
        }
        write!(f, "{}}}", INDENT.repeat(depth))
    }

    fn stmt(&self, s: &Stmt, depth: usize, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(&INDENT.repeat(depth))?;
        match s {
            Stmt::Let { var, value } => {
                f.write_str("let ")?;
                self.var(*var, f)?;
                f.write_str(" = ")?;
                self.expr(value, f)
            }
            Stmt::LetRows { vars, row, value } => {
                f.write_str("let ")?;
                self.var_list(vars, f)?;
                f.write_str(" = rows(")?;
                self.var(*row, f)?;
                f.write_str(", ")?;
                self.expr(value, f)?;
                f.write_str(")")
            }
            Stmt::Assign { var, value } => {
                self.var(*var, f)?;
                f.write_str(" = ")?;
                self.expr(value, f)
            }
            Stmt::Store { buf, index, value } => {
                f.write_str("store ")?;
                self.buf(*buf, f)?;
                f.write_str("[")?;
                self.expr(index, f)?;
                f.write_str("] = ")?;
                self.expr(value, f)
            }
            Stmt::For { var, start, end, step, body } => {
                f.write_str("for ")?;
                self.var(*var, f)?;
                f.write_str(" in ")?;
                self.expr(start, f)?;
                f.write_str("..")?;
                self.expr(end, f)?;
                f.write_str(" step ")?;
                self.expr(step, f)?;
                self.block(body, depth, f)
            }
            Stmt::If { cond, then_body, else_body } => {
                f.write_str("if ")?;
                self.expr(cond, f)?;
                self.block(then_body, depth, f)?;
                if !else_body.is_empty() {
                    f.write_str(" else")?;
                    self.block(else_body, depth, f)?;
                }
                Ok(())
            }
            Stmt::ParFor { var, end, team, body } => {
                f.write_str("parfor ")?;
                self.var(*var, f)?;
                f.write_str(" in ..")?;
                self.expr(end, f)?;
                if let Some(t) = team {
                    write!(f, " team {t}")?;
                }
                self.block(body, depth, f)
            }
            Stmt::Lanes { lane, count, implements, body } => {
                f.write_str("lanes ")?;
                self.var(*lane, f)?;
                write!(f, " in {count}")?;
                if let Some(imp) = implements {
                    f.write_str(" implements ")?;
                    match imp.row {
                        None if imp.results.len() == 1 => {
                            self.var(imp.results[0], f)?;
                            f.write_str(" = ")?;
                            self.reduce(&imp.reduce, f)?;
                        }
                        row => {
                            self.var_list(&imp.results, f)?;
                            f.write_str(" = rows(")?;
                            match row {
                                Some(r) => self.var(r, f)?,
                                None => f.write_str("_")?,
                            }
                            f.write_str(", ")?;
                            self.reduce(&imp.reduce, f)?;
                            f.write_str(")")?;
                        }
                    }
                }
                self.block(body, depth, f)
            }
            Stmt::Barrier => f.write_str("barrier"),
            Stmt::Check { id, cond } => {
                write!(f, "check {id} ")?;
                self.expr(cond, f)
            }
            Stmt::MmaI8(m) => {
                f.write_str("mma_i8 ")?;
                self.tile(&m.c, f)?;
                f.write_str(" = ")?;
                self.tile(&m.a, f)?;
                f.write_str(", ")?;
                self.tile(&m.b, f)?;
                f.write_str(" steps ")?;
                self.expr(&m.steps, f)
            }
        }
    }

    /// `s0:name[offset, stride]`.
    fn tile(&self, t: &Tile, f: &mut Formatter<'_>) -> fmt::Result {
        self.buf(Buf::Shared(t.array), f)?;
        f.write_str("[")?;
        self.expr(&t.offset, f)?;
        f.write_str(", ")?;
        self.expr(&t.stride, f)?;
        f.write_str("]")
    }

    fn expr(&self, e: &Expr, f: &mut Formatter<'_>) -> fmt::Result {
        match e {
            Expr::Const(c) => write!(f, "{c}"),
            Expr::Var(v) => self.var(*v, f),
            Expr::Param(p) => self.param(*p, f),
            Expr::GroupId(axis) => write!(f, "group_id({axis})"),
            Expr::Load { buf, index } => {
                f.write_str("load(")?;
                self.buf(*buf, f)?;
                f.write_str(", ")?;
                self.expr(index, f)?;
                f.write_str(")")
            }
            Expr::Unary { op, arg } => self.call(op.name(), &[arg], f),
            Expr::Binary { op, lhs, rhs } => self.call(op.name(), &[lhs, rhs], f),
            Expr::Select { cond, then, els } => self.call("select", &[cond, then, els], f),
            Expr::Cast { to, arg } => self.call(&format!("cast<{to}>"), &[arg], f),
            Expr::Bitcast { to, arg } => self.call(&format!("bitcast<{to}>"), &[arg], f),
            Expr::Call { func, arg } => self.call(func.name(), &[arg], f),
            Expr::Fma { a, b, c } => self.call("fma", &[a, b, c], f),
            Expr::Dot4 { kind, a, b, c } => self.call(kind.name(), &[a, b, c], f),
            Expr::Let { var, value, body } => {
                f.write_str("let(")?;
                self.var(*var, f)?;
                f.write_str(" = ")?;
                self.expr(value, f)?;
                f.write_str(", ")?;
                self.expr(body, f)?;
                f.write_str(")")
            }
            Expr::Reduce(r) => self.reduce(r, f),
            Expr::ShuffleXor { value, mask } => {
                f.write_str("shuffle_xor(")?;
                self.expr(value, f)?;
                write!(f, ", {mask})")
            }
        }
    }

    fn call(&self, head: &str, args: &[&Expr], f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{head}(")?;
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            self.expr(a, f)?;
        }
        f.write_str(")")
    }

    fn reduce(&self, r: &Reduce, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "reduce({}, {}, {}, ", r.op.name(), r.ty, r.schedule)?;
        self.var(r.var, f)?;
        f.write_str(", ")?;
        self.expr(&r.len, f)?;
        f.write_str(", ")?;
        self.expr(&r.body, f)?;
        f.write_str(")")
    }

    /// `[v1:a, v2:b]`.
    fn var_list(&self, vars: &[Var], f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, v) in vars.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            self.var(*v, f)?;
        }
        f.write_str("]")
    }

    fn var(&self, v: Var, f: &mut Formatter<'_>) -> fmt::Result {
        match self.k.vars.get(v.index()) {
            Some(d) => write!(f, "{v}:{}", d.name),
            None => write!(f, "{v}"),
        }
    }

    fn param(&self, p: ParamId, f: &mut Formatter<'_>) -> fmt::Result {
        match self.k.params.get(p.index()) {
            Some(d) => write!(f, "{p}:{}", d.name),
            None => write!(f, "{p}"),
        }
    }

    fn buf(&self, b: Buf, f: &mut Formatter<'_>) -> fmt::Result {
        match b {
            Buf::Param(p) => self.param(p, f),
            Buf::Shared(s) => match self.k.shared.get(s.index()) {
                Some(d) => write!(f, "{s}:{}", d.name),
                None => write!(f, "{s}"),
            },
        }
    }
}
