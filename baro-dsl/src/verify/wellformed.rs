//! Well-formedness of a kernel: types, entity bounds, scoping (each variable defined once,
//! before use), mutability, writable stores, grid shape, shuffles and barriers in uniform
//! control flow, valid schedules, sibling declarations, and undeclared float accumulations.
//!
//! Every error is collected (never stop at the first) and attached to a statement path.
//! This pass never executes or changes the kernel.

use super::lengths::Definitions;
use super::ordinals::children;
use super::ordinals::Ordinals;
use super::report::{ErrorKind, Location, VerifyError};
use crate::ir::{
    Access, BinOp, Buf, Expr, Implements, Kernel, MmaI8, ParamKind, Reduce, ReduceOp, ScalarType, Stmt, Var,
};
use std::collections::HashSet;

/// Checks `k`. `user_ir` turns on the undeclared-reduction rule, which only applies to what
/// an author wrote: expanded IR legitimately contains the loops a schedule describes.
pub fn check(k: &Kernel, user_ir: bool) -> Vec<VerifyError> {
    let n = k.vars.len();
    let mut wf = Wf {
        k,
        user_ir,
        errs: Vec::new(),
        path: Vec::new(),
        def_count: vec![0; n],
        in_scope: vec![false; n],
        var_depth: vec![0; n],
        per_lane: vec![false; n],
        loop_depth: 0,
        seq_loops: Vec::new(),
        lanes: None,
        nonuniform: 0,
        in_parfor: 0,
        team: None,
    };
    wf.header();
    wf.block(&k.body);
    wf.errs
}

struct LanesCx {
    count: u32,
    implements: bool,
}

struct Wf<'k> {
    k: &'k Kernel,
    user_ir: bool,
    errs: Vec<VerifyError>,
    path: Vec<u32>,
    def_count: Vec<u32>,
    in_scope: Vec<bool>,
    /// Loop depth at each variable's definition.
    var_depth: Vec<u32>,
    /// Variables whose value may differ between lanes.
    per_lane: Vec<bool>,
    loop_depth: u32,
    /// Variables of the enclosing sequential `For` loops, outermost first.
    seq_loops: Vec<Var>,
    lanes: Option<LanesCx>,
    /// Depth of enclosing control flow that depends on per-lane values.
    nonuniform: u32,
    in_parfor: u32,
    /// Inside the body of a teamed `par` loop (not nested in another): its team size and the
    /// `nonuniform` depth at its body's top, where the whole team runs together.
    team: Option<(u32, u32)>,
}

/// True if `e` is a product `a * b`, under expression `let`s at most (an `fma_sum` element).
fn is_product(e: &Expr) -> bool {
    match e {
        Expr::Binary { op: BinOp::Mul, .. } => true,
        Expr::Let { body, .. } => is_product(body),
        _ => false,
    }
}

/// True if `value` is `max(v, x)`/`min(v, x)` (either operand order) of `v` itself.
/// Max and min are exact in any order for non-NaN values, so such a running extremum needs
/// no declared schedule.
/// Whether `target` occurs in `e` under float arithmetic (`+ - * /`, a call, `fma`): through
/// `max`/`min`, a select's arms or a cast alone it is only kept or compared, not accumulated.
fn in_arithmetic(e: &Expr, target: &Expr, under: bool) -> bool {
    if e == target {
        return under;
    }
    let arith = match e {
        Expr::Binary { op, .. } => matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div),
        Expr::Call { .. } | Expr::Fma { .. } => true,
        _ => false,
    };
    children(e).into_iter().any(|c| in_arithmetic(c, target, under || arith))
}

/// Whether `e` depends on the loop variable `v`, through the definitions of the variables it
/// reads.
fn depends_on(defs: &Definitions, e: &Expr, v: Var, seen: &mut HashSet<Var>) -> bool {
    if let Expr::Var(x) = e {
        if *x == v {
            return true;
        }
        if !seen.insert(*x) {
            return false;
        }
        return defs.of_var(*x).iter().any(|d| depends_on(defs, d, v, seen));
    }
    children(e).into_iter().any(|c| depends_on(defs, c, v, seen))
}

fn is_minmax_of_self(v: Var, value: &Expr) -> bool {
    match value {
        Expr::Binary { op: BinOp::Max | BinOp::Min, lhs, rhs } => **lhs == Expr::Var(v) || **rhs == Expr::Var(v),
        _ => false,
    }
}

impl Wf<'_> {
    fn err(&mut self, kind: ErrorKind, message: String) {
        self.errs.push(VerifyError {
            kernel: self.k.name.clone(),
            location: Location { stmt_path: self.path.clone(), reduce: None, store: None },
            kind,
            message,
        });
    }

    /// An error about reduction `r`, located at its ordinal (the macro marks its order).
    fn reduce_err(&mut self, kind: ErrorKind, r: &Reduce, message: String) {
        let reduce = Ordinals::of(self.k).reduce.get(&(r as *const Reduce)).copied();
        self.errs.push(VerifyError {
            kernel: self.k.name.clone(),
            location: Location { stmt_path: self.path.clone(), reduce, store: None },
            kind,
            message,
        });
    }

    fn malformed(&mut self, message: String) {
        self.err(ErrorKind::Malformed, message)
    }

    fn var_ok(&mut self, v: Var) -> bool {
        if v.index() >= self.k.vars.len() {
            self.malformed(format!("variable {v} does not exist: the kernel declares {} variables", self.k.vars.len()));
            return false;
        }
        true
    }

    fn name(&self, v: Var) -> String {
        self.k.vars.get(v.index()).map_or_else(|| v.to_string(), |d| format!("`{}`", d.name))
    }

    fn define(&mut self, v: Var) {
        if !self.var_ok(v) {
            return;
        }
        self.def_count[v.index()] += 1;
        if self.def_count[v.index()] == 2 {
            self.malformed(format!(
                "variable {} ({v}) is defined more than once: expected exactly one definition",
                self.name(v)
            ));
        }
        self.in_scope[v.index()] = true;
        self.var_depth[v.index()] = self.loop_depth;
    }

    fn undefine(&mut self, v: Var) {
        if let Some(s) = self.in_scope.get_mut(v.index()) {
            *s = false;
        }
    }

    fn header(&mut self) {
        let k = self.k;
        if k.grid.is_empty() || k.grid.len() > 3 {
            self.malformed(format!("grid has {} axes: expected 1 to 3", k.grid.len()));
        }
        if let Some(b) = k.block {
            if b == 0 || b > crate::ir::MAX_BLOCK {
                self.malformed(format!("block of {b} threads: expected 1 to {}", crate::ir::MAX_BLOCK));
            }
        }
        for g in &k.grid {
            self.typed_expr(g, Some(ScalarType::INDEX), "grid size");
        }
        if let Some(sib) = &k.sibling {
            match k.params.get(sib.rows.index()).map(|p| &p.kind) {
                Some(ParamKind::Scalar(t)) if t.is_int() => {}
                Some(_) => self.malformed(format!(
                    "sibling rows parameter `{}` is not an integer scalar",
                    k.params[sib.rows.index()].name
                )),
                None => self.malformed(format!("sibling rows parameter {} does not exist", sib.rows)),
            }
            for (p, stride) in &sib.row_strides {
                match k.params.get(p.index()).map(|x| &x.kind) {
                    Some(ParamKind::Buffer { .. }) => {}
                    Some(_) => self.malformed(format!(
                        "row stride given for `{}`, which is not a buffer",
                        k.params[p.index()].name
                    )),
                    None => self.malformed(format!("row stride given for parameter {p}, which does not exist")),
                }
                self.typed_expr(stride, Some(ScalarType::INDEX), "row stride");
            }
            for (p, step) in &sib.row_steps {
                match k.params.get(p.index()).map(|x| &x.kind) {
                    Some(ParamKind::Scalar(t)) if t.is_int() => {}
                    Some(_) => self.malformed(format!(
                        "row step given for `{}`, which is not an integer scalar",
                        k.params[p.index()].name
                    )),
                    None => self.malformed(format!("row step given for parameter {p}, which does not exist")),
                }
                self.typed_expr(step, Some(ScalarType::INDEX), "row step");
            }
            for p in &sib.carried {
                match k.params.get(p.index()).map(|x| &x.kind) {
                    Some(ParamKind::Buffer { .. }) if sib.row_strides.iter().any(|(q, _)| q == p) => {
                        self.malformed(format!(
                            "`{}` is both carried and row-strided: expected one state for every row",
                            k.params[p.index()].name
                        ))
                    }
                    Some(ParamKind::Buffer { .. }) => {}
                    Some(_) => self.malformed(format!("carried `{}` is not a buffer", k.params[p.index()].name)),
                    None => self.malformed(format!("carried parameter {p} does not exist")),
                }
            }
        }
        for (p, _) in &k.verify_shapes.values {
            match k.params.get(p.index()).map(|x| &x.kind) {
                Some(ParamKind::Scalar(t)) if t.is_int() => {}
                _ => self.malformed(format!("verify shapes name parameter {p}: expected an integer scalar parameter")),
            }
        }
    }

    /// Walks `e`, then type-checks it if the walk found nothing; returns whether it is per-lane.
    fn typed_expr(&mut self, e: &Expr, want: Option<ScalarType>, what: &str) -> (bool, Option<ScalarType>) {
        let before = self.errs.len();
        let lane = self.expr(e);
        if self.errs.len() != before {
            return (lane, None);
        }
        match self.k.type_of(e) {
            Ok(t) => {
                if let Some(w) = want {
                    if t != w && !(w == ScalarType::INDEX && t.is_int() && what == "index") {
                        self.malformed(format!("{what} has type {t}: expected {w}"));
                    }
                }
                (lane, Some(t))
            }
            Err(te) => {
                self.malformed(format!("{what}: {te}"));
                (lane, None)
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> bool {
        match e {
            Expr::Var(v) => {
                if !self.var_ok(*v) {
                    return false;
                }
                if !self.in_scope[v.index()] {
                    self.malformed(format!("variable {} ({v}) is used before it is defined", self.name(*v)));
                }
                self.per_lane[v.index()]
            }
            Expr::Param(p) => {
                if p.index() >= self.k.params.len() {
                    self.malformed(format!(
                        "parameter {p} does not exist: the kernel has {} parameters",
                        self.k.params.len()
                    ));
                }
                false
            }
            Expr::Load { buf, index } => {
                self.buf_ok(*buf);
                self.expr(index)
            }
            Expr::Let { var, value, body } => {
                let a = self.expr(value);
                self.define(*var);
                if let Some(x) = self.per_lane.get_mut(var.index()) {
                    *x = a;
                }
                let b = self.expr(body);
                self.undefine(*var);
                a || b
            }
            Expr::Reduce(r) => {
                if let Err(se) = r.schedule.validate() {
                    self.malformed(format!("schedule `{}`: {se}", r.schedule));
                }
                if r.schedule.is_order_free() {
                    if let Err(m) = super::range::check_order_free(self.k, r) {
                        self.reduce_err(ErrorKind::OrderFree, r, m);
                    }
                }
                if r.op == ReduceOp::FmaSum {
                    if r.ty != ScalarType::F32 {
                        self.malformed(format!("an `fma_sum` of {}: expected f32", r.ty));
                    }
                    if !is_product(&r.body) {
                        self.malformed(format!(
                            "an `fma_sum` element must be a product `a * b`, found `{}`",
                            self.k.expr_text(&r.body)
                        ));
                    }
                }
                let a = self.expr(&r.len);
                self.define(r.var);
                if let Some(d) = self.k.vars.get(r.var.index()) {
                    if !d.ty.is_int() {
                        self.malformed(format!(
                            "reduction variable `{}` has type {}: expected an integer",
                            d.name, d.ty
                        ));
                    }
                }
                let b = self.expr(&r.body);
                self.undefine(r.var);
                a || b
            }
            Expr::ShuffleXor { value, mask } => {
                match &self.lanes {
                    None => self.malformed("shuffle_xor outside a lanes region".to_string()),
                    Some(l) if *mask >= l.count => {
                        let c = l.count;
                        self.malformed(format!(
                            "shuffle_xor mask {mask} in a region of {c} lanes: expected a mask below {c}"
                        ))
                    }
                    Some(_) if self.nonuniform > 0 => self.err(
                        ErrorKind::NonUniformSync,
                        "shuffle_xor under lane-dependent control flow: expected uniform control flow".to_string(),
                    ),
                    Some(_) => {}
                }
                self.expr(value);
                true
            }
            _ => {
                let mut lane = false;
                e.for_each_child(|c| lane |= self.expr(c));
                lane
            }
        }
    }

    fn buf_ok(&mut self, buf: Buf) -> bool {
        match buf {
            Buf::Param(p) => match self.k.params.get(p.index()).map(|x| &x.kind) {
                Some(ParamKind::Buffer { .. }) => true,
                Some(_) => {
                    self.malformed(format!("`{}` is a scalar, used as a buffer", self.k.params[p.index()].name));
                    false
                }
                None => {
                    self.malformed(format!(
                        "buffer parameter {p} does not exist: the kernel has {} parameters",
                        self.k.params.len()
                    ));
                    false
                }
            },
            Buf::Shared(s) => {
                if s.index() >= self.k.shared.len() {
                    self.malformed(format!("shared array {s} does not exist: the kernel has {}", self.k.shared.len()));
                    return false;
                }
                true
            }
        }
    }

    fn block(&mut self, b: &[Stmt]) {
        self.block_from(b, 0);
    }

    fn block_from(&mut self, b: &[Stmt], first: usize) {
        let mut defined = Vec::new();
        for (i, s) in b.iter().enumerate() {
            self.path.push((first + i) as u32);
            self.stmt(s, &mut defined);
            self.path.pop();
        }
        for v in defined {
            self.undefine(v);
        }
    }

    /// A float store inside a sequential loop whose value takes the same element (same
    /// buffer, same index expression, an index that does not depend on the loop) into
    /// arithmetic accumulates through memory: an undeclared reduction, unless the buffer is
    /// declared carried state (`carry(buf)`, a recurrence stepped row by row) or a workgroup
    /// array of a rows kernel that has carried state (see below). `max`/`min`
    /// of the element and a `select` keeping it are exact and allowed.
    fn memory_accumulation(&mut self, buf: Buf, index: &Expr, value: &Expr) {
        if !self.user_ir || self.seq_loops.is_empty() || !self.k.buf_elem(buf).is_some_and(|t| t.is_float()) {
            return;
        }
        if let Some(sib) = &self.k.sibling {
            match buf {
                Buf::Param(p) if sib.carried.contains(&p) => return,
                // A workgroup array dies with its workgroup: in a rows kernel with carried
                // state it may hold that state from row to row (copied in from the carried
                // buffers and back out), and what leaves the kernel, the per-row outputs and
                // the carried buffers' final contents, is what the sibling proof compares
                // with the m=1 kernel run row after row.
                Buf::Shared(_) if !sib.carried.is_empty() => return,
                _ => {}
            }
        }
        let target = Expr::Load { buf, index: Box::new(index.clone()) };
        if !in_arithmetic(value, &target, false) {
            return;
        }
        let defs = Definitions::of(self.k);
        let Some(across) = self.seq_loops.iter().rev().find(|l| !depends_on(&defs, index, **l, &mut HashSet::new()))
        else {
            return;
        };
        let name = self.k.buf_name(buf).to_string();
        let across = self.name(*across);
        let carry = match buf {
            Buf::Param(_) => format!("declare `{name}` carried state with carry({name})"),
            Buf::Shared(_) => format!("declare the buffer that `{name}` is copied from and back to carried state with carry(...) (a workgroup array may then hold it between rows)"),
        };
        self.err(
            ErrorKind::UndeclaredReduction,
            format!(
                "float accumulation into one element of `{name}` on every iteration of the loop over {across} is not a declared reduction: accumulate in a sum!(..., order = ...) and store its result, or {carry} if it is a recurrence over rows"
            ),
        );
    }

    /// The matrix step: its tiles are workgroup arrays of the right types, its expressions
    /// indices, it runs with a whole wave (uniform code, or the top of a `par` team of 32's
    /// body), and its sums provably do not wrap (`range::mma_steps_bound`).
    fn mma_i8(&mut self, m: &MmaI8) {
        for (t, name, want) in
            [(&m.c, "output", ScalarType::I32), (&m.a, "left", ScalarType::U32), (&m.b, "right", ScalarType::U32)]
        {
            match self.k.shared.get(t.array.index()) {
                None => self.malformed(format!(
                    "the matrix step's {name} tile is in {}, which does not exist: the kernel declares {} workgroup arrays",
                    t.array,
                    self.k.shared.len()
                )),
                Some(a) if a.elem != want => self.malformed(format!(
                    "the matrix step's {name} tile is `{}` of {}: expected a workgroup array of {want}",
                    a.name, a.elem
                )),
                Some(_) => {}
            }
        }
        let names =
            ["output offset", "output stride", "left offset", "left stride", "right offset", "right stride", "steps"];
        let mut lane = false;
        for (e, what) in m.exprs().into_iter().zip(names) {
            lane |= self.typed_expr(e, Some(ScalarType::INDEX), what).0;
        }
        let whole_wave = self.lanes.is_none()
            && match self.team {
                _ if self.in_parfor == 0 => self.nonuniform == 0 && !lane,
                Some((t, base)) => t == crate::ir::MMA_WAVE && self.in_parfor == 1 && self.nonuniform == base,
                None => false,
            };
        if !whole_wave {
            let found = if self.lanes.is_some() {
                "inside a lane region".to_string()
            } else if self.in_parfor > 0 && !matches!(self.team, Some((32, _))) {
                "inside a `par` loop whose iterations are not teams of 32 lanes (`par_team(.., 32)`)".to_string()
            } else if lane && self.in_parfor == 0 {
                "with tiles or steps that differ between lanes".to_string()
            } else if self.in_parfor > 0 {
                "under a branch or loop inside the `par_team` body (a condition there is not proven the same in every lane of the team)".to_string()
            } else {
                "under a branch or loop whose condition differs between lanes".to_string()
            };
            self.err(
                ErrorKind::NonUniformSync,
                format!(
                    "the matrix step `mma_i8` is a whole-wave operation (every lane of a 32-lane wave takes part), found it {found}: expected it in uniform control flow, or at the top of the body of a `par_team(.., 32)` loop"
                ),
            );
        }
        if let Err(msg) = super::range::check_mma_steps(self.k, &m.steps) {
            self.err(ErrorKind::OrderFree, msg);
        }
    }

    fn var_ty(&self, v: Var) -> Option<ScalarType> {
        self.k.vars.get(v.index()).map(|d| d.ty)
    }

    fn stmt(&mut self, s: &Stmt, defined: &mut Vec<Var>) {
        match s {
            Stmt::Let { var, value } => {
                let (lane, _) = self.typed_expr(value, self.var_ty(*var), "let value");
                self.define(*var);
                defined.push(*var);
                if let Some(x) = self.per_lane.get_mut(var.index()) {
                    *x = lane || self.nonuniform > 0;
                }
            }
            Stmt::LetRows { vars, row, value } => {
                let Expr::Reduce(r) = value else {
                    let found = self.k.expr_text(value);
                    self.malformed(format!("the value of a `let [..] = rows(..)` is `{found}`: expected a reduction"));
                    return;
                };
                if vars.is_empty() {
                    self.malformed("a reduction over rows with no results: expected at least one".to_string());
                }
                if !self.var_ok(*row) {
                    return;
                }
                if self.var_ty(*row) != Some(ScalarType::INDEX) {
                    self.malformed(format!(
                        "row variable {} has type {}: expected usize",
                        self.name(*row),
                        self.var_ty(*row).unwrap_or(ScalarType::INDEX)
                    ));
                }
                // The row is a value known from the shape, the same in every lane.
                self.define(*row);
                self.per_lane[row.index()] = false;
                let (lane, _) = self.typed_expr(value, Some(r.ty), "rows reduction");
                self.undefine(*row);
                for v in vars {
                    if self.var_ty(*v).is_some_and(|t| t != r.ty) {
                        self.malformed(format!(
                            "result {} of a reduction over rows has type {}: expected {}",
                            self.name(*v),
                            self.var_ty(*v).unwrap_or(r.ty),
                            r.ty
                        ));
                    }
                    self.define(*v);
                    defined.push(*v);
                    if let Some(x) = self.per_lane.get_mut(v.index()) {
                        *x = lane || self.nonuniform > 0;
                    }
                }
            }
            Stmt::Assign { var, value } => {
                let (lane, _) = self.typed_expr(value, self.var_ty(*var), "assigned value");
                if !self.var_ok(*var) {
                    return;
                }
                let d = &self.k.vars[var.index()];
                if !self.in_scope[var.index()] {
                    self.malformed(format!("assignment to `{}` ({var}) before it is defined", d.name));
                }
                if !d.mutable {
                    self.malformed(format!(
                        "assignment to `{}`, which is immutable: expected a mutable variable",
                        d.name
                    ));
                }
                let in_implementing_region = self.lanes.as_ref().is_some_and(|l| l.implements);
                if self.user_ir
                    && d.ty.is_float()
                    && self.in_scope[var.index()]
                    && self.loop_depth > self.var_depth[var.index()]
                    && !in_implementing_region
                    && !is_minmax_of_self(*var, value)
                {
                    let name = d.name.clone();
                    self.err(
                        ErrorKind::UndeclaredReduction,
                        format!("float accumulation into `{name}` inside a loop is not a declared reduction: write it as sum!(..., order = ...)"),
                    );
                }
                if lane || self.nonuniform > 0 {
                    self.per_lane[var.index()] = true;
                }
            }
            Stmt::Store { buf, index, value } => {
                if self.buf_ok(*buf) {
                    if let Buf::Param(p) = buf {
                        if let ParamKind::Buffer { access: Access::Read, .. } = self.k.params[p.index()].kind {
                            self.malformed(format!(
                                "store into `{}`, which is read-only: expected a `&mut` buffer",
                                self.k.params[p.index()].name
                            ));
                        }
                    }
                }
                self.typed_expr(index, Some(ScalarType::INDEX), "index");
                self.typed_expr(value, self.k.buf_elem(*buf), "stored value");
                self.memory_accumulation(*buf, index, value);
            }
            Stmt::For { var, start, end, step, body } => {
                let vt = self.var_ty(*var);
                let mut lane = false;
                for (e, what) in [(start, "loop start"), (end, "loop end"), (step, "loop step")] {
                    lane |= self.typed_expr(e, vt, what).0;
                }
                if vt.is_some_and(|t| !t.is_int()) {
                    self.malformed(format!(
                        "loop variable {} has type {}: expected an integer",
                        self.name(*var),
                        vt.unwrap_or(ScalarType::INDEX)
                    ));
                }
                self.define(*var);
                if let Some(x) = self.per_lane.get_mut(var.index()) {
                    *x = lane;
                }
                self.loop_depth += 1;
                self.nonuniform += lane as u32;
                self.seq_loops.push(*var);
                self.block(body);
                self.seq_loops.pop();
                self.nonuniform -= lane as u32;
                self.loop_depth -= 1;
                self.undefine(*var);
            }
            Stmt::If { cond, then_body, else_body } => {
                let (lane, _) = self.typed_expr(cond, Some(ScalarType::Bool), "condition");
                self.nonuniform += lane as u32;
                self.block(then_body);
                self.block_from(else_body, then_body.len());
                self.nonuniform -= lane as u32;
            }
            Stmt::ParFor { var, end, team, body } => {
                if let Some(t) = team {
                    if *t == 0 || !t.is_power_of_two() || *t > crate::ir::MAX_BLOCK {
                        self.malformed(format!(
                            "a `par` team of {t} lanes: expected a power of two up to {}",
                            crate::ir::MAX_BLOCK
                        ));
                    }
                }
                let vt = self.var_ty(*var);
                let (lane, _) = self.typed_expr(end, vt, "parallel loop end");
                self.define(*var);
                if let Some(x) = self.per_lane.get_mut(var.index()) {
                    *x = true;
                }
                self.loop_depth += 1;
                let outer_team = self.team;
                self.team = match team {
                    Some(t) if self.in_parfor == 0 && !lane => Some((*t, self.nonuniform)),
                    _ => None,
                };
                self.in_parfor += 1;
                self.nonuniform += lane as u32;
                self.block(body);
                self.nonuniform -= lane as u32;
                self.in_parfor -= 1;
                self.team = outer_team;
                self.loop_depth -= 1;
                self.undefine(*var);
            }
            Stmt::Lanes { lane, count, implements, body } => {
                self.lanes_region(*lane, *count, implements.as_ref(), body)
            }
            Stmt::Check { cond, .. } => {
                self.typed_expr(cond, Some(ScalarType::Bool), "check condition");
                if cond.any(&|x| matches!(x, Expr::Reduce(_) | Expr::ShuffleXor { .. })) {
                    self.malformed(
                        "a reduction or shuffle in a `check!` condition: expected plain loads and arithmetic"
                            .to_string(),
                    );
                }
            }
            Stmt::MmaI8(m) => self.mma_i8(m),
            Stmt::Barrier => {
                if self.nonuniform > 0 || self.in_parfor > 0 {
                    self.err(
                        ErrorKind::NonUniformSync,
                        "barrier under lane-dependent control flow: expected uniform control flow".to_string(),
                    );
                }
            }
        }
    }

    fn lanes_region(&mut self, lane: Var, count: u32, imp: Option<&Implements>, body: &[Stmt]) {
        if self.lanes.is_some() {
            self.malformed("lanes region inside another lanes region".to_string());
            return;
        }
        if count == 0 {
            self.malformed("lanes region of 0 lanes: expected at least 1".to_string());
        }
        if let Some(imp) = imp {
            if imp.results.is_empty() || (imp.row.is_none() && imp.results.len() != 1) {
                let n = imp.results.len();
                self.malformed(format!(
                    "lanes region claims {n} results: expected one, or one per row with a row variable"
                ));
            }
            for &result in &imp.results {
                if !self.var_ok(result) {
                    continue;
                }
                let d = &self.k.vars[result.index()];
                if !self.in_scope[result.index()] {
                    self.malformed(format!("lanes region result `{}` is not defined before the region", d.name));
                }
                if !d.mutable {
                    self.malformed(format!(
                        "lanes region result `{}` is immutable: expected a mutable variable",
                        d.name
                    ));
                }
                if d.ty != imp.reduce.ty {
                    self.malformed(format!(
                        "lanes region result `{}` has type {}: expected {}",
                        d.name, d.ty, imp.reduce.ty
                    ));
                }
            }
            if let Some(row) = imp.row {
                if self.var_ok(row) && self.var_ty(row) != Some(ScalarType::INDEX) {
                    self.malformed(format!("row variable {} of a lanes region is not an index", self.name(row)));
                }
            }
            if let Err(se) = imp.reduce.schedule.validate() {
                self.malformed(format!("schedule `{}`: {se}", imp.reduce.schedule));
            }
            if let Err(te) = self.k.type_of(&Expr::Reduce(imp.reduce.clone())) {
                self.malformed(format!("implemented reduction: {te}"));
            }
        }
        self.define(lane);
        if let Some(x) = self.per_lane.get_mut(lane.index()) {
            *x = true;
        }
        if self.var_ty(lane).is_some_and(|t| !t.is_int()) {
            self.malformed(format!("lane variable {} is not an integer", self.name(lane)));
        }
        self.lanes = Some(LanesCx { count, implements: imp.is_some() });
        self.block(body);
        self.lanes = None;
        self.undefine(lane);
    }
}
