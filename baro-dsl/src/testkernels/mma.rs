//! Kernels of the integer matrix step (`Stmt::MmaI8`) for the crate's tests: up to two 16×8
//! tiles `y[j] = a[j] · b` of int8 words, staged in padded workgroup arrays, in uniform code
//! (one step after the other) or one tile per `par` team of 32.
//!
//! Test support only (`#[doc(hidden)]`): nothing in baro's pipeline may depend on it.

use crate::ir::{
    Access, BinOp, Buf, Expr, Kernel, MmaI8, ParamKind, ScalarType, Stmt, Tile, Var, MMA_K_WORDS, MMA_M, MMA_N,
};

/// The most steps (of 32 int8) the kernels take: `steps.min(MMA_MAX_STEPS)`.
pub const MMA_MAX_STEPS: u64 = 4;
/// The most tiles: `tiles.min(MMA_MAX_TILES)`.
pub const MMA_MAX_TILES: u64 = 2;
/// Words of padding after each staged row or column (what a bank-conflict-free layout adds).
pub const MMA_PAD: u64 = 4;
/// Where the left tile starts in its workgroup array, and C's offset and row stride.
pub const MMA_A_OFFSET: u64 = 4;
pub const MMA_C_OFFSET: u64 = 1;
pub const MMA_C_STRIDE: u64 = 9;

const IDX: ScalarType = ScalarType::INDEX;

fn ix(n: u64) -> Expr {
    Expr::index(n)
}
fn ve(v: Var) -> Expr {
    Expr::Var(v)
}
fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::bin(op, a, b)
}
fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}
fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Mul, a, b)
}
fn div(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Div, a, b)
}
fn rem(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Rem, a, b)
}

/// `mma_tiles(a: &[u32], b: &[u32], y: &mut [i32], tiles: usize, steps: usize)`: with
/// `t = tiles.min(2)`, `s = steps.min(4)` and `kw = 8 s` words per row: `a` holds t tiles of
/// 16 rows of kw words (row-major), `b` 8 columns of kw words, and `y[128 j + 8 m + n]` is
/// `MmaI8::reference`'s `[m][n]` of tile j. `team`: one tile per `par` team of 32 (block 64);
/// otherwise a sequential loop over the tiles in uniform code. `steps` replaces the step
/// count `s` in the matrix step (a verifier test's unbounded count).
pub fn mma_tiles_with(team: bool, steps: Option<Expr>) -> Kernel {
    let mut k = Kernel::new(if team { "mma_tiles_team" } else { "mma_tiles" });
    let a = k.add_param("a", ParamKind::Buffer { elem: ScalarType::U32, access: Access::Read });
    let b = k.add_param("b", ParamKind::Buffer { elem: ScalarType::U32, access: Access::Read });
    let y = k.add_param("y", ParamKind::Buffer { elem: ScalarType::I32, access: Access::ReadWrite });
    let tiles = k.add_param("tiles", ParamKind::Scalar(IDX));
    let steps_p = k.add_param("steps", ParamKind::Scalar(IDX));
    let max_kw = MMA_MAX_STEPS * MMA_K_WORDS as u64;
    let a_len = MMA_A_OFFSET + MMA_MAX_TILES * MMA_M as u64 * (max_kw + MMA_PAD);
    let sa = k.add_shared("sa", ScalarType::U32, a_len as u32);
    let sb = k.add_shared("sb", ScalarType::U32, (MMA_N as u64 * (max_kw + MMA_PAD)) as u32);
    let sc = k.add_shared("sc", ScalarType::I32, (MMA_C_OFFSET + MMA_MAX_TILES * 16 * MMA_C_STRIDE) as u32);
    k.grid = vec![ix(1)];
    k.block = team.then_some(64);
    let t = k.add_var("t", IDX, false);
    let s = k.add_var("s", IDX, false);
    let kw = k.add_var("kw", IDX, false);
    let stride = k.add_var("stride", IDX, false);
    let mut body = vec![
        Stmt::Let { var: t, value: bin(BinOp::Min, Expr::Param(tiles), ix(MMA_MAX_TILES)) },
        Stmt::Let { var: s, value: bin(BinOp::Min, Expr::Param(steps_p), ix(MMA_MAX_STEPS)) },
        Stmt::Let { var: kw, value: mul(ve(s), ix(MMA_K_WORDS as u64)) },
        Stmt::Let { var: stride, value: add(ve(kw), ix(MMA_PAD)) },
    ];
    let tile_words = |stride: Var| mul(ix(MMA_M as u64), ve(stride));
    // Stage A: element i of `a` is tile i / (16 kw), row (i / kw) % 16, word i % kw.
    let i = k.add_var("i", IDX, false);
    let (j, r, w) = (div(ve(i), mul(ix(16), ve(kw))), rem(div(ve(i), ve(kw)), ix(16)), rem(ve(i), ve(kw)));
    let at = add(add(add(ix(MMA_A_OFFSET), mul(j, tile_words(stride))), mul(r, ve(stride))), w);
    body.push(Stmt::ParFor {
        var: i,
        end: mul(ve(t), mul(ix(16), ve(kw))),
        team: None,
        body: vec![Stmt::Store { buf: Buf::Shared(sa), index: at, value: Expr::load(Buf::Param(a), ve(i)) }],
    });
    // Stage B: column i / kw, word i % kw.
    let i = k.add_var("i", IDX, false);
    let at = add(mul(div(ve(i), ve(kw)), ve(stride)), rem(ve(i), ve(kw)));
    body.push(Stmt::ParFor {
        var: i,
        end: mul(ix(MMA_N as u64), ve(kw)),
        team: None,
        body: vec![Stmt::Store { buf: Buf::Shared(sb), index: at, value: Expr::load(Buf::Param(b), ve(i)) }],
    });
    let j = k.add_var("j", IDX, false);
    let step = Stmt::MmaI8(Box::new(MmaI8 {
        c: Tile {
            array: sc,
            offset: add(ix(MMA_C_OFFSET), mul(ve(j), ix(16 * MMA_C_STRIDE))),
            stride: ix(MMA_C_STRIDE),
        },
        a: Tile { array: sa, offset: add(ix(MMA_A_OFFSET), mul(ve(j), tile_words(stride))), stride: ve(stride) },
        b: Tile { array: sb, offset: ix(0), stride: ve(stride) },
        steps: steps.unwrap_or(ve(s)),
    }));
    body.push(match team {
        true => Stmt::ParFor { var: j, end: ve(t), team: Some(32), body: vec![step] },
        false => Stmt::For { var: j, start: ix(0), end: ve(t), step: ix(1), body: vec![step] },
    });
    // Write out: y[128 j + 8 m + n] = sc[1 + 144 j + 9 m + n].
    let i = k.add_var("i", IDX, false);
    let (j, m, n) = (div(ve(i), ix(128)), div(rem(ve(i), ix(128)), ix(8)), rem(ve(i), ix(8)));
    let at = add(add(add(ix(MMA_C_OFFSET), mul(j, ix(16 * MMA_C_STRIDE))), mul(m, ix(MMA_C_STRIDE))), n);
    body.push(Stmt::ParFor {
        var: i,
        end: mul(ve(t), ix(128)),
        team: None,
        body: vec![Stmt::Store { buf: Buf::Param(y), index: ve(i), value: Expr::load(Buf::Shared(sc), at) }],
    });
    k.body = body;
    k
}

/// `mma_tiles_with(team, None)`: the steps bounded by `steps.min(4)`.
pub fn mma_tiles(team: bool) -> Kernel {
    mma_tiles_with(team, None)
}
