//! `Lanes` regions on a GPU: lanes are threads `0..count` (the others skip the region), and
//! after the region every uniform variable the region assigned is broadcast from lane 0 so
//! that all threads agree again.
//!
//! A shuffle whose partner lane is in the same wave is a hardware lane exchange. A region
//! wider than the wave spans the whole workgroup (`block_dim == count`), and a shuffle whose
//! partner may be in another wave goes through workgroup memory: store, barrier, load the
//! partner's slot, barrier (the second barrier keeps the next exchange from overwriting a
//! slot before every thread read it). The broadcast after a region does the same when the
//! workgroup is wider than a wave. A shuffle whose partner lane is outside `0..count` reads
//! the lane's own value (as on the host). The hardware path never crosses waves.

use std::collections::HashSet;

use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate as P;

use super::intrinsics::{exchange_i32, Partner};
use super::Gpu;
use crate::ir::{ScalarType, Stmt, Var};
use crate::lower::expr::{ExprLeaves, Val};
use crate::lower::{fail, R};

impl<'a, 'ctx> Gpu<'a, 'ctx> {
    pub(super) fn lanes_region(&mut self, lane: Var, count: u32, body: &'a [Stmt]) -> R<()> {
        if count == 0 {
            return fail("a `Lanes` region of 0 lanes");
        }
        if let Some(team) = self.team {
            return self.team_region(lane, count, team, body);
        }
        if count > self.wave && count != self.block_dim {
            return fail(format!(
                "a `Lanes` region of {count} lanes in a workgroup of {}: a region wider than the wave {} must span the workgroup",
                self.block_dim, self.wave
            ));
        }
        let inside = self.ir.icmp(P::ULT, self.tid, self.ir.i64(count as u64))?;
        self.region = Some(count);
        let r = self.branch(
            inside,
            &mut |g| {
                g.store_var(lane, g.tid.into())?;
                g.block(body)
            },
            &mut |_| Ok(()),
        );
        self.region = None;
        r?;
        for v in region_outputs(lane, body) {
            let ty = self.var_ty(v)?;
            let val = self.load_var(v)?;
            let lane0 = self.ir.i32(0);
            let wide = self.block_dim > self.wave;
            let b = self.move_value(Val { v: val, ty }, Partner::Lane(lane0), self.block_dim, wide)?;
            self.store_var(v, b)?;
        }
        Ok(())
    }

    /// A region inside a teamed `ParFor` iteration: the team's `count` threads are its lanes
    /// (`lane = tid % team`), every shuffle stays inside the team (masks below `count`, which
    /// is the team and divides the wave), and afterwards what the region assigned is
    /// broadcast from the team's lane 0 by a lane exchange inside the wave.
    fn team_region(&mut self, lane: Var, count: u32, team: u32, body: &'a [Stmt]) -> R<()> {
        if count != team {
            return fail(format!(
                "a `Lanes` region of {count} lanes in a team of {team}: expected the team's lane count"
            ));
        }
        let tlane = self.ir.and(self.tid, self.ir.i64(team as u64 - 1))?;
        self.region = Some(count);
        let r = (|| {
            self.store_var(lane, tlane.into())?;
            self.block(body)
        })();
        self.region = None;
        r?;
        // The team's lane 0, as an index inside the wave.
        let in_wave = self.ir.and(self.tid, self.ir.i64(self.wave as u64 - 1))?;
        let base = self.ir.sub(in_wave, tlane)?;
        let base = self.ir.trunc(base, self.ir.cx.i32_type())?;
        for v in region_outputs(lane, body) {
            let ty = self.var_ty(v)?;
            let val = self.load_var(v)?;
            let b = self.move_value(Val { v: val, ty }, Partner::Lane(base), team, false)?;
            self.store_var(v, b)?;
        }
        Ok(())
    }

    /// `v` as lane `lane ^ mask` of the current region holds it.
    pub(super) fn exchange(&mut self, v: Val<'ctx>, mask: u32) -> R<Val<'ctx>> {
        let Some(count) = self.region else { return fail("a shuffle outside a `Lanes` region") };
        let hardware = count.is_power_of_two() && mask < count && mask < self.wave;
        let partner = if hardware {
            Partner::Xor(mask)
        } else {
            let lane = self.tid;
            let p = self.ir.xor(lane, self.ir.i64(mask as u64))?;
            let inside = self.ir.icmp(P::ULT, p, self.ir.i64(count as u64))?;
            let p = self.ir.sel(inside, p, lane)?;
            Partner::Lane(self.ir.trunc(p, self.ir.cx.i32_type())?)
        };
        // Without a hardware xor, a partner may sit in another wave only in a wide region.
        let r = self.move_value(v, partner, count.min(self.wave), !hardware && count > self.wave)?;
        Ok(Val { v: r, ty: v.ty })
    }

    /// Moves a value of any scalar type between lanes, 32 bits at a time: by hardware lane
    /// exchange among `members` lanes of one wave, or (`shared`) through workgroup memory.
    fn move_value(
        &mut self,
        v: Val<'ctx>,
        partner: Partner<'ctx>,
        members: u32,
        shared: bool,
    ) -> R<BasicValueEnum<'ctx>> {
        let cx = self.ir.cx;
        let i32t = cx.i32_type();
        let (arch, tid) = (self.arch, self.tid);
        let xchg = |g: &mut Self, x: IntValue<'ctx>| {
            if shared {
                g.shared_exchange_i32(x, partner)
            } else {
                exchange_i32(&g.ir, arch, x, partner, tid, members)
            }
        };
        Ok(match v.ty {
            ScalarType::F32 => {
                let bits = self.ir.f32_bits(v.v.into_float_value())?;
                let r = xchg(self, bits)?;
                self.ir.bits_f32(r)?.into()
            }
            ScalarType::I32 | ScalarType::U32 => xchg(self, v.v.into_int_value())?.into(),
            ScalarType::I64 | ScalarType::U64 => {
                let x = v.v.into_int_value();
                let lo = self.ir.trunc(x, i32t)?;
                let hi = self.ir.trunc(self.ir.lshr(x, self.ir.i64(32))?, i32t)?;
                let (lo, hi) = (xchg(self, lo)?, xchg(self, hi)?);
                let i64t = cx.i64_type();
                self.ir.or(self.ir.zext(lo, i64t)?, self.ir.shl(self.ir.zext(hi, i64t)?, self.ir.i64(32))?)?.into()
            }
            ScalarType::Bool | ScalarType::I8 | ScalarType::U8 | ScalarType::F16 | ScalarType::BF16 => {
                let x = v.v.into_int_value();
                let t = x.get_type();
                let wide = self.ir.zext(x, i32t)?;
                let r = xchg(self, wide)?;
                self.ir.trunc(r, t)?.into()
            }
        })
    }

    /// Reads the i32 `v` of the partner thread through workgroup memory; every thread of the
    /// workgroup must call it (it holds two barriers).
    fn shared_exchange_i32(&mut self, v: IntValue<'ctx>, partner: Partner<'ctx>) -> R<IntValue<'ctx>> {
        let i32t = self.ir.cx.i32_type();
        let slots = match self.xchg {
            Some(p) => p,
            None => {
                let t = i32t.array_type(self.block_dim);
                let g = self.ir.m.add_global(t, Some(inkwell::AddressSpace::from(super::entry::SHARED)), "baro_xchg");
                g.set_linkage(inkwell::module::Linkage::Internal);
                g.set_initializer(&t.get_undef());
                g.set_alignment(4);
                self.xchg = Some(g.as_pointer_value());
                g.as_pointer_value()
            }
        };
        let from = match partner {
            Partner::Xor(m) => self.ir.xor(self.tid, self.ir.i64(m as u64))?,
            Partner::Lane(l) => self.ir.zext(l, self.ir.cx.i64_type())?,
        };
        let mine = unsafe { self.ir.b.build_in_bounds_gep(i32t, slots, &[self.tid], "")? };
        self.ir.b.build_store(mine, v)?;
        self.barrier()?;
        let theirs = unsafe { self.ir.b.build_in_bounds_gep(i32t, slots, &[from], "")? };
        let r = self.ir.b.build_load(i32t, theirs, "")?.into_int_value();
        self.barrier()?;
        Ok(r)
    }
}

/// The variables a region with lane variable `lane` assigns but does not define: what it
/// hands back to the code around it (in first-assignment order).
fn region_outputs(lane: Var, body: &[Stmt]) -> Vec<Var> {
    let mut defined = HashSet::new();
    defined.insert(lane);
    let mut assigned = Vec::new();
    outer_assigns(body, &mut defined, &mut assigned);
    assigned.retain(|v| !defined.contains(v));
    assigned
}

/// Variables assigned inside a region, and (in `defined`) those the region defines itself.
fn outer_assigns(stmts: &[Stmt], defined: &mut HashSet<Var>, assigned: &mut Vec<Var>) {
    for s in stmts {
        match s {
            Stmt::Let { var, .. } => {
                defined.insert(*var);
            }
            Stmt::LetRows { vars, .. } => defined.extend(vars.iter().copied()),
            Stmt::Assign { var, .. } => {
                if !assigned.contains(var) {
                    assigned.push(*var);
                }
            }
            Stmt::For { var, body, .. } | Stmt::ParFor { var, body, .. } => {
                defined.insert(*var);
                outer_assigns(body, defined, assigned);
            }
            Stmt::If { then_body, else_body, .. } => {
                outer_assigns(then_body, defined, assigned);
                outer_assigns(else_body, defined, assigned);
            }
            Stmt::Lanes { lane, body, .. } => {
                defined.insert(*lane);
                outer_assigns(body, defined, assigned);
            }
            Stmt::Store { .. } | Stmt::Barrier | Stmt::Check { .. } | Stmt::MmaI8(_) => {}
        }
    }
}
