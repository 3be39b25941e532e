//! The symbolic executor: runs a kernel for concrete values of its integer scalar parameters
//! and records, for every buffer element it writes, the DAG node of the value written.
//!
//! Integers computed from concrete values are concrete (wrapping per type); floats and
//! everything derived from loaded data are DAG nodes. Control flow must be concrete: a branch
//! or loop bound that depends on loaded data is reported as `Unsupported`, never guessed.
//! `Expr::Reduce` is evaluated directly from its schedule's tree, so the same executor runs
//! source IR (the meaning) and expanded IR (the code). It never changes the kernel.

use super::dag::{Dag, Name, Node, NodeId, Op};
use super::ordinals::{stmt_blocks, stmt_exprs, Ordinals};
use super::race::{Race, RaceLog, Space, Unit};
use super::report::{ErrorKind, Location, VerifyError};
use crate::ir::{
    Access, BinOp, Buf, Const, Dot4Kind, Expr, Implements, Kernel, MmaI8, ParamId, ParamKind, Reduce, ReduceOp,
    ScalarType, Stmt, UnOp, Var, MMA_K_WORDS, MMA_M, MMA_N,
};
use crate::lanes::identity;
use crate::schedule::{Schedule, Tree};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// A value during execution: a concrete integer/bool or a DAG node of the given type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    C(Const),
    S(NodeId, ScalarType),
}

impl Value {
    fn ty(self) -> ScalarType {
        match self {
            Value::C(c) => c.ty,
            Value::S(_, t) => t,
        }
    }
}

/// One written output element: the node stored last and the ordinal of the store that wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    pub node: NodeId,
    pub store: u32,
}

/// What one execution produced.
pub struct Run {
    /// Final contents of every written buffer element, keyed by (buffer name, physical index).
    pub outputs: BTreeMap<(Name, u64), Written>,
    /// `Lanes` regions whose `implements` claim was checked.
    pub regions_checked: usize,
    /// Nodes that are the value of a source reduction, with the reduction's ordinal.
    pub reduce_of: HashMap<NodeId, u32>,
    /// By reduction ordinal: the largest length it ran with (`None`: it never ran).
    pub longest: Vec<Option<u64>>,
    /// Every buffer element's value at the end (what was stored, and `RunConfig::memory`).
    pub memory: HashMap<(Name, u64), Value>,
    /// Arms taken by each `if` inside a reduction body, by the address of its `Expr::Select`
    /// in the executed kernel: bit 0 the `then` arm, bit 1 the `else` arm (both when the
    /// condition depends on data: the select is then in the DAG with both arms).
    pub branches: HashMap<usize, u8>,
    /// The conditions of the `check!`s executed, where they depend on data (a concrete one
    /// that holds is not listed; one that fails is an error).
    pub checks: Vec<NodeId>,
}

/// How to run a kernel.
pub struct RunConfig<'a> {
    /// Values of the integer scalar parameters.
    pub scalars: &'a [(ParamId, u64)],
    /// Element offset added to every index into these buffers (an m=1 run on row r).
    pub offsets: &'a [(ParamId, u64)],
    /// Check every `Lanes` region's `implements` claim against its schedule's tree.
    pub check_implements: bool,
    /// Buffer contents to start from instead of input leaves (state carried from the
    /// previous row of a sequential sibling); `None`: every element starts as a leaf.
    pub memory: Option<&'a HashMap<(Name, u64), Value>>,
    /// Record which concurrent unit did every access and reject unordered pairs (`race`).
    /// Applies to source IR: `Lanes` regions (produced by expansion) are not modelled.
    pub check_races: bool,
    /// Input elements known equal to another (`check!` equalities, `verify::sibling`): a
    /// load of `(buffer, index)` reads the leaf of the element it maps to.
    pub aliases: Option<&'a HashMap<(Name, u64), u64>>,
}

impl<'a> RunConfig<'a> {
    /// One shape's plain run: no offsets, no starting memory, no aliases; the race check as
    /// asked, no `implements` check.
    pub fn shape(scalars: &'a [(ParamId, u64)], check_races: bool) -> RunConfig<'a> {
        RunConfig { scalars, offsets: &[], check_implements: false, memory: None, check_races, aliases: None }
    }
}

/// Statements executed before the executor gives up (a guard against runaway loops).
const STEP_BUDGET: u64 = 50_000_000;

/// Evaluates a uniform integer expression over scalar parameters (a row stride) for `scalars`.
pub fn eval_uniform(k: &Kernel, scalars: &[(ParamId, u64)], e: &Expr) -> Result<u64, VerifyError> {
    let mut dag = Dag::new();
    let mut ex = Exec::new(k, &mut dag, &RunConfig::shape(scalars, false));
    ex.concrete(e, "row stride")
}

/// Executes `k` over its whole grid.
pub fn execute(k: &Kernel, dag: &mut Dag, cfg: &RunConfig) -> Result<Run, VerifyError> {
    let mut ex = Exec::new(k, dag, cfg);
    let mut dims = [1u64; 3];
    for (axis, g) in k.grid.iter().enumerate().take(3) {
        dims[axis] = ex.concrete(g, "grid size")?;
    }
    for z in 0..dims[2] {
        for y in 0..dims[1] {
            for x in 0..dims[0] {
                ex.group = [x, y, z];
                ex.global.iter_mut().for_each(|v| *v = None);
                ex.shared.clear();
                ex.epoch = 0;
                if let Some(log) = ex.races.as_mut() {
                    log.new_group();
                }
                ex.refresh_unit();
                ex.block(&k.body)?;
            }
        }
    }
    Ok(Run {
        outputs: ex.outputs,
        regions_checked: ex.regions_checked,
        reduce_of: ex.reduce_of,
        longest: ex.longest,
        memory: ex.mem,
        branches: ex.branches,
        checks: ex.checks,
    })
}

impl<'k, 'd> Exec<'k, 'd> {
    fn new(k: &'k Kernel, dag: &'d mut Dag, cfg: &RunConfig) -> Exec<'k, 'd> {
        let ords = Ordinals::of(k);
        let buf_names: Vec<Name> = k.params.iter().map(|p| dag.name(&p.name)).collect();
        let shared_names: Vec<Name> = k.shared.iter().map(|s| dag.name(&s.name)).collect();
        let mut offsets = vec![0u64; k.params.len()];
        for (p, o) in cfg.offsets {
            if let Some(slot) = offsets.get_mut(p.index()) {
                *slot = *o;
            }
        }
        let mut params = vec![None; k.params.len()];
        for (i, p) in k.params.iter().enumerate() {
            if let ParamKind::Scalar(t) = p.kind {
                params[i] = match cfg.scalars.iter().find(|(id, _)| id.index() == i) {
                    Some((_, v)) => Some(Value::C(Const::new(t, *v))),
                    None if t.is_int() => None,
                    None => Some(Value::S(dag.intern(Node::Param(buf_names[i])), t)),
                };
            }
        }
        let longest = vec![None; ords.reduce.len()];
        Exec {
            k,
            dag,
            ords,
            buf_names,
            shared_names,
            offsets,
            params,
            global: vec![None; k.vars.len()],
            lanes: Vec::new(),
            local: vec![false; k.vars.len()],
            cur: None,
            group: [0; 3],
            mem: cfg.memory.cloned().unwrap_or_default(),
            shared: HashMap::new(),
            versions: HashMap::new(),
            outputs: BTreeMap::new(),
            path: Vec::new(),
            reduce_of: HashMap::new(),
            longest,
            regions_checked: 0,
            check_implements: cfg.check_implements,
            steps: 0,
            trees: HashMap::new(),
            races: cfg.check_races.then(RaceLog::default),
            in_reduce: 0,
            branches: HashMap::new(),
            checks: Vec::new(),
            aliases: cfg.aliases.cloned().unwrap_or_default(),
            iters: Vec::new(),
            epoch: 0,
            unit: 0,
        }
    }
}

struct Exec<'k, 'd> {
    k: &'k Kernel,
    dag: &'d mut Dag,
    ords: Ordinals,
    buf_names: Vec<Name>,
    shared_names: Vec<Name>,
    offsets: Vec<u64>,
    params: Vec<Option<Value>>,
    global: Vec<Option<Value>>,
    /// Per-lane environments of the `Lanes` region being executed.
    lanes: Vec<Vec<Option<Value>>>,
    /// Variables defined inside the current `Lanes` region (they live in `lanes`).
    local: Vec<bool>,
    cur: Option<usize>,
    group: [u64; 3],
    mem: HashMap<(Name, u64), Value>,
    shared: HashMap<(u32, u64), Value>,
    versions: HashMap<Name, u32>,
    outputs: BTreeMap<(Name, u64), Written>,
    path: Vec<u32>,
    reduce_of: HashMap<NodeId, u32>,
    longest: Vec<Option<u64>>,
    regions_checked: usize,
    check_implements: bool,
    steps: u64,
    /// Expanded schedule trees by (schedule, length): expanding is costlier than evaluating.
    trees: HashMap<(Schedule, u64), Rc<Tree>>,
    /// The access log when races are checked.
    races: Option<RaceLog>,
    /// `ParFor` iterations the code runs in, outermost first.
    iters: Vec<(Var, u64)>,
    /// Barrier epoch within the current workgroup.
    epoch: u32,
    /// The current unit's id in `races`.
    unit: u32,
    /// Depth of reduction bodies being evaluated.
    in_reduce: u32,
    branches: HashMap<usize, u8>,
    checks: Vec<NodeId>,
    aliases: HashMap<(Name, u64), u64>,
}

fn int_val(c: Const) -> i128 {
    if c.ty.is_signed() {
        c.bits as i64 as i128
    } else {
        c.bits as i128
    }
}

/// Concrete integer/bool arithmetic, wrapping per type.
fn const_bin(op: BinOp, a: Const, b: Const) -> Result<Const, String> {
    let ty = a.ty;
    let (x, y) = (int_val(a), int_val(b));
    if op.is_comparison() {
        let r = match op {
            BinOp::Eq => x == y,
            BinOp::Ne => x != y,
            BinOp::Lt => x < y,
            BinOp::Le => x <= y,
            BinOp::Gt => x > y,
            _ => x >= y,
        };
        return Ok(Const::bool(r));
    }
    let r: i128 = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div | BinOp::Rem => {
            if y == 0 {
                return Err(format!("integer division by zero ({} of {a} by {b})", op.name()));
            }
            if op == BinOp::Div {
                x / y
            } else {
                x % y
            }
        }
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl | BinOp::Shr => {
            let amt = (b.bits % ty.bits() as u64) as u32;
            if op == BinOp::Shl {
                (a.bits << amt) as i128
            } else if ty.is_signed() {
                ((a.bits as i64) >> amt) as i128
            } else {
                (a.bits >> amt) as i128
            }
        }
        _ => return Err(format!("`{}` is not an arithmetic operation", op.name())),
    };
    Ok(Const::new(ty, r as u64))
}

fn const_un(op: UnOp, a: Const) -> Result<Const, String> {
    let x = int_val(a);
    Ok(match op {
        UnOp::Neg => Const::new(a.ty, x.wrapping_neg() as u64),
        UnOp::Not if a.ty == ScalarType::Bool => Const::bool(a.bits == 0),
        UnOp::Not => Const::new(a.ty, !a.bits),
        UnOp::Abs => Const::new(a.ty, x.unsigned_abs() as u64),
        _ => return Err(format!("`{}` of the integer {a}", op.name())),
    })
}

/// Vars defined anywhere inside `body` (they are per-lane inside a `Lanes` region).
fn defined_vars(body: &[Stmt], out: &mut Vec<Var>) {
    fn expr(e: &Expr, out: &mut Vec<Var>) {
        match e {
            Expr::Let { var, .. } => out.push(*var),
            Expr::Reduce(r) => out.push(r.var),
            _ => {}
        }
        e.for_each_child(|c| expr(c, out));
    }
    for s in body {
        match s {
            Stmt::Let { var, .. } | Stmt::For { var, .. } | Stmt::ParFor { var, .. } => out.push(*var),
            Stmt::LetRows { vars, row, .. } => {
                out.extend(vars.iter().copied());
                out.push(*row)
            }
            Stmt::Lanes { lane, .. } => out.push(*lane),
            _ => {}
        }
        stmt_exprs(s, |e| expr(e, out));
        for b in stmt_blocks(s) {
            defined_vars(b, out);
        }
    }
}

/// Whether `lanes::expand` turns a reduction of schedule `s` into a `Lanes` region.
fn lane_region(s: &Schedule) -> bool {
    match s {
        Schedule::Lanes { .. } => true,
        Schedule::Blocked { across, .. } => lane_region(across),
        _ => false,
    }
}

fn has_shuffle(s: &Stmt) -> bool {
    let pred = |e: &Expr| matches!(e, Expr::ShuffleXor { .. });
    let mut found = false;
    stmt_exprs(s, |e| found = found || e.any(&pred));
    found || stmt_blocks(s).iter().any(|b| b.iter().any(has_shuffle))
}

impl Exec<'_, '_> {
    fn fail(&self, kind: ErrorKind, message: String) -> VerifyError {
        VerifyError {
            kernel: self.k.name.clone(),
            location: Location { stmt_path: self.path.clone(), reduce: None, store: None },
            kind,
            message,
        }
    }

    fn unsupported(&self, message: String) -> VerifyError {
        self.fail(ErrorKind::Unsupported, message)
    }

    fn var_name(&self, v: Var) -> &str {
        self.k.vars.get(v.index()).map_or("?", |d| d.name.as_str())
    }

    fn get(&self, v: Var) -> Result<Value, VerifyError> {
        let slot = match self.cur {
            Some(l) if self.local.get(v.index()).copied().unwrap_or(false) => self.lanes[l].get(v.index()),
            _ => self.global.get(v.index()),
        };
        match slot.copied().flatten() {
            Some(x) => Ok(x),
            None => {
                Err(self.unsupported(format!("variable `{}` ({v}) is read before it has a value", self.var_name(v))))
            }
        }
    }

    fn set(&mut self, v: Var, x: Value) -> Result<(), VerifyError> {
        let slot = match self.cur {
            Some(l) if self.local.get(v.index()).copied().unwrap_or(false) => self.lanes[l].get_mut(v.index()),
            _ => self.global.get_mut(v.index()),
        };
        match slot {
            Some(s) => {
                *s = Some(x);
                Ok(())
            }
            None => Err(self.unsupported(format!("variable {v} does not exist"))),
        }
    }

    fn node(&mut self, x: Value) -> NodeId {
        match x {
            Value::S(n, _) => n,
            Value::C(c) => self.dag.constant(c),
        }
    }

    fn concrete(&mut self, e: &Expr, what: &str) -> Result<u64, VerifyError> {
        match self.eval(e)? {
            Value::C(c) => {
                let v = int_val(c);
                if v < 0 {
                    return Err(self.unsupported(format!("{what} is {v}: expected a non-negative integer")));
                }
                Ok(v as u64)
            }
            Value::S(..) => {
                Err(self.unsupported(format!("{what} depends on loaded data: expected a value known from the shape")))
            }
        }
    }

    fn eval(&mut self, e: &Expr) -> Result<Value, VerifyError> {
        Ok(match e {
            Expr::Const(c) if c.ty.is_float() => Value::S(self.dag.constant(*c), c.ty),
            Expr::Const(c) => Value::C(*c),
            Expr::Var(v) => self.get(*v)?,
            Expr::Param(p) => match self.params.get(p.index()).copied().flatten() {
                Some(x) => x,
                None => return Err(self.unsupported(format!("integer parameter {p} has no value in this shape"))),
            },
            Expr::GroupId(a) => Value::C(Const::index(self.group.get(*a as usize).copied().unwrap_or(0))),
            Expr::Load { buf, index } => {
                let idx = self.eval(index)?;
                self.load(*buf, idx)?
            }
            Expr::Unary { op, arg } => match self.eval(arg)? {
                Value::C(c) => Value::C(const_un(*op, c).map_err(|m| self.unsupported(m))?),
                Value::S(n, t) => Value::S(self.dag.op(Op::Un(*op), t, &[n]), t),
            },
            Expr::Binary { op, lhs, rhs } => {
                let a = self.eval(lhs)?;
                let b = self.eval(rhs)?;
                match (a, b) {
                    (Value::C(x), Value::C(y)) => Value::C(const_bin(*op, x, y).map_err(|m| self.unsupported(m))?),
                    _ => {
                        let ty = if op.is_comparison() { ScalarType::Bool } else { a.ty() };
                        let (na, nb) = (self.node(a), self.node(b));
                        Value::S(self.dag.op(Op::Bin(*op), ty, &[na, nb]), ty)
                    }
                }
            }
            Expr::Select { cond, then, els } => match self.eval(cond)? {
                Value::C(c) => {
                    if self.in_reduce > 0 {
                        *self.branches.entry(e as *const Expr as usize).or_insert(0) |= if c.bits != 0 { 1 } else { 2 };
                    }
                    if c.bits != 0 {
                        self.eval(then)?
                    } else {
                        self.eval(els)?
                    }
                }
                Value::S(n, _) => {
                    if self.in_reduce > 0 {
                        self.branches.insert(e as *const Expr as usize, 3);
                    }
                    let a = self.eval(then)?;
                    let b = self.eval(els)?;
                    let (na, nb) = (self.node(a), self.node(b));
                    Value::S(self.dag.op(Op::Select, a.ty(), &[n, na, nb]), a.ty())
                }
            },
            Expr::Cast { to, arg } => match self.eval(arg)? {
                Value::C(c) if !to.is_float() && !c.ty.is_float() => Value::C(Const::new(*to, c.bits)),
                x => {
                    let n = self.node(x);
                    Value::S(self.dag.op(Op::Cast, *to, &[n]), *to)
                }
            },
            Expr::Bitcast { to, arg } => match self.eval(arg)? {
                Value::C(c) if !to.is_float() => Value::C(Const::new(*to, c.bits)),
                x => {
                    let n = self.node(x);
                    Value::S(self.dag.op(Op::Bitcast, *to, &[n]), *to)
                }
            },
            Expr::Call { func, arg } => {
                let x = self.eval(arg)?;
                let n = self.node(x);
                Value::S(self.dag.op(Op::Call(*func), ScalarType::F32, &[n]), ScalarType::F32)
            }
            Expr::Fma { a, b, c } => {
                let (x, y, z) = (self.eval(a)?, self.eval(b)?, self.eval(c)?);
                let args = [self.node(x), self.node(y), self.node(z)];
                Value::S(self.dag.op(Op::Fma, ScalarType::F32, &args), ScalarType::F32)
            }
            Expr::Dot4 { kind, a, b, c } => match (self.eval(a)?, self.eval(b)?, self.eval(c)?) {
                (Value::C(x), Value::C(y), Value::C(z)) => {
                    Value::C(Const::new(ScalarType::I32, kind.eval(x.bits as u32, y.bits as u32, z.bits as i32) as u64))
                }
                (x, y, z) => {
                    let args = [self.node(x), self.node(y), self.node(z)];
                    Value::S(self.dag.op(Op::Dot4(*kind), ScalarType::I32, &args), ScalarType::I32)
                }
            },
            Expr::Let { var, value, body } => {
                let x = self.eval(value)?;
                self.set(*var, x)?;
                self.eval(body)?
            }
            Expr::Reduce(r) => self.source_reduce(r)?,
            Expr::ShuffleXor { value, mask } => {
                let Some(l) = self.cur else {
                    return Err(self.unsupported("shuffle_xor outside a lanes region".to_string()));
                };
                let src = l ^ *mask as usize;
                if src >= self.lanes.len() {
                    return Err(self.unsupported(format!(
                        "shuffle_xor mask {mask} from lane {l} leaves the {} lanes",
                        self.lanes.len()
                    )));
                }
                self.cur = Some(src);
                let x = self.eval(value);
                self.cur = Some(l);
                x?
            }
        })
    }

    /// A reduction the author wrote (not a region's claim): its value from its tree, then
    /// the broadcast that ends its lane region.
    fn source_reduce(&mut self, r: &Reduce) -> Result<Value, VerifyError> {
        let x = self.reduce(r)?;
        if self.iters.is_empty() && self.cur.is_none() && lane_region(&r.schedule) {
            // Its lane region ends in a broadcast from lane 0 (a barrier, or a wave
            // shuffle where the workgroup is one wave): every thread's reads are done.
            self.barrier();
        }
        if let (Value::S(n, _), Some(ord)) = (x, self.ords.reduce.get(&(r as *const Reduce)).copied()) {
            self.reduce_of.entry(n).or_insert(ord);
        }
        Ok(x)
    }

    /// The values of a reduction over rows: the reduction with `row` = j for each j, each
    /// from its own tree (their one lane region ends in one broadcast, after the last).
    fn rows_reduce(&mut self, row: Var, r: &Reduce, n: usize) -> Result<Vec<Value>, VerifyError> {
        let ty = self.k.vars.get(row.index()).map_or(ScalarType::INDEX, |d| d.ty);
        let mut xs = Vec::with_capacity(n);
        for j in 0..n {
            self.set(row, Value::C(Const::new(ty, j as u64)))?;
            xs.push(self.reduce(r)?);
        }
        Ok(xs)
    }

    fn load(&mut self, buf: Buf, idx: Value) -> Result<Value, VerifyError> {
        let ty = self
            .k
            .buf_elem(buf)
            .ok_or_else(|| self.unsupported(format!("load from {buf:?}, which is not a buffer")))?;
        match (buf, idx) {
            (Buf::Param(p), Value::C(c)) => {
                let name = self.buf_names[p.index()];
                let i = (c.bits).wrapping_add(self.offsets[p.index()]);
                let writable = matches!(
                    self.k.params.get(p.index()).map(|x| &x.kind),
                    Some(ParamKind::Buffer { access: Access::ReadWrite, .. })
                );
                if writable {
                    self.log_access(buf, Space::Global(name), i, false, None)?;
                }
                Ok(match self.mem.get(&(name, i)) {
                    Some(x) => *x,
                    None => Value::S(
                        self.dag.intern(Node::Leaf {
                            buf: name,
                            index: self.aliases.get(&(name, i)).copied().unwrap_or(i),
                        }),
                        ty,
                    ),
                })
            }
            (Buf::Param(p), Value::S(n, t)) => {
                let name = self.buf_names[p.index()];
                let off = self.offsets[p.index()];
                let index = if off == 0 {
                    n
                } else {
                    let o = self.dag.constant(Const::new(t, off));
                    self.dag.op(Op::Bin(BinOp::Add), t, &[n, o])
                };
                let version = self.versions.get(&name).copied().unwrap_or(0);
                Ok(Value::S(self.dag.intern(Node::Load { buf: name, index, version }), ty))
            }
            (Buf::Shared(s), Value::C(c)) => {
                self.shared_bounds(s.index(), c.bits)?;
                self.log_access(buf, Space::Shared(s.0), c.bits, false, None)?;
                Ok(match self.shared.get(&(s.0, c.bits)) {
                    Some(x) => *x,
                    None => {
                        Value::S(self.dag.intern(Node::Leaf { buf: self.shared_names[s.index()], index: c.bits }), ty)
                    }
                })
            }
            (Buf::Shared(_), Value::S(..)) => {
                Err(self.unsupported("shared-memory index depends on loaded data".to_string()))
            }
        }
    }

    fn shared_bounds(&self, s: usize, i: u64) -> Result<(), VerifyError> {
        let len = self.k.shared.get(s).map_or(0, |a| a.len as u64);
        if i >= len {
            return Err(
                self.unsupported(format!("index {i} into shared array of length {len}: expected an index below {len}"))
            );
        }
        Ok(())
    }

    /// The value of a reduction built directly from its schedule's tree.
    fn reduce(&mut self, r: &Reduce) -> Result<Value, VerifyError> {
        let len = self.concrete(&r.len, "reduction length")?;
        if len > 1 << 22 {
            return Err(self.unsupported(format!("reduction length {len} is too large to execute symbolically")));
        }
        if let Some(slot) = self.ords.reduce.get(&(r as *const Reduce)).and_then(|o| self.longest.get_mut(*o as usize))
        {
            *slot = Some(slot.map_or(len, |m| m.max(len)));
        }
        let vty = self.k.vars.get(r.var.index()).map_or(ScalarType::INDEX, |d| d.ty);
        let fused = r.op == ReduceOp::FmaSum;
        // Elements: the body's value, or for an `fma_sum` its two factors.
        let mut leaves = Vec::with_capacity(len as usize);
        let mut factors = Vec::with_capacity(if fused { len as usize } else { 0 });
        self.in_reduce += 1;
        for i in 0..len {
            if let Err(e) = self.set(r.var, Value::C(Const::new(vty, i))) {
                self.in_reduce -= 1;
                return Err(e);
            }
            let x = if fused {
                self.eval_product(&r.body).map(|ab| factors.push(ab))
            } else {
                self.eval(&r.body).map(|x| leaves.push(x))
            };
            if let Err(e) = x {
                self.in_reduce -= 1;
                return Err(e);
            }
        }
        self.in_reduce -= 1;
        let key = (r.schedule.clone(), len);
        let tree = match self.trees.get(&key) {
            Some(t) => Rc::clone(t),
            None => {
                let t = Rc::new(r.schedule.expand(len));
                self.trees.insert(key, Rc::clone(&t));
                t
            }
        };
        let zero = Value::C(identity(r.op, r.ty));
        let zero = if r.ty.is_float() { Value::S(self.dag.constant(identity(r.op, r.ty)), r.ty) } else { zero };
        if fused {
            return self.fused_tree(&tree, zero, &factors);
        }
        self.tree(&tree, zero, &leaves, r.op.bin_op())
    }

    /// The factors `(a, b)` of an `fma_sum` element `a * b`, through the expression `let`s
    /// around the product.
    fn eval_product(&mut self, e: &Expr) -> Result<(Value, Value), VerifyError> {
        match e {
            Expr::Binary { op: BinOp::Mul, lhs, rhs } => Ok((self.eval(lhs)?, self.eval(rhs)?)),
            Expr::Let { var, value, body } => {
                let x = self.eval(value)?;
                self.set(*var, x)?;
                self.eval_product(body)
            }
            _ => Err(self.unsupported(format!(
                "an `fma_sum` element must be a product `a * b`, found `{}`",
                self.k.expr_text(e)
            ))),
        }
    }

    /// An `fma_sum`'s tree (`Tree::eval_fused`): element i added to partial p is
    /// `fma(a_i, b_i, p)`, two partials are added.
    fn fused_tree(&mut self, t: &Tree, zero: Value, factors: &[(Value, Value)]) -> Result<Value, VerifyError> {
        let f32 = ScalarType::F32;
        let fma = |ex: &mut Self, i: u64, p: Value| -> Result<Value, VerifyError> {
            let Some(&(a, b)) = factors.get(i as usize) else {
                return Err(ex.unsupported(format!("element {i} of an `fma_sum` of {} elements", factors.len())));
            };
            let args = [ex.node(a), ex.node(b), ex.node(p)];
            Ok(Value::S(ex.dag.op(Op::Fma, f32, &args), f32))
        };
        match t {
            Tree::Zero => Ok(zero),
            Tree::Leaf(i) => fma(self, *i, zero),
            Tree::Add(a, b) => {
                let x = self.fused_tree(a, zero, factors)?;
                if let Tree::Leaf(i) = **b {
                    return fma(self, i, x);
                }
                let y = self.fused_tree(b, zero, factors)?;
                let (nx, ny) = (self.node(x), self.node(y));
                Ok(Value::S(self.dag.op(Op::Bin(BinOp::Add), f32, &[nx, ny]), f32))
            }
        }
    }

    fn tree(&mut self, t: &Tree, zero: Value, leaves: &[Value], op: BinOp) -> Result<Value, VerifyError> {
        match t {
            Tree::Zero => Ok(zero),
            Tree::Leaf(i) => Ok(leaves[*i as usize]),
            Tree::Add(a, b) => {
                let x = self.tree(a, zero, leaves, op)?;
                let y = self.tree(b, zero, leaves, op)?;
                match (x, y) {
                    (Value::C(p), Value::C(q)) => Ok(Value::C(const_bin(op, p, q).map_err(|m| self.unsupported(m))?)),
                    _ => {
                        let (nx, ny) = (self.node(x), self.node(y));
                        Ok(Value::S(self.dag.op(Op::Bin(op), x.ty(), &[nx, ny]), x.ty()))
                    }
                }
            }
        }
    }

    fn tick(&mut self) -> Result<(), VerifyError> {
        self.steps += 1;
        if self.steps > STEP_BUDGET {
            return Err(
                self.unsupported(format!("execution exceeds {STEP_BUDGET} statements: use smaller verify shapes"))
            );
        }
        Ok(())
    }

    fn block(&mut self, b: &[Stmt]) -> Result<(), VerifyError> {
        for (i, s) in b.iter().enumerate() {
            self.path.push(i as u32);
            self.stmt(s)?;
            self.path.pop();
        }
        Ok(())
    }

    fn for_range(&mut self, start: &Expr, end: &Expr, step: &Expr) -> Result<(i128, i128, i128), VerifyError> {
        let s = self.eval(start)?;
        let e = self.eval(end)?;
        let st = self.eval(step)?;
        match (s, e, st) {
            (Value::C(a), Value::C(b), Value::C(c)) => {
                if int_val(c) <= 0 {
                    return Err(self.unsupported(format!("loop step {c}: expected a positive step")));
                }
                Ok((int_val(a), int_val(b), int_val(c)))
            }
            _ => {
                Err(self
                    .unsupported("loop bounds depend on loaded data: expected bounds known from the shape".to_string()))
            }
        }
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), VerifyError> {
        self.tick()?;
        match s {
            Stmt::Let { var, value } | Stmt::Assign { var, value } => {
                let x = self.eval(value)?;
                self.set(*var, x)?;
            }
            Stmt::LetRows { vars, row, value } => {
                let Expr::Reduce(r) = value else {
                    return Err(self.unsupported(format!(
                        "the value of a `let [..] = rows(..)` is `{}`: expected a reduction",
                        self.k.expr_text(value)
                    )));
                };
                let xs = self.rows_reduce(*row, r, vars.len())?;
                if self.iters.is_empty() && self.cur.is_none() && lane_region(&r.schedule) {
                    self.barrier();
                }
                let ord = self.ords.reduce.get(&(&**r as *const Reduce)).copied();
                for (v, x) in vars.iter().zip(xs) {
                    if let (Value::S(n, _), Some(ord)) = (x, ord) {
                        self.reduce_of.entry(n).or_insert(ord);
                    }
                    self.set(*v, x)?;
                }
            }
            Stmt::Store { buf, index, value } => {
                let i = self.eval(index)?;
                let x = self.eval(value)?;
                self.store(s, *buf, i, x)?;
            }
            Stmt::For { var, start, end, step, body } => {
                let (a, b, c) = self.for_range(start, end, step)?;
                let ty = self.k.vars.get(var.index()).map_or(ScalarType::INDEX, |d| d.ty);
                let mut i = a;
                while i < b {
                    self.set(*var, Value::C(Const::new(ty, i as u64)))?;
                    self.block(body)?;
                    i += c;
                }
            }
            Stmt::If { cond, then_body, else_body } => match self.eval(cond)? {
                Value::C(c) => {
                    if c.bits != 0 {
                        self.block(then_body)?;
                    } else {
                        for (i, st) in else_body.iter().enumerate() {
                            self.path.push((then_body.len() + i) as u32);
                            self.stmt(st)?;
                            self.path.pop();
                        }
                    }
                }
                Value::S(..) => {
                    return Err(self.unsupported(
                        "branch condition depends on loaded data: expected a condition known from the shape"
                            .to_string(),
                    ))
                }
            },
            Stmt::ParFor { var, end, body, .. } => {
                let n = self.concrete(end, "parallel loop length")?;
                let ty = self.k.vars.get(var.index()).map_or(ScalarType::INDEX, |d| d.ty);
                for i in 0..n {
                    self.set(*var, Value::C(Const::new(ty, i)))?;
                    self.iters.push((*var, i));
                    self.refresh_unit();
                    let r = self.block(body);
                    self.iters.pop();
                    r?;
                }
                // The barrier that ends the loop (a nested loop's is inside one iteration).
                self.barrier();
            }
            Stmt::Lanes { lane, count, implements, body } => {
                self.lanes_region(*lane, *count, implements.as_ref(), body)?
            }
            Stmt::Barrier => self.barrier(),
            Stmt::MmaI8(m) => self.mma_i8(s, m)?,
            Stmt::Check { id, cond } => match self.eval(cond)? {
                Value::C(c) if c.bits != 0 => {}
                Value::C(_) => {
                    return Err(self.fail(
                        ErrorKind::Malformed,
                        format!(
                            "check {id} (`{}`) fails on this shape: expected a condition that can hold",
                            self.k.expr_text(cond)
                        ),
                    ))
                }
                Value::S(n, _) => self.checks.push(n),
            },
        }
        Ok(())
    }

    /// The matrix step as the sum it is: each output element `Σ_w dot4_i8(a_w, b_w, 0)` over
    /// the row's and column's words, added in word order from 0, stored. The verifier proved
    /// no sum wraps, so this is the integer of every order (`MmaI8::reference` chains the
    /// accumulator through the dots, the same integer); it is the tree an m = 1 kernel's
    /// `sum!(w in 0..8 · steps, order = any, dot4_i8(a[w], b[w], 0))` gets, so a rows kernel
    /// on the step is compared with such a kernel node for node. A word that is the constant 0
    /// in A or B is no term of the sum (its dot is exactly 0).
    fn mma_i8(&mut self, s: &Stmt, m: &MmaI8) -> Result<(), VerifyError> {
        let names =
            ["output offset", "output stride", "left offset", "left stride", "right offset", "right stride", "steps"];
        let mut v = [0u64; 7];
        for ((slot, e), what) in v.iter_mut().zip(m.exprs()).zip(names) {
            *slot = self.concrete(e, &format!("matrix step {what}"))?;
        }
        let [c_off, c_stride, a_off, a_stride, b_off, b_stride, steps] = v;
        let words = steps.saturating_mul(MMA_K_WORDS as u64);
        if words > 1 << 16 {
            return Err(self.unsupported(format!("a matrix step of {steps} steps: expected at most 8192 here")));
        }
        let at = |off: u64, stride: u64, i: u64, j: u64| off.wrapping_add(i.wrapping_mul(stride)).wrapping_add(j);
        for row in 0..MMA_M as u64 {
            for col in 0..MMA_N as u64 {
                let zero = Value::C(Const::new(ScalarType::I32, 0));
                let mut acc = zero;
                for w in 0..words {
                    self.tick()?;
                    let x = self.load(Buf::Shared(m.a.array), Value::C(Const::index(at(a_off, a_stride, row, w))))?;
                    let y = self.load(Buf::Shared(m.b.array), Value::C(Const::index(at(b_off, b_stride, col, w))))?;
                    let term = match (x, y) {
                        (Value::C(x), Value::C(y)) => Value::C(Const::new(
                            ScalarType::I32,
                            Dot4Kind::I8I8.eval(x.bits as u32, y.bits as u32, 0) as u32 as u64,
                        )),
                        // A word of zeros contributes exactly 0 whatever the other operand is,
                        // and adding an integer 0 changes nothing: such a word is not a term.
                        // So a tile whose rows hold part of a block (the rest zero words) is
                        // the sum over that part, the tree an m = 1 kernel's shorter sum gets.
                        (Value::C(z), _) | (_, Value::C(z)) if z.bits as u32 == 0 => continue,
                        (x, y) => {
                            let args = [self.node(x), self.node(y), self.node(zero)];
                            Value::S(self.dag.op(Op::Dot4(Dot4Kind::I8I8), ScalarType::I32, &args), ScalarType::I32)
                        }
                    };
                    acc = match (acc, term) {
                        (Value::C(p), Value::C(q)) => {
                            Value::C(const_bin(BinOp::Add, p, q).map_err(|m| self.unsupported(m))?)
                        }
                        (p, q) => {
                            let args = [self.node(p), self.node(q)];
                            Value::S(self.dag.op(Op::Bin(BinOp::Add), ScalarType::I32, &args), ScalarType::I32)
                        }
                    };
                }
                let i = Value::C(Const::index(at(c_off, c_stride, row, col)));
                self.store(s, Buf::Shared(m.c.array), i, acc)?;
            }
        }
        Ok(())
    }

    /// A workgroup barrier: accesses after it are ordered after those before it. Inside a
    /// `ParFor` iteration it orders nothing the model tracks (iterations run one by one here).
    fn barrier(&mut self) {
        if self.iters.is_empty() {
            self.epoch += 1;
        }
        self.refresh_unit();
    }

    fn refresh_unit(&mut self) {
        if let Some(log) = self.races.as_mut() {
            self.unit = log.unit_id(&Unit { group: self.group, epoch: self.epoch, steps: self.iters.clone() });
        }
    }

    /// Who a unit is, in words: `workgroup 1, par iteration j = 3`.
    fn unit_text(&self, u: &Unit) -> String {
        let dims = self.k.grid.len().max(1);
        let g = if dims == 1 {
            u.group[0].to_string()
        } else {
            format!("({})", u.group[..dims].iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
        };
        let mut t = format!("workgroup {g}");
        if u.steps.is_empty() {
            t.push_str(", uniform code");
        }
        for (v, i) in &u.steps {
            t.push_str(&format!(", par iteration {} = {i}", self.var_name(*v)));
        }
        t
    }

    /// Logs an access to `space[index]` by the current unit; a race is an error at the
    /// current statement (and store, for a write).
    fn log_access(
        &mut self,
        buf: Buf,
        space: Space,
        index: u64,
        write: bool,
        store: Option<u32>,
    ) -> Result<(), VerifyError> {
        if self.cur.is_some() {
            return Ok(());
        }
        let unit = self.unit;
        let path = self.path.clone();
        let Some(log) = self.races.as_mut() else { return Ok(()) };
        let race: Option<Race> = if write { log.write(space, index, unit) } else { log.read(space, index, unit) };
        let Some(r) = race else { return Ok(()) };
        let now = Unit { group: self.group, epoch: self.epoch, steps: self.iters.clone() };
        let verb = |w: bool| if w { "written" } else { "read" };
        let what = match (r.first_write, r.second_write) {
            (true, true) => "two writers of one element",
            (true, false) => "a read of a write made in the same launch",
            _ => "a write of an element read in the same launch",
        };
        let why = if r.first.group != now.group {
            "workgroups run at the same time, with no order between them within a launch"
        } else {
            "both run between the same two barriers of the workgroup, at the same time on a GPU"
        };
        let message = format!(
            "race on {}[{index}]: {} by {} and {} by {} here: {what}, unordered ({why})",
            self.k.buf_name(buf),
            verb(r.first_write),
            self.unit_text(&r.first),
            verb(r.second_write),
            self.unit_text(&now),
        );
        Err(VerifyError {
            kernel: self.k.name.clone(),
            location: Location { stmt_path: path, reduce: None, store },
            kind: ErrorKind::Race,
            message,
        })
    }

    fn store(&mut self, s: &Stmt, buf: Buf, i: Value, x: Value) -> Result<(), VerifyError> {
        let Value::C(c) = i else {
            return Err(self.unsupported(
                "store index depends on loaded data: expected an index known from the shape".to_string(),
            ));
        };
        match buf {
            Buf::Param(p) => {
                let name = self.buf_names[p.index()];
                let idx = c.bits.wrapping_add(self.offsets[p.index()]);
                let store = self.ords.store.get(&(s as *const Stmt)).copied().unwrap_or(u32::MAX);
                self.log_access(buf, Space::Global(name), idx, true, Some(store))?;
                self.mem.insert((name, idx), x);
                *self.versions.entry(name).or_insert(0) += 1;
                let node = self.node(x);
                self.outputs.insert((name, idx), Written { node, store });
            }
            Buf::Shared(sh) => {
                self.shared_bounds(sh.index(), c.bits)?;
                let store = self.ords.store.get(&(s as *const Stmt)).copied();
                self.log_access(buf, Space::Shared(sh.0), c.bits, true, store)?;
                self.shared.insert((sh.0, c.bits), x);
            }
        }
        Ok(())
    }

    fn lanes_region(
        &mut self,
        lane: Var,
        count: u32,
        imp: Option<&Implements>,
        body: &[Stmt],
    ) -> Result<(), VerifyError> {
        if self.cur.is_some() {
            return Err(self.unsupported("a lanes region inside another lanes region".to_string()));
        }
        let mut vars = vec![lane];
        defined_vars(body, &mut vars);
        let n = self.k.vars.len();
        self.local = vec![false; n];
        for v in &vars {
            if let Some(x) = self.local.get_mut(v.index()) {
                *x = true;
            }
        }
        self.lanes = vec![vec![None; n]; count as usize];
        let lty = self.k.vars.get(lane.index()).map_or(ScalarType::INDEX, |d| d.ty);
        for l in 0..count as usize {
            self.cur = Some(l);
            self.set(lane, Value::C(Const::new(lty, l as u64)))?;
        }
        let r = self.lockstep(body);
        self.cur = None;
        self.local.iter_mut().for_each(|x| *x = false);
        self.lanes.clear();
        r?;
        if let (Some(imp), true) = (imp, self.check_implements) {
            self.check_region(imp)?;
        }
        Ok(())
    }

    /// Runs a block for every lane; statements without shuffles run lane by lane, those with
    /// one read every lane's values before any lane writes.
    fn lockstep(&mut self, b: &[Stmt]) -> Result<(), VerifyError> {
        let count = self.lanes.len();
        for (i, s) in b.iter().enumerate() {
            self.path.push(i as u32);
            if !has_shuffle(s) {
                for l in 0..count {
                    self.cur = Some(l);
                    self.stmt(s)?;
                }
                self.path.pop();
                continue;
            }
            match s {
                Stmt::Let { var, value } | Stmt::Assign { var, value } => {
                    let mut xs = Vec::with_capacity(count);
                    for l in 0..count {
                        self.cur = Some(l);
                        xs.push(self.eval(value)?);
                    }
                    for (l, x) in xs.into_iter().enumerate() {
                        self.cur = Some(l);
                        self.set(*var, x)?;
                    }
                }
                Stmt::Store { buf, index, value } => {
                    let mut xs = Vec::with_capacity(count);
                    for l in 0..count {
                        self.cur = Some(l);
                        xs.push((self.eval(index)?, self.eval(value)?));
                    }
                    for (l, (i, x)) in xs.into_iter().enumerate() {
                        self.cur = Some(l);
                        self.store(s, *buf, i, x)?;
                    }
                }
                Stmt::For { var, start, end, step, body } => {
                    let mut ranges = Vec::with_capacity(count);
                    for l in 0..count {
                        self.cur = Some(l);
                        ranges.push(self.for_range(start, end, step)?);
                    }
                    if ranges.windows(2).any(|w| w[0] != w[1]) {
                        return Err(self.fail(
                            ErrorKind::NonUniformSync,
                            "loop containing a shuffle has lane-dependent bounds".to_string(),
                        ));
                    }
                    let (a, e, c) = ranges[0];
                    let ty = self.k.vars.get(var.index()).map_or(ScalarType::INDEX, |d| d.ty);
                    let mut it = a;
                    while it < e {
                        for l in 0..count {
                            self.cur = Some(l);
                            self.set(*var, Value::C(Const::new(ty, it as u64)))?;
                        }
                        self.lockstep(body)?;
                        it += c;
                    }
                }
                Stmt::If { cond, then_body, else_body } => {
                    let mut cs = Vec::with_capacity(count);
                    for l in 0..count {
                        self.cur = Some(l);
                        cs.push(self.eval(cond)?);
                    }
                    if cs.windows(2).any(|w| w[0] != w[1]) {
                        return Err(self.fail(
                            ErrorKind::NonUniformSync,
                            "branch containing a shuffle has a lane-dependent condition".to_string(),
                        ));
                    }
                    match cs[0] {
                        Value::C(c) if c.bits != 0 => self.lockstep(then_body)?,
                        Value::C(_) => self.lockstep(else_body)?,
                        Value::S(..) => {
                            return Err(self.unsupported("branch condition depends on loaded data".to_string()))
                        }
                    }
                }
                _ => {
                    return Err(self.unsupported("a shuffle inside a parallel loop or nested lanes region".to_string()))
                }
            }
            self.path.pop();
        }
        Ok(())
    }

    fn check_region(&mut self, imp: &Implements) -> Result<(), VerifyError> {
        self.regions_checked += 1;
        let expected = match imp.row {
            Some(row) => self.rows_reduce(row, &imp.reduce, imp.results.len())?,
            None => vec![self.reduce(&imp.reduce)?],
        };
        if expected.len() != imp.results.len() {
            return Err(
                self.unsupported(format!("lanes region claims {} results without a row variable", imp.results.len()))
            );
        }
        for (j, (&result, expected)) in imp.results.iter().zip(expected).enumerate() {
            let found = self.get(result)?;
            let (nf, ne) = (self.node(found), self.node(expected));
            if nf == ne {
                continue;
            }
            let len = self.concrete(&imp.reduce.len, "reduction length")?;
            let diff = self.dag.describe_difference(ne, nf, "the schedule", "the code");
            let row = if imp.row.is_some() { format!(" (row {j} of {})", imp.results.len()) } else { String::new() };
            return Err(self.fail(
                ErrorKind::ScheduleNotImplemented,
                format!(
                    "lanes region does not compute its declared `{}` {} of {len} elements into `{}`{row}: first difference {diff}\n  expected: {}\n  found:    {}",
                    imp.reduce.schedule,
                    imp.reduce.op.name(),
                    self.var_name(result),
                    self.dag.show(ne, 16),
                    self.dag.show(nf, 16)
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_arithmetic_wraps_per_type() {
        let a = Const::new(ScalarType::I8, 127);
        let b = Const::new(ScalarType::I8, 1);
        assert_eq!(const_bin(BinOp::Add, a, b).unwrap().as_i64(), -128);
        let z = Const::new(ScalarType::U32, 0);
        assert!(const_bin(BinOp::Div, b, Const::new(ScalarType::I8, 0)).unwrap_err().contains("division by zero"));
        assert_eq!(const_bin(BinOp::Sub, z, Const::new(ScalarType::U32, 1)).unwrap().bits, u32::MAX as u64);
        assert_eq!(
            const_bin(BinOp::Shr, Const::new(ScalarType::I32, (-8i64) as u64), Const::new(ScalarType::I32, 1))
                .unwrap()
                .as_i64(),
            -4
        );
    }
}
