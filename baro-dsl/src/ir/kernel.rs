//! The kernel IR: parameters, statements and expressions of one kernel.
//!
//! The IR is structured (no CFG): loops and branches nest. The body of a kernel is written
//! per workgroup; lanes appear only through reductions (`Expr::Reduce`), parallel loops
//! (`Stmt::ParFor`) and, after `lanes::expand`, explicit SIMT regions (`Stmt::Lanes`).
//! This module holds data only; it never checks, rewrites or lowers anything.

use super::types::{Const, ScalarType};
use crate::schedule::Schedule;

macro_rules! entity {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize { self.0 as usize }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// A kernel parameter (buffer or scalar), by position.
    ParamId, "p");
entity!(
    /// A workgroup-shared array.
    SharedId, "s");
entity!(
    /// A local variable (immutable `let` or a mutable private value).
    Var, "v");

/// The most threads per workgroup a kernel may ask for (`Kernel::block`): the largest
/// workgroup any supported GPU launches.
pub const MAX_BLOCK: u32 = 1024;
/// The most workgroups `min_groups` may ask a compute unit to hold at once (an SM holds 32).
pub const MAX_MIN_GROUPS: u32 = 32;

/// Who may write a buffer parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    ReadWrite,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A global buffer of `elem`, passed as `&[T]` or `&mut [T]`.
    Buffer { elem: ScalarType, access: Access },
    /// A scalar passed by value, uniform over the launch.
    Scalar(ScalarType),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

/// A workgroup-shared array of fixed length.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedArray {
    pub name: String,
    pub elem: ScalarType,
    pub len: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarDecl {
    pub name: String,
    pub ty: ScalarType,
    pub mutable: bool,
}

/// Declares a kernel the row-batched sibling of an m=1 kernel: row `r` of this kernel must
/// compute exactly what the m=1 kernel computes when run on row `r`'s slice of every
/// row-major buffer. Parameters are matched by name; buffers listed in `row_strides` hold
/// one row every `stride` elements, the others are shared by all rows (weights).
///
/// Two additions make sequential kernels siblings too (a scan over tokens, a KV append):
/// - `row_steps`: integer scalars that advance per row; the m=1 kernel runs row `r` with
///   `param + r · step` (a position, a context length);
/// - `carried`: buffers whose contents flow from row to row (recurrent state); the m=1 kernel
///   runs row `r` on what row `r − 1` left in them, and their final contents after the last
///   row are compared instead of per-row slices.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sibling {
    pub of: String,
    /// The scalar parameter holding the row count.
    pub rows: ParamId,
    pub row_strides: Vec<(ParamId, Expr)>,
    pub row_steps: Vec<(ParamId, Expr)>,
    pub carried: Vec<ParamId>,
}

impl Sibling {
    /// A sibling with row strides only (no stepped scalars, no carried state).
    pub fn strided(of: impl Into<String>, rows: ParamId, row_strides: Vec<(ParamId, Expr)>) -> Sibling {
        Sibling { of: of.into(), rows, row_strides, row_steps: Vec::new(), carried: Vec::new() }
    }
}

/// Values the verifier gives to integer scalar parameters when it executes a kernel
/// symbolically, in addition to the values it derives from the kernel (`verify::shapes`:
/// derived values outside a listed parameter's range are dropped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct VerifyShapes {
    pub values: Vec<(ParamId, Vec<u64>)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    pub shared: Vec<SharedArray>,
    pub vars: Vec<VarDecl>,
    /// Workgroups per axis (1 to 3 axes), index-typed expressions over scalar parameters.
    pub grid: Vec<Expr>,
    /// Threads per workgroup the author asks for (`block = 256`): a launch knob, never part
    /// of the arithmetic (lane counts live in the schedules). `None`: the target's wave width,
    /// or the widest lane region rounded up to it. A GPU rounds it up to its wave width.
    pub block: Option<u32>,
    /// Workgroups the author asks to fit on one compute unit at once (`min_groups = 2`): a
    /// launch knob like `block`, never part of the arithmetic. A GPU target limits the
    /// registers a thread may use so that this many fit (NVPTX `.minnctapersm`, AMDGPU
    /// `amdgpu-waves-per-eu`), spilling if it must; `None` leaves that to the compiler.
    pub min_groups: Option<u32>,
    pub body: Vec<Stmt>,
    pub sibling: Option<Sibling>,
    pub verify_shapes: VerifyShapes,
}

/// Where a load or store goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    Param(ParamId),
    Shared(SharedId),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// Defines `var` (first and only definition).
    Let {
        var: Var,
        value: Expr,
    },
    /// A reduction with one result per row of a tile: defines `vars[j]` (each its first and
    /// only definition) as `value` evaluated with `row` = j, for j in `0..vars.len()`. `value`
    /// is an `Expr::Reduce` whose body may read `row` (an index, in scope only there), so each
    /// result is exactly the one-row reduction of its row, in its own declared order. What
    /// does not depend on `row` (the weight loads and their unpacking) is the same for every
    /// row: `lanes::expand` computes it once per element and updates one partial per row.
    LetRows {
        vars: Vec<Var>,
        row: Var,
        value: Expr,
    },
    /// Updates a mutable `var`. A float update inside a loop is an accumulation and must be
    /// a declared reduction (the verifier rejects it otherwise).
    Assign {
        var: Var,
        value: Expr,
    },
    Store {
        buf: Buf,
        index: Expr,
        value: Expr,
    },
    /// `for var in (start..end).step_by(step)`, sequential and uniform over the workgroup.
    For {
        var: Var,
        start: Expr,
        end: Expr,
        step: Expr,
        body: Vec<Stmt>,
    },
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
    },
    /// `for var in 0..end`, iterations independent, spread over the workgroup's lanes;
    /// ends with a workgroup barrier. With a `team` of L lanes each iteration runs on L
    /// lanes of its own (the workgroup holds `block / L` teams), and a lane reduction in its
    /// body runs on that team (`lanes(L)`): several outputs per workgroup, one per team. The
    /// team changes where iterations run, never what they compute.
    ParFor {
        var: Var,
        end: Expr,
        team: Option<u32>,
        body: Vec<Stmt>,
    },
    /// A SIMT region: `count` lanes each run `body` with `lane` bound to their lane index,
    /// in lockstep at every shuffle. Produced by `lanes::expand` from a reduction, whose
    /// schedule it records in `implements` so the verifier can check the code against it.
    Lanes {
        lane: Var,
        count: u32,
        implements: Option<Implements>,
        body: Vec<Stmt>,
    },
    /// Workgroup barrier: must sit in uniform control flow.
    Barrier,
    /// A precondition of the launch (`check!(cond)`): `cond`, a bool, must hold wherever the
    /// statement is reached. A launch where it does not fails, naming the kernel and check
    /// `id` (the checks' source order), as a bounds error does: the host returns from the
    /// workgroup, a GPU thread records the failure and goes on (its results are not to be
    /// used). The sibling verifier takes an equality `a == b` of two input elements as a fact
    /// of every launch that succeeds (`verify::sibling`).
    Check {
        id: u32,
        cond: Expr,
    },
    /// The integer matrix-unit step (`mma_i8`): a 16×8 i32 tile of workgroup memory set to
    /// the exact product of two int8 tiles of workgroup memory (`MmaI8`). A statement of a
    /// whole wave: it sits in uniform control flow or in the body of a `par` team of 32.
    MmaI8(Box<MmaI8>),
}

/// Rows of the matrix-unit step's output tile (`Stmt::MmaI8`).
pub const MMA_M: u32 = 16;
/// Columns of the output tile.
pub const MMA_N: u32 = 8;
/// The depth of one step, in int8 elements: 32, i.e. `MMA_K_WORDS` u32 words of 4 bytes.
pub const MMA_K: u32 = 32;
pub const MMA_K_WORDS: u32 = MMA_K / 4;
/// The lanes that run one matrix step together: a 32-lane wave (an NVIDIA warp, a gfx11
/// wave32), or a `par` team of 32.
pub const MMA_WAVE: u32 = 32;

/// One operand of `Stmt::MmaI8`: the elements `offset + i · stride + j` of a workgroup
/// array, `i` the tile's row (A, C) or column (B), `j` the word (A, B) or column (C).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    pub array: SharedId,
    pub offset: Expr,
    pub stride: Expr,
}

/// `C = A · B` over `32 · steps` int8 elements, exact:
/// `c[c.offset + m · c.stride + n] = Σ_{w < 8 · steps} dot4_i8(a[a.offset + m · a.stride + w],
/// b[b.offset + n · b.stride + w])` for m in 0..16 and n in 0..8, where `a` and `b` are u32
/// words of four little-endian i8 (A row-major: a row is `8 · steps` words; B stored by
/// columns: a column is `8 · steps` words) and `c` is i32. The verifier proves the sum cannot
/// wrap (`steps` at most 4095 by its range), so it is the mathematical sum, the same integer
/// in any order: the host adds in `w` order (`MmaI8::reference`), sm_80+ runs `mma.sync
/// .m16n8k32.s8` per step, gfx11 two `v_wmma_i32_16x16x16_iu8`. Which lane holds which
/// element is the lowering's business; only the stored tile is the operation's meaning.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MmaI8 {
    /// The output: i32, 16 rows of 8.
    pub c: Tile,
    /// The left operand: u32 words, 16 rows of `8 · steps`.
    pub a: Tile,
    /// The right operand: u32 words, 8 columns of `8 · steps`.
    pub b: Tile,
    /// How many 32-deep steps (an index).
    pub steps: Expr,
}

impl MmaI8 {
    /// The exact output tile, `[m][n]`, over plain slices (the definition every lowering
    /// and test reference computes). A word outside a slice reads 0, as a failed bounds
    /// check does.
    pub fn reference(
        a: &[u32],
        a_offset: usize,
        a_stride: usize,
        b: &[u32],
        b_offset: usize,
        b_stride: usize,
        steps: usize,
    ) -> [[i32; MMA_N as usize]; MMA_M as usize] {
        let word = |s: &[u32], i: usize| s.get(i).copied().unwrap_or(0);
        let mut c = [[0i32; MMA_N as usize]; MMA_M as usize];
        for (m, row) in c.iter_mut().enumerate() {
            for (n, out) in row.iter_mut().enumerate() {
                let mut acc = 0i32;
                for w in 0..MMA_K_WORDS as usize * steps {
                    let x = word(a, a_offset + m * a_stride + w);
                    let y = word(b, b_offset + n * b_stride + w);
                    acc = Dot4Kind::I8I8.eval(x, y, acc);
                }
                *out = acc;
            }
        }
        c
    }

    /// The four tiles' expressions: offsets and strides of C, A, B, then `steps`.
    pub fn exprs(&self) -> [&Expr; 7] {
        [&self.c.offset, &self.c.stride, &self.a.offset, &self.a.stride, &self.b.offset, &self.b.stride, &self.steps]
    }

    pub fn exprs_mut(&mut self) -> [&mut Expr; 7] {
        [
            &mut self.c.offset,
            &mut self.c.stride,
            &mut self.a.offset,
            &mut self.a.stride,
            &mut self.b.offset,
            &mut self.b.stride,
            &mut self.steps,
        ]
    }

    /// The same step with every expression replaced by `f`'s value of it.
    pub fn map_exprs<E>(self, mut f: impl FnMut(Expr) -> Result<Expr, E>) -> Result<MmaI8, E> {
        let MmaI8 { c, a, b, steps } = self;
        let mut tile =
            |t: Tile| -> Result<Tile, E> { Ok(Tile { array: t.array, offset: f(t.offset)?, stride: f(t.stride)? }) };
        let (c, a, b) = (tile(c)?, tile(a)?, tile(b)?);
        Ok(MmaI8 { c, a, b, steps: f(steps)? })
    }
}

/// What a `Lanes` region claims to compute: `results[0] = reduce(op, schedule, i in 0..len,
/// body)`; for a region expanded from a `LetRows` (`row` set), `results[j]` is the reduction
/// with `row` = j, each checked against its own tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Implements {
    pub results: Vec<Var>,
    pub row: Option<Var>,
    pub reduce: Box<Reduce>,
}

impl Implements {
    /// The claim of a one-result region.
    pub fn one(result: Var, reduce: Reduce) -> Implements {
        Implements { results: vec![result], row: None, reduce: Box::new(reduce) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinOp {
    pub const ALL: [BinOp; 18] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Min,
        BinOp::Max,
        BinOp::And,
        BinOp::Or,
        BinOp::Xor,
        BinOp::Shl,
        BinOp::Shr,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
    ];
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Rem => "rem",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
            BinOp::Eq => "eq",
            BinOp::Ne => "ne",
            BinOp::Lt => "lt",
            BinOp::Le => "le",
            BinOp::Gt => "gt",
            BinOp::Ge => "ge",
        }
    }
    pub fn from_name(s: &str) -> Option<BinOp> {
        BinOp::ALL.into_iter().find(|op| op.name() == s)
    }
    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    /// Bitwise not for integers, logical not for bool.
    Not,
    Abs,
    /// IEEE square root, correctly rounded on every target.
    Sqrt,
    Floor,
}

impl UnOp {
    pub const ALL: [UnOp; 5] = [UnOp::Neg, UnOp::Not, UnOp::Abs, UnOp::Sqrt, UnOp::Floor];
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Not => "not",
            UnOp::Abs => "abs",
            UnOp::Sqrt => "sqrt",
            UnOp::Floor => "floor",
        }
    }
    pub fn from_name(s: &str) -> Option<UnOp> {
        UnOp::ALL.into_iter().find(|op| op.name() == s)
    }
}

/// baro's own elementwise functions, defined from IEEE basic operations (see `mathlib`) so
/// every target computes the same bits. All take and return f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    Exp,
    Log,
    Sigmoid,
    Silu,
    Softplus,
    Rsqrt,
}

impl MathFn {
    pub const ALL: [MathFn; 6] =
        [MathFn::Exp, MathFn::Log, MathFn::Sigmoid, MathFn::Silu, MathFn::Softplus, MathFn::Rsqrt];
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Exp => "exp",
            MathFn::Log => "log",
            MathFn::Sigmoid => "sigmoid",
            MathFn::Silu => "silu",
            MathFn::Softplus => "softplus",
            MathFn::Rsqrt => "rsqrt",
        }
    }
    pub fn from_name(s: &str) -> Option<MathFn> {
        MathFn::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// The operand signedness of a 4-way byte dot (`Expr::Dot4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dot4Kind {
    /// Both words' bytes are i8 (`dot4_i8`: PTX `dp4a.s32.s32`, gfx11 `v_dot4_i32_iu8`).
    I8I8,
    /// The first word's bytes are u8, the second's i8 (`dot4_u8i8`: PTX `dp4a.u32.s32`).
    U8I8,
}

impl Dot4Kind {
    pub const ALL: [Dot4Kind; 2] = [Dot4Kind::I8I8, Dot4Kind::U8I8];
    /// The name in the text form and in the Rust front end.
    pub fn name(self) -> &'static str {
        match self {
            Dot4Kind::I8I8 => "dot4_i8",
            Dot4Kind::U8I8 => "dot4_u8i8",
        }
    }
    pub fn from_name(s: &str) -> Option<Dot4Kind> {
        Dot4Kind::ALL.into_iter().find(|k| k.name() == s)
    }
    /// Whether the first word's bytes are signed (the second's always are).
    pub fn a_signed(self) -> bool {
        self == Dot4Kind::I8I8
    }
    /// The exact value: `c + Σ_{i<4} a.byte(i) · b.byte(i)`, wrapping in i32 (as `dp4a` and
    /// an unclamped `v_dot4` do). Every lowering and the plain-Rust references compute this.
    pub fn eval(self, a: u32, b: u32, c: i32) -> i32 {
        let mut acc = c;
        for i in 0..4 {
            let x = (a >> (8 * i)) as u8;
            let y = (b >> (8 * i)) as u8 as i8 as i32;
            let x = if self.a_signed() { x as i8 as i32 } else { x as i32 };
            acc = acc.wrapping_add(x * y);
        }
        acc
    }
}

/// The combining operation of a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Floating-point or integer sum; for floats the schedule fixes the tree.
    Add,
    /// Exact in any order for non-NaN values; NaN propagates, and `max(-0, +0)` is `+0`.
    Max,
    Min,
    /// An f32 sum of products accumulated with one rounding each: the body is a product
    /// `a * b` (possibly under expression `let`s), and wherever the schedule's tree adds
    /// element i to a partial, the partial becomes `fma(a_i, b_i, partial)` (a lane's
    /// `acc = fma(x_i, w_i, acc)` from +0.0). Partials are combined by additions, as the
    /// schedule says.
    FmaSum,
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Add => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::FmaSum => "fma_sum",
        }
    }
    pub fn from_name(s: &str) -> Option<ReduceOp> {
        match s {
            "sum" => Some(ReduceOp::Add),
            "max" => Some(ReduceOp::Max),
            "min" => Some(ReduceOp::Min),
            "fma_sum" => Some(ReduceOp::FmaSum),
            _ => None,
        }
    }
    /// The operation that combines two partials (for `FmaSum`, an addition; its elements are
    /// accumulated by fma instead).
    pub fn bin_op(self) -> BinOp {
        match self {
            ReduceOp::Add | ReduceOp::FmaSum => BinOp::Add,
            ReduceOp::Max => BinOp::Max,
            ReduceOp::Min => BinOp::Min,
        }
    }
}

/// `op` over `var in 0..len` of `body`, combined in the tree `schedule` gives for `len`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reduce {
    pub op: ReduceOp,
    pub ty: ScalarType,
    pub schedule: Schedule,
    pub var: Var,
    pub len: Expr,
    pub body: Expr,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    Const(Const),
    Var(Var),
    /// A scalar parameter's value.
    Param(ParamId),
    /// The workgroup's index along grid axis 0, 1 or 2.
    GroupId(u8),
    Load {
        buf: Buf,
        index: Box<Expr>,
    },
    Unary {
        op: UnOp,
        arg: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Select {
        cond: Box<Expr>,
        then: Box<Expr>,
        els: Box<Expr>,
    },
    /// Numeric conversion: float↔float round to nearest even, int→float round to nearest
    /// even, float→int truncates toward zero and saturates (NaN → 0), int↔int wraps.
    Cast {
        to: ScalarType,
        arg: Box<Expr>,
    },
    /// Reinterprets the bits; the two types have the same width.
    Bitcast {
        to: ScalarType,
        arg: Box<Expr>,
    },
    Call {
        func: MathFn,
        arg: Box<Expr>,
    },
    /// `a · b + c` rounded once (IEEE 754 fusedMultiplyAdd), all three f32. An operation of
    /// its own: it is never `a * b + c` (two roundings), and no pass forms one from the other.
    Fma {
        a: Box<Expr>,
        b: Box<Expr>,
        c: Box<Expr>,
    },
    /// `c + Σ_{i<4} a.byte(i) · b.byte(i)` (bytes little-endian, signedness per `kind`),
    /// `a` and `b` u32, `c` and the result i32, wrapping like `dp4a`. Exact integer
    /// arithmetic: every target computes the same integer (`Dot4Kind::eval`).
    Dot4 {
        kind: Dot4Kind,
        a: Box<Expr>,
        b: Box<Expr>,
        c: Box<Expr>,
    },
    /// `let var = value in body`, for sharing inside one expression.
    Let {
        var: Var,
        value: Box<Expr>,
        body: Box<Expr>,
    },
    Reduce(Box<Reduce>),
    /// The value `value` holds in lane `lane ^ mask` (only inside a `Lanes` region, in
    /// uniform control flow).
    ShuffleXor {
        value: Box<Expr>,
        mask: u32,
    },
}

impl Expr {
    pub fn c(c: Const) -> Expr {
        Expr::Const(c)
    }
    pub fn index(v: u64) -> Expr {
        Expr::Const(Const::index(v))
    }
    pub fn f32(v: f32) -> Expr {
        Expr::Const(Const::f32(v))
    }
    pub fn bin(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }
    }
    pub fn un(op: UnOp, arg: Expr) -> Expr {
        Expr::Unary { op, arg: Box::new(arg) }
    }
    pub fn load(buf: Buf, index: Expr) -> Expr {
        Expr::Load { buf, index: Box::new(index) }
    }
    pub fn cast(to: ScalarType, arg: Expr) -> Expr {
        Expr::Cast { to, arg: Box::new(arg) }
    }
    pub fn bitcast(to: ScalarType, arg: Expr) -> Expr {
        Expr::Bitcast { to, arg: Box::new(arg) }
    }
    pub fn select(cond: Expr, then: Expr, els: Expr) -> Expr {
        Expr::Select { cond: Box::new(cond), then: Box::new(then), els: Box::new(els) }
    }
    pub fn call(func: MathFn, arg: Expr) -> Expr {
        Expr::Call { func, arg: Box::new(arg) }
    }
    pub fn fma(a: Expr, b: Expr, c: Expr) -> Expr {
        Expr::Fma { a: Box::new(a), b: Box::new(b), c: Box::new(c) }
    }
    pub fn dot4(kind: Dot4Kind, a: Expr, b: Expr, c: Expr) -> Expr {
        Expr::Dot4 { kind, a: Box::new(a), b: Box::new(b), c: Box::new(c) }
    }
    pub fn let_in(var: Var, value: Expr, body: Expr) -> Expr {
        Expr::Let { var, value: Box::new(value), body: Box::new(body) }
    }

    /// Calls `f` on every direct sub-expression.
    pub fn for_each_child(&self, mut f: impl FnMut(&Expr)) {
        match self {
            Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_) => {}
            Expr::Load { index, .. } => f(index),
            Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Call { arg, .. } => {
                f(arg)
            }
            Expr::Binary { lhs, rhs, .. } => {
                f(lhs);
                f(rhs)
            }
            Expr::Select { cond, then, els } => {
                f(cond);
                f(then);
                f(els)
            }
            Expr::Fma { a, b, c } | Expr::Dot4 { a, b, c, .. } => {
                f(a);
                f(b);
                f(c)
            }
            Expr::Let { value, body, .. } => {
                f(value);
                f(body)
            }
            Expr::Reduce(r) => {
                f(&r.len);
                f(&r.body)
            }
            Expr::ShuffleXor { value, .. } => f(value),
        }
    }

    /// Calls `f` on every direct sub-expression, mutably (in `for_each_child`'s order).
    pub fn for_each_child_mut(&mut self, mut f: impl FnMut(&mut Expr)) {
        match self {
            Expr::Const(_) | Expr::Var(_) | Expr::Param(_) | Expr::GroupId(_) => {}
            Expr::Load { index, .. } => f(index),
            Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Call { arg, .. } => {
                f(arg)
            }
            Expr::Binary { lhs, rhs, .. } => {
                f(lhs);
                f(rhs)
            }
            Expr::Select { cond, then, els } => {
                f(cond);
                f(then);
                f(els)
            }
            Expr::Fma { a, b, c } | Expr::Dot4 { a, b, c, .. } => {
                f(a);
                f(b);
                f(c)
            }
            Expr::Let { value, body, .. } => {
                f(value);
                f(body)
            }
            Expr::Reduce(r) => {
                f(&mut r.len);
                f(&mut r.body)
            }
            Expr::ShuffleXor { value, .. } => f(value),
        }
    }

    /// True if `pred` holds for this expression or any sub-expression.
    pub fn any(&self, pred: &impl Fn(&Expr) -> bool) -> bool {
        if pred(self) {
            return true;
        }
        let mut found = false;
        self.for_each_child(|c| found = found || c.any(pred));
        found
    }
}

impl Kernel {
    pub fn new(name: impl Into<String>) -> Kernel {
        Kernel {
            name: name.into(),
            params: Vec::new(),
            shared: Vec::new(),
            vars: Vec::new(),
            grid: Vec::new(),
            block: None,
            min_groups: None,
            body: Vec::new(),
            sibling: None,
            verify_shapes: VerifyShapes::default(),
        }
    }
    pub fn param(&self, p: ParamId) -> &Param {
        &self.params[p.index()]
    }
    pub fn var(&self, v: Var) -> &VarDecl {
        &self.vars[v.index()]
    }
    pub fn param_by_name(&self, name: &str) -> Option<ParamId> {
        self.params.iter().position(|p| p.name == name).map(|i| ParamId(i as u32))
    }
    pub fn add_param(&mut self, name: impl Into<String>, kind: ParamKind) -> ParamId {
        self.params.push(Param { name: name.into(), kind });
        ParamId(self.params.len() as u32 - 1)
    }
    pub fn add_var(&mut self, name: impl Into<String>, ty: ScalarType, mutable: bool) -> Var {
        self.vars.push(VarDecl { name: name.into(), ty, mutable });
        Var(self.vars.len() as u32 - 1)
    }
    pub fn add_shared(&mut self, name: impl Into<String>, elem: ScalarType, len: u32) -> SharedId {
        self.shared.push(SharedArray { name: name.into(), elem, len });
        SharedId(self.shared.len() as u32 - 1)
    }
    /// The element type behind a buffer reference.
    pub fn buf_elem(&self, buf: Buf) -> Option<ScalarType> {
        match buf {
            Buf::Param(p) => match &self.params.get(p.index())?.kind {
                ParamKind::Buffer { elem, .. } => Some(*elem),
                ParamKind::Scalar(_) => None,
            },
            Buf::Shared(s) => self.shared.get(s.index()).map(|a| a.elem),
        }
    }
    pub fn buf_name(&self, buf: Buf) -> &str {
        match buf {
            Buf::Param(p) => self.params.get(p.index()).map_or("?", |x| x.name.as_str()),
            Buf::Shared(s) => self.shared.get(s.index()).map_or("?", |x| x.name.as_str()),
        }
    }
}
