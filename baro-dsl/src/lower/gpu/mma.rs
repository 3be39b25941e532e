//! The integer matrix step (`Stmt::MmaI8`) on a GPU. Each lane of a 32-lane wave loads its
//! fragments of the A and B tiles from workgroup memory, the wave runs the target's matrix
//! instruction once per 32-deep step with the accumulators in registers, and each lane stores
//! the elements of C it holds. Which lane holds which element is private to this file: the
//! stored tile is `MmaI8::reference`'s on every target (the sums provably do not wrap, so the
//! instruction's internal order cannot matter). Every tile access is bounds-checked like a
//! load or store (a failed read gives 0 and is recorded, a failed write is skipped and
//! recorded). Nothing here runs outside a whole wave: the verifier only lets the statement
//! stand in uniform code or at the top of a `par` team of 32.

use inkwell::types::BasicType;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate as P;

use super::{Arch, Gpu};
use crate::ir::{Buf, MmaI8, ScalarType, SharedId, MMA_K_WORDS, MMA_WAVE};
use crate::lower::expr::ExprLeaves;
use crate::lower::{fail, R};

/// How a target runs the matrix step: every choice stores `MmaI8::reference`'s tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MmaIsa {
    /// sm_80 and later: `llvm.nvvm.mma.m16n8k32.row.col.s8`, i.e. PTX
    /// `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32` (no `.satfinite`: the sum wraps,
    /// like the IR's, and the verifier proved it does not).
    MmaSync,
    /// gfx11 wave32: `llvm.amdgcn.wmma.i32.16x16x16.iu8` (`v_wmma_i32_16x16x16_iu8`), both
    /// operands signed, clamp off; two per step (K = 16 each), B's columns 8..15 zero.
    Wmma,
    /// No matrix instruction: each lane computes its four elements with exact dot4s.
    Exact,
}

impl MmaIsa {
    pub(super) fn of(target: &crate::target::Target) -> MmaIsa {
        use crate::target::Target;
        match target {
            Target::Nvptx { sm } if *sm >= 80 => MmaIsa::MmaSync,
            Target::Amdgpu { arch } if arch.starts_with("gfx11") && target.wave_width() == Some(32) => MmaIsa::Wmma,
            _ => MmaIsa::Exact,
        }
    }
}

/// The step's operands as lowered values (all i64 element indices or counts).
#[derive(Clone, Copy)]
struct Operands<'ctx> {
    c_off: IntValue<'ctx>,
    c_stride: IntValue<'ctx>,
    a_off: IntValue<'ctx>,
    a_stride: IntValue<'ctx>,
    b_off: IntValue<'ctx>,
    b_stride: IntValue<'ctx>,
    steps: IntValue<'ctx>,
}

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    pub(super) fn mma_i8(&mut self, m: &'a MmaI8) -> R<()> {
        if self.region.is_some() {
            return fail("a matrix step inside a `Lanes` region");
        }
        if self.team.is_some_and(|t| t != MMA_WAVE) {
            return fail(format!(
                "a matrix step in a `par` team of {} lanes: expected {MMA_WAVE}",
                self.team.unwrap_or(0)
            ));
        }
        let mut v = [self.ir.i64(0); 7];
        for (slot, e) in v.iter_mut().zip(m.exprs()) {
            *slot = self.index(e)?.0;
        }
        let [c_off, c_stride, a_off, a_stride, b_off, b_stride, steps] = v;
        let ops = Operands { c_off, c_stride, a_off, a_stride, b_off, b_stride, steps };
        let lane = self.ir.b.build_int_unsigned_rem(self.tid, self.ir.i64(MMA_WAVE as u64), "mma_lane")?;
        match self.mma {
            MmaIsa::MmaSync => self.mma_sync(m, ops, lane)?,
            MmaIsa::Wmma => self.wmma(m, ops, lane)?,
            MmaIsa::Exact => self.mma_exact(m, ops, lane)?,
        }
        // The lanes of the wave read each other's stores next: order them.
        match self.arch {
            Arch::Nvptx => self.void_intrinsic("llvm.nvvm.bar.warp.sync", &[self.ir.i32(u32::MAX).into()])?,
            Arch::Amdgpu => self.void_intrinsic("llvm.amdgcn.wave.barrier", &[])?,
        }
        Ok(())
    }

    fn void_intrinsic(&self, name: &str, args: &[BasicValueEnum<'ctx>]) -> R<()> {
        let Some(i) = inkwell::intrinsics::Intrinsic::find(name) else {
            return fail(format!("llvm intrinsic `{name}` not found"));
        };
        let Some(f) = i.get_declaration(self.ir.m, &[]) else {
            return fail(format!("llvm intrinsic `{name}` has no declaration"));
        };
        let args: Vec<_> = args.iter().map(|&a| a.into()).collect();
        self.ir.b.build_call(f, &args, "")?;
        Ok(())
    }

    /// `array[base + row · stride + word]` (u32, bounds-checked: 0 and a record outside).
    fn tile_word(
        &mut self,
        array: SharedId,
        base: IntValue<'ctx>,
        stride: IntValue<'ctx>,
        row: IntValue<'ctx>,
        word: IntValue<'ctx>,
    ) -> R<IntValue<'ctx>> {
        let at = self.ir.mul(row, stride)?;
        let at = self.ir.add(base, at)?;
        let idx = self.ir.add(at, word)?;
        self.shared_word(array, idx)
    }

    fn shared_word(&mut self, array: SharedId, idx: IntValue<'ctx>) -> R<IntValue<'ctx>> {
        let i32t = self.ir.cx.i32_type();
        let (base, len, kind, id) = self.access(Buf::Shared(array), false)?;
        let code = self.fail_code(kind, id, false)?;
        let ok = super::checks::call_in_range(self.ir.b, &self.checks, idx, len, code)?;
        if self.k.shared[array.index()].len == 0 {
            return Ok(i32t.const_zero());
        }
        let safe = self.ir.sel(ok, idx, self.ir.i64(0))?;
        let p = unsafe { self.ir.b.build_in_bounds_gep(i32t, base, &[safe], "")? };
        let v = self.ir.b.build_load(i32t, p, "")?.into_int_value();
        self.ir.sel(ok, v, i32t.const_zero())
    }

    /// `c[c_off + row · c_stride + col] = v`, skipped and recorded outside the array.
    fn store_c(
        &mut self,
        m: &MmaI8,
        ops: Operands<'ctx>,
        row: IntValue<'ctx>,
        col: IntValue<'ctx>,
        v: IntValue<'ctx>,
    ) -> R<()> {
        let at = self.ir.mul(row, ops.c_stride)?;
        let at = self.ir.add(ops.c_off, at)?;
        let idx = self.ir.add(at, col)?;
        let (base, len, kind, id) = self.access(Buf::Shared(m.c.array), true)?;
        let ok = self.ir.icmp(P::ULT, idx, len)?;
        let i32t = self.ir.cx.i32_type();
        self.branch(
            ok,
            &mut |g| {
                let p = unsafe { g.ir.b.build_in_bounds_gep(i32t, base, &[idx], "")? };
                g.ir.b.build_store(p, v)?;
                Ok(())
            },
            &mut |g| g.record(kind, id, idx, false),
        )
    }

    /// `n` i32 accumulators set to 0 here (their slots live in the entry block).
    fn accumulators(&mut self, n: u32) -> R<Vec<PointerValue<'ctx>>> {
        let i32t = self.ir.cx.i32_type();
        let mut acc = Vec::new();
        for _ in 0..n {
            let p = self.alloca_zeroed(i32t.into(), "mma_acc")?;
            self.ir.b.build_store(p, i32t.const_zero())?;
            acc.push(p);
        }
        Ok(acc)
    }

    fn load_acc(&self, p: PointerValue<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.ir.b.build_load(self.ir.cx.i32_type(), p, "")?.into_int_value())
    }

    /// `for s in 0..steps` with the step's first word `8 · s` passed to `body`.
    fn over_steps(&mut self, ops: Operands<'ctx>, body: &mut dyn FnMut(&mut Self, IntValue<'ctx>) -> R<()>) -> R<()> {
        let (zero, one) = (self.ir.i64(0), self.ir.i64(1));
        self.for_loop(ScalarType::INDEX, zero, ops.steps, one, None, &mut |g, s| {
            let k0 = g.ir.mul(s, g.ir.i64(MMA_K_WORDS as u64))?;
            body(g, k0)
        })
    }

    /// PTX m16n8k32 .s8 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k32"): with
    /// g = lane / 4 and t = lane % 4, A's registers are row g and g + 8 at words t and t + 4
    /// of the step, B's are column g at words t and t + 4, and D holds rows g, g + 8 at
    /// columns 2t, 2t + 1.
    fn mma_sync(&mut self, m: &MmaI8, ops: Operands<'ctx>, lane: IntValue<'ctx>) -> R<()> {
        let g = self.ir.lshr(lane, self.ir.i64(2))?;
        let t = self.ir.and(lane, self.ir.i64(3))?;
        let g8 = self.ir.add(g, self.ir.i64(8))?;
        let acc = self.accumulators(4)?;
        let (a, b) = (m.a.array, m.b.array);
        self.over_steps(ops, &mut |s, k0| {
            let w0 = s.ir.add(k0, t)?;
            let w1 = s.ir.add(w0, s.ir.i64(4))?;
            let a0 = s.tile_word(a, ops.a_off, ops.a_stride, g, w0)?;
            let a1 = s.tile_word(a, ops.a_off, ops.a_stride, g8, w0)?;
            let a2 = s.tile_word(a, ops.a_off, ops.a_stride, g, w1)?;
            let a3 = s.tile_word(a, ops.a_off, ops.a_stride, g8, w1)?;
            let b0 = s.tile_word(b, ops.b_off, ops.b_stride, g, w0)?;
            let b1 = s.tile_word(b, ops.b_off, ops.b_stride, g, w1)?;
            let mut args: Vec<BasicValueEnum<'ctx>> =
                vec![a0.into(), a1.into(), a2.into(), a3.into(), b0.into(), b1.into()];
            for &p in &acc {
                args.push(s.load_acc(p)?.into());
            }
            let d = s.ir.intrinsic("llvm.nvvm.mma.m16n8k32.row.col.s8", &[], &args)?.into_struct_value();
            for (i, &p) in acc.iter().enumerate() {
                let v = s.ir.b.build_extract_value(d, i as u32, "")?;
                s.ir.b.build_store(p, v)?;
            }
            Ok(())
        })?;
        let t2 = self.ir.shl(t, self.ir.i64(1))?;
        let t21 = self.ir.add(t2, self.ir.i64(1))?;
        for (i, (row, col)) in [(g, t2), (g, t21), (g8, t2), (g8, t21)].into_iter().enumerate() {
            let v = self.load_acc(acc[i])?;
            self.store_c(m, ops, row, col, v)?;
        }
        Ok(())
    }

    /// gfx11 wave32 WMMA 16×16×16 iu8 (AMD's RDNA3 WMMA layout): lane l feeds row l % 16 of
    /// A and column l % 16 of B (16 bytes each, both half-waves the same), and holds
    /// D[2v + l / 16][l % 16] in element v. B's columns 8..15 are zero, so lanes with
    /// l % 16 ≥ 8 hold nothing of C; each step of 32 is two instructions.
    fn wmma(&mut self, m: &MmaI8, ops: Operands<'ctx>, lane: IntValue<'ctx>) -> R<()> {
        let cx = self.ir.cx;
        let i32t = cx.i32_type();
        let (v4, v8) = (i32t.vec_type(4), i32t.vec_type(8));
        let r = self.ir.and(lane, self.ir.i64(15))?;
        let half = self.ir.lshr(lane, self.ir.i64(4))?;
        let has_col = self.ir.icmp(P::ULT, r, self.ir.i64(8))?;
        let acc = self.alloca_zeroed(v8.as_basic_type_enum(), "wmma_acc")?;
        self.ir.b.build_store(acc, v8.const_zero())?;
        let (a, b) = (m.a.array, m.b.array);
        self.over_steps(ops, &mut |s, k0| {
            for h in 0..2u64 {
                let mut av = v4.get_undef();
                let mut bv = v4.get_undef();
                for j in 0..4u64 {
                    let w = s.ir.add(k0, s.ir.i64(4 * h + j))?;
                    let x = s.tile_word(a, ops.a_off, ops.a_stride, r, w)?;
                    // Columns 8..15 of B are zero: their lanes read element 0 of the step's
                    // first column instead (never out of range when the tile is) and drop it.
                    let col = s.ir.sel(has_col, r, s.ir.i64(0))?;
                    let y = s.tile_word(b, ops.b_off, ops.b_stride, col, w)?;
                    let y = s.ir.sel(has_col, y, i32t.const_zero())?;
                    let at = s.ir.i32(j as u32);
                    av = s.ir.b.build_insert_element(av, x, at, "")?;
                    bv = s.ir.b.build_insert_element(bv, y, at, "")?;
                }
                let c = s.ir.b.build_load(v8, acc, "")?;
                let yes = cx.bool_type().const_int(1, false);
                let no = cx.bool_type().const_zero();
                let args: [BasicValueEnum<'ctx>; 6] = [yes.into(), av.into(), yes.into(), bv.into(), c, no.into()];
                let d = s.ir.intrinsic("llvm.amdgcn.wmma.i32.16x16x16.iu8", &[v8.into(), v4.into()], &args)?;
                s.ir.b.build_store(acc, d)?;
            }
            Ok(())
        })?;
        let d = self.ir.b.build_load(v8, acc, "")?.into_vector_value();
        self.branch(
            has_col,
            &mut |g| {
                for v in 0..8u64 {
                    let row = g.ir.add(g.ir.i64(2 * v), half)?;
                    let x = g.ir.b.build_extract_element(d, g.ir.i32(v as u32), "")?.into_int_value();
                    g.store_c(m, ops, row, r, x)?;
                }
                Ok(())
            },
            &mut |_| Ok(()),
        )
    }

    /// Without a matrix instruction: lane l computes the elements the PTX layout gives it
    /// (rows l / 4 and l / 4 + 8, columns 2 (l % 4) and 2 (l % 4) + 1), word by word.
    fn mma_exact(&mut self, m: &MmaI8, ops: Operands<'ctx>, lane: IntValue<'ctx>) -> R<()> {
        let g = self.ir.lshr(lane, self.ir.i64(2))?;
        let t = self.ir.and(lane, self.ir.i64(3))?;
        let g8 = self.ir.add(g, self.ir.i64(8))?;
        let t2 = self.ir.shl(t, self.ir.i64(1))?;
        let t21 = self.ir.add(t2, self.ir.i64(1))?;
        let cells = [(g, t2), (g, t21), (g8, t2), (g8, t21)];
        let acc = self.accumulators(4)?;
        let (a, b) = (m.a.array, m.b.array);
        self.over_steps(ops, &mut |s, k0| {
            for j in 0..MMA_K_WORDS as u64 {
                let w = s.ir.add(k0, s.ir.i64(j))?;
                for (i, &(row, col)) in cells.iter().enumerate() {
                    let x = s.tile_word(a, ops.a_off, ops.a_stride, row, w)?;
                    let y = s.tile_word(b, ops.b_off, ops.b_stride, col, w)?;
                    let c = s.load_acc(acc[i])?;
                    let d = s.ir.dot4_exact(crate::ir::Dot4Kind::I8I8, x, y, c)?;
                    s.ir.b.build_store(acc[i], d)?;
                }
            }
            Ok(())
        })?;
        for (i, (row, col)) in cells.into_iter().enumerate() {
            let v = self.load_acc(acc[i])?;
            self.store_c(m, ops, row, col, v)?;
        }
        Ok(())
    }
}
