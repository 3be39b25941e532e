//! The kernel IR: types, the kernel data structure, expression typing and the text form.

mod kernel;
mod text;
mod typeck;
mod types;

pub use kernel::{
    Access, BinOp, Buf, Dot4Kind, Expr, Implements, Kernel, MathFn, MmaI8, Param, ParamId, ParamKind, Reduce, ReduceOp,
    SharedArray, SharedId, Sibling, Stmt, Tile, UnOp, Var, VarDecl, VerifyShapes, MAX_BLOCK, MAX_MIN_GROUPS, MMA_K,
    MMA_K_WORDS, MMA_M, MMA_N, MMA_WAVE,
};
pub use text::{ParseError, MAX_NESTING};
pub use typeck::TypeError;
pub use types::{Const, ScalarType};
