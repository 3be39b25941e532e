//! Parses a kernel body: blocks, statements, expressions, reductions and schedules.
//!
//! Each statement and expression form has its own small function, reached through one call
//! site, so that a level of nesting costs little stack even in debug builds (the nesting
//! bound in `enter` then keeps every parse far from overflowing). Nothing here type-checks.

use super::{entity_id, word, Parser, R};
use crate::ir::text::lex::{Tok, Token};
use crate::ir::text::literal;
use crate::ir::{
    BinOp, Buf, Const, Dot4Kind, Expr, Implements, MathFn, MmaI8, Reduce, ReduceOp, Stmt, Tile, UnOp, Var,
};
use crate::schedule::{Combine, Schedule};

const STATEMENT: &str =
    "a statement (`let`, `store`, `for`, `if`, `parfor`, `lanes`, `barrier`, `check`, `mma_i8` or `vN = ...`) or `}`";

impl<'a> Parser<'a> {
    pub(super) fn block(&mut self) -> R<Vec<Stmt>> {
        self.enter()?;
        self.punct("{")?;
        let mut stmts = Vec::new();
        while !self.eat_punct("}") {
            stmts.push(self.stmt()?);
        }
        self.depth -= 1;
        Ok(stmts)
    }

    fn stmt(&mut self) -> R<Stmt> {
        let t = self.bump();
        let form: fn(&mut Self, Token<'a>) -> R<Stmt> = match t.tok {
            Tok::Ident("let") => Self::let_stmt,
            Tok::Ident("store") => Self::store,
            Tok::Ident("for") => Self::for_stmt,
            Tok::Ident("if") => Self::if_stmt,
            Tok::Ident("parfor") => Self::parfor,
            Tok::Ident("lanes") => Self::lanes,
            Tok::Ident("barrier") => |_, _| Ok(Stmt::Barrier),
            Tok::Ident("check") => Self::check,
            Tok::Ident("mma_i8") => Self::mma_i8,
            Tok::Ident(w) if entity_id(w, 'v').is_some() => Self::assign,
            Tok::Ident(_) => return self.fail_at(t, STATEMENT),
            _ => return self.fail_at(t, "a statement or `}`"),
        };
        form(self, t)
    }

    fn let_stmt(&mut self, _: Token<'a>) -> R<Stmt> {
        if self.eat_punct("[") {
            let vars = self.var_list()?;
            self.punct("=")?;
            let (row, value) = self.rows(|p| p.var_ref(), |p| p.expr())?;
            return Ok(Stmt::LetRows { vars, row, value });
        }
        let var = self.var_ref()?;
        self.punct("=")?;
        Ok(Stmt::Let { var, value: self.expr()? })
    }

    /// `v1, v2, ..]` after its `[` (possibly empty: an ill-formed kernel still reads back).
    fn var_list(&mut self) -> R<Vec<Var>> {
        let mut vars = Vec::new();
        if self.eat_punct("]") {
            return Ok(vars);
        }
        loop {
            vars.push(self.var_ref()?);
            if self.eat_punct("]") {
                return Ok(vars);
            }
            self.punct(",")?;
        }
    }

    /// `rows(ROW, VALUE)`.
    fn rows<T, U>(&mut self, row: impl FnOnce(&mut Self) -> R<T>, value: impl FnOnce(&mut Self) -> R<U>) -> R<(T, U)> {
        self.keyword("rows")?;
        self.punct("(")?;
        let r = row(self)?;
        self.punct(",")?;
        let v = value(self)?;
        self.punct(")")?;
        Ok((r, v))
    }

    fn assign(&mut self, t: Token<'a>) -> R<Stmt> {
        let var = self.var_from(t)?;
        self.punct("=")?;
        Ok(Stmt::Assign { var, value: self.expr()? })
    }

    fn store(&mut self, _: Token<'a>) -> R<Stmt> {
        let buf = self.buf()?;
        self.punct("[")?;
        let index = self.expr()?;
        self.punct("]")?;
        self.punct("=")?;
        Ok(Stmt::Store { buf, index, value: self.expr()? })
    }

    fn for_stmt(&mut self, _: Token<'a>) -> R<Stmt> {
        let var = self.var_ref()?;
        self.keyword("in")?;
        let start = self.expr()?;
        self.punct("..")?;
        let end = self.expr()?;
        self.keyword("step")?;
        let step = self.expr()?;
        Ok(Stmt::For { var, start, end, step, body: self.block()? })
    }

    fn if_stmt(&mut self, _: Token<'a>) -> R<Stmt> {
        let cond = self.expr()?;
        let then_body = self.block()?;
        let else_body = if self.eat_keyword("else") { self.block()? } else { Vec::new() };
        Ok(Stmt::If { cond, then_body, else_body })
    }

    fn check(&mut self, _: Token<'a>) -> R<Stmt> {
        let id = self.int("a check id (u32)")?;
        Ok(Stmt::Check { id, cond: self.expr()? })
    }

    /// `mma_i8 C[off, stride] = A[off, stride], B[off, stride] steps N` (tiles in workgroup arrays).
    fn mma_i8(&mut self, _: Token<'a>) -> R<Stmt> {
        let c = self.tile()?;
        self.punct("=")?;
        let a = self.tile()?;
        self.punct(",")?;
        let b = self.tile()?;
        self.keyword("steps")?;
        let steps = self.expr()?;
        Ok(Stmt::MmaI8(Box::new(MmaI8 { c, a, b, steps })))
    }

    fn tile(&mut self) -> R<Tile> {
        let t = self.toks[self.pos];
        let Buf::Shared(array) = self.buf()? else {
            return self.fail_at(t, "a workgroup array (`s0:name`): the matrix step's tiles live in workgroup memory");
        };
        self.punct("[")?;
        let offset = self.expr()?;
        self.punct(",")?;
        let stride = self.expr()?;
        self.punct("]")?;
        Ok(Tile { array, offset, stride })
    }

    fn parfor(&mut self, _: Token<'a>) -> R<Stmt> {
        let var = self.var_ref()?;
        self.keyword("in")?;
        self.punct("..")?;
        let end = self.expr()?;
        let team = if self.eat_keyword("team") { Some(self.int("lanes per team (u32)")?) } else { None };
        Ok(Stmt::ParFor { var, end, team, body: self.block()? })
    }

    fn lanes(&mut self, _: Token<'a>) -> R<Stmt> {
        let lane = self.var_ref()?;
        self.keyword("in")?;
        let count = self.int("a lane count (u32)")?;
        let implements = if self.eat_keyword("implements") {
            if self.eat_punct("[") {
                let results = self.var_list()?;
                self.punct("=")?;
                let (row, reduce) = self.rows(
                    |p| if p.eat_keyword("_") { Ok(None) } else { p.var_ref().map(Some) },
                    |p| {
                        p.keyword("reduce")?;
                        p.reduce()
                    },
                )?;
                Some(Implements { results, row, reduce: Box::new(reduce) })
            } else {
                let result = self.var_ref()?;
                self.punct("=")?;
                self.keyword("reduce")?;
                Some(Implements::one(result, self.reduce()?))
            }
        } else {
            None
        };
        Ok(Stmt::Lanes { lane, count, implements, body: self.block()? })
    }

    pub(super) fn expr(&mut self) -> R<Expr> {
        self.enter()?;
        let t = self.bump();
        let form: fn(&mut Self, Token<'a>) -> R<Expr> = match t.tok {
            Tok::Num(_) => Self::constant,
            Tok::Ident("true") => |_, _| Ok(Expr::c(Const::bool(true))),
            Tok::Ident("false") => |_, _| Ok(Expr::c(Const::bool(false))),
            Tok::Ident("group_id") => Self::group_id,
            Tok::Ident("load") => Self::load,
            Tok::Ident("select") => Self::select,
            Tok::Ident("fma") => Self::fma,
            Tok::Ident(w) if Dot4Kind::from_name(w).is_some() => Self::fma,
            Tok::Ident("cast" | "bitcast") => Self::cast,
            Tok::Ident("let") => Self::let_expr,
            Tok::Ident("reduce") => |p, _| Ok(Expr::Reduce(Box::new(p.reduce()?))),
            Tok::Ident("shuffle_xor") => Self::shuffle_xor,
            Tok::Ident(w) if UnOp::from_name(w).is_some() || MathFn::from_name(w).is_some() => Self::unary,
            Tok::Ident(w) if BinOp::from_name(w).is_some() => Self::binary,
            Tok::Ident(w) if entity_id(w, 'v').is_some() => |p, t| Ok(Expr::Var(p.var_from(t)?)),
            Tok::Ident(w) if entity_id(w, 'p').is_some() => |p, t| Ok(Expr::Param(p.param_from(t)?)),
            _ => return self.fail_at(t, "an expression"),
        };
        let e = form(self, t)?;
        self.depth -= 1;
        Ok(e)
    }

    fn constant(&mut self, t: Token<'a>) -> R<Expr> {
        self.punct(":")?;
        let ty = self.ty()?;
        match literal::constant(word(t), ty) {
            Ok(c) => Ok(Expr::Const(c)),
            Err(expected) => self.fail_at(t, expected),
        }
    }

    fn group_id(&mut self, _: Token<'a>) -> R<Expr> {
        self.punct("(")?;
        let axis = self.int("a grid axis (u8)")?;
        self.punct(")")?;
        Ok(Expr::GroupId(axis))
    }

    fn load(&mut self, _: Token<'a>) -> R<Expr> {
        self.punct("(")?;
        let buf = self.buf()?;
        self.punct(",")?;
        let index = Box::new(self.expr()?);
        self.punct(")")?;
        Ok(Expr::Load { buf, index })
    }

    fn select(&mut self, _: Token<'a>) -> R<Expr> {
        self.punct("(")?;
        let cond = Box::new(self.expr()?);
        self.punct(",")?;
        let then = Box::new(self.expr()?);
        self.punct(",")?;
        let els = Box::new(self.expr()?);
        self.punct(")")?;
        Ok(Expr::Select { cond, then, els })
    }

    /// `fma(a, b, c)` or `dot4_i8(a, b, c)` / `dot4_u8i8(a, b, c)`: three operands.
    fn fma(&mut self, t: Token<'a>) -> R<Expr> {
        self.punct("(")?;
        let a = Box::new(self.expr()?);
        self.punct(",")?;
        let b = Box::new(self.expr()?);
        self.punct(",")?;
        let c = Box::new(self.expr()?);
        self.punct(")")?;
        Ok(match Dot4Kind::from_name(word(t)) {
            Some(kind) => Expr::Dot4 { kind, a, b, c },
            None => Expr::Fma { a, b, c },
        })
    }

    fn cast(&mut self, t: Token<'a>) -> R<Expr> {
        self.punct("<")?;
        let to = self.ty()?;
        self.punct(">")?;
        let arg = self.one_arg()?;
        Ok(if word(t) == "cast" { Expr::Cast { to, arg } } else { Expr::Bitcast { to, arg } })
    }

    fn let_expr(&mut self, _: Token<'a>) -> R<Expr> {
        self.punct("(")?;
        let var = self.var_ref()?;
        self.punct("=")?;
        let value = Box::new(self.expr()?);
        self.punct(",")?;
        let body = Box::new(self.expr()?);
        self.punct(")")?;
        Ok(Expr::Let { var, value, body })
    }

    fn shuffle_xor(&mut self, _: Token<'a>) -> R<Expr> {
        self.punct("(")?;
        let value = Box::new(self.expr()?);
        self.punct(",")?;
        let mask = self.int("a lane mask (u32)")?;
        self.punct(")")?;
        Ok(Expr::ShuffleXor { value, mask })
    }

    /// A unary operator or a math function (their names are disjoint).
    fn unary(&mut self, t: Token<'a>) -> R<Expr> {
        let arg = self.one_arg()?;
        Ok(match (UnOp::from_name(word(t)), MathFn::from_name(word(t))) {
            (Some(op), _) => Expr::Unary { op, arg },
            (None, Some(func)) => Expr::Call { func, arg },
            (None, None) => return self.fail_at(t, "an expression"),
        })
    }

    fn binary(&mut self, t: Token<'a>) -> R<Expr> {
        let Some(op) = BinOp::from_name(word(t)) else { return self.fail_at(t, "an expression") };
        self.punct("(")?;
        let lhs = Box::new(self.expr()?);
        self.punct(",")?;
        let rhs = Box::new(self.expr()?);
        self.punct(")")?;
        Ok(Expr::Binary { op, lhs, rhs })
    }

    fn one_arg(&mut self) -> R<Box<Expr>> {
        self.punct("(")?;
        let arg = self.expr()?;
        self.punct(")")?;
        Ok(Box::new(arg))
    }

    /// `(op, ty, schedule, var, len, body)` after the `reduce` keyword.
    pub(super) fn reduce(&mut self) -> R<Reduce> {
        self.punct("(")?;
        let t = self.bump();
        let Some(op) = ReduceOp::from_name(word(t)).filter(|_| matches!(t.tok, Tok::Ident(_))) else {
            return self.fail_at(t, "`sum`, `max`, `min` or `fma_sum`");
        };
        self.punct(",")?;
        let ty = self.ty()?;
        self.punct(",")?;
        let schedule = self.schedule()?;
        self.punct(",")?;
        let var = self.var_ref()?;
        self.punct(",")?;
        let len = self.expr()?;
        self.punct(",")?;
        let body = self.expr()?;
        self.punct(")")?;
        Ok(Reduce { op, ty, schedule, var, len, body })
    }

    /// The grammar `Schedule`'s `FromStr` reads, without its validation: a kernel holding an
    /// invalid schedule (a bug report about it) must still read back; the verifier rejects it.
    fn schedule(&mut self) -> R<Schedule> {
        self.enter()?;
        let t = self.bump();
        let head = match t.tok {
            Tok::Ident(w @ ("seq" | "any" | "lanes" | "chunked" | "blocked")) => w,
            _ => return self.fail_at(t, "a schedule (`seq`, `any`, `lanes`, `chunked` or `blocked`)"),
        };
        let s = if head == "seq" {
            Schedule::Sequential
        } else if head == "any" {
            Schedule::Any
        } else {
            self.punct("(")?;
            let n = self.int("a count (u32)")?;
            self.punct(",")?;
            let s = if head == "blocked" {
                Schedule::Blocked { block: n, across: Box::new(self.schedule()?) }
            } else {
                let t = self.bump();
                let Some(combine) = Combine::from_name(word(t)).filter(|_| matches!(t.tok, Tok::Ident(_))) else {
                    return self.fail_at(t, "`seq`, `butterfly` or `pairwise`");
                };
                if head == "lanes" {
                    Schedule::Lanes { count: n, combine }
                } else {
                    Schedule::Chunked { size: n, combine }
                }
            };
            self.punct(")")?;
            s
        };
        self.depth -= 1;
        Ok(s)
    }
}
