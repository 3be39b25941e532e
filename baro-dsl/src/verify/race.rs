//! The race model of the symbolic executor: which concurrent unit performed each memory
//! access of one launch, and whether two accesses to one element are unordered.
//!
//! A launch runs its workgroups at the same time, with no order between them; inside a
//! workgroup, code between two barriers (a `Barrier`, the barrier that ends a top-level
//! `ParFor`, or the broadcast that ends a uniform lane-parallel reduction) is one epoch, in which the iterations of a `ParFor` (and the lanes of a `Lanes`
//! region) run at the same time, and uniform code runs in every thread. Two accesses to one
//! element, at least one a write, race unless they are ordered: the same workgroup and either
//! different epochs, the same unit, or a write by code every thread of the later access ran
//! first (uniform code, or the enclosing `ParFor` iteration) followed by a read. So a second
//! writer of an element, a read of another workgroup's write (or a write of what another
//! workgroup read), and a read of another iteration's write before the barrier are all races.
//! Reads are recorded only where a write is possible (writable buffers, workgroup memory) and
//! only at indices known from the shape: a data-dependent index is not modelled.
//!
//! The executor calls `write`/`read` and turns a `Race` into an error; this module only keeps
//! the log. It never changes a kernel.

use super::dag::Name;
use crate::ir::Var;
use std::collections::HashMap;

/// A memory space of one launch: a global buffer, or a workgroup array of the current group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    Global(Name),
    Shared(u32),
}

/// One concurrent unit: a workgroup, its epoch, and the `ParFor` iterations (or lane) the
/// code runs in, outermost first; no steps is uniform code.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Unit {
    pub group: [u64; 3],
    pub epoch: u32,
    pub steps: Vec<(Var, u64)>,
}

#[derive(Clone, Copy, Debug)]
struct Access {
    unit: u32,
}

/// What is kept of one element's accesses since its last write. Exact for the question a
/// later write asks (is some read unordered with me?), in bounded space: a read of another
/// workgroup is found among reads of two distinct workgroups, and a read in the writer's own
/// epoch among two distinct units of the latest (workgroup, epoch) read in, because
/// workgroups and epochs only move forward while the executor runs.
#[derive(Default)]
struct Cell {
    write: Option<Access>,
    /// Reads of up to two distinct workgroups.
    groups: Vec<Access>,
    /// Reads of up to two distinct units, all of the latest (workgroup, epoch) read in.
    latest: Vec<Access>,
}

/// Two unordered accesses to one element.
pub struct Race {
    pub first: Unit,
    pub first_write: bool,
    pub second_write: bool,
}

#[derive(Default)]
pub struct RaceLog {
    units: Vec<Unit>,
    unit_ids: HashMap<Unit, u32>,
    cells: HashMap<(Space, u64), Cell>,
}

impl RaceLog {
    pub fn unit_id(&mut self, u: &Unit) -> u32 {
        if let Some(&id) = self.unit_ids.get(u) {
            return id;
        }
        let id = self.units.len() as u32;
        self.units.push(u.clone());
        self.unit_ids.insert(u.clone(), id);
        id
    }

    /// A new workgroup starts: its workgroup memory is fresh.
    pub fn new_group(&mut self) {
        self.cells.retain(|(s, _), _| matches!(s, Space::Global(_)));
    }

    /// Whether an access by `a` (earlier) and one by `b` (later) to one element race.
    fn conflict(&self, a: u32, a_write: bool, b: u32, b_write: bool) -> bool {
        if a == b {
            return false;
        }
        let (x, y) = (&self.units[a as usize], &self.units[b as usize]);
        if x.group != y.group {
            return true;
        }
        if x.epoch != y.epoch {
            return false;
        }
        // A write by code every thread of `b` ran before `b` (uniform code, an enclosing
        // iteration) is seen by `b`'s read; any other pair in one epoch is unordered.
        !(a_write && !b_write && y.steps.starts_with(&x.steps))
    }

    fn race(&self, a: Access, a_write: bool, b_write: bool) -> Race {
        Race { first: self.units[a.unit as usize].clone(), first_write: a_write, second_write: b_write }
    }

    /// Records a write by `unit`; the first unordered earlier access, if any.
    pub fn write(&mut self, space: Space, index: u64, unit: u32) -> Option<Race> {
        let cell = self.cells.remove(&(space, index)).unwrap_or_default();
        let mut found = None;
        if let Some(w) = cell.write {
            if self.conflict(w.unit, true, unit, true) {
                found = Some(self.race(w, true, true));
            }
        }
        if found.is_none() {
            if let Some(r) = cell.groups.iter().chain(&cell.latest).find(|r| self.conflict(r.unit, false, unit, true)) {
                found = Some(self.race(*r, false, true));
            }
        }
        self.cells.insert((space, index), Cell { write: Some(Access { unit }), ..Cell::default() });
        found
    }

    /// Records a read by `unit`; the unordered earlier write, if any.
    pub fn read(&mut self, space: Space, index: u64, unit: u32) -> Option<Race> {
        let write = self.cells.get(&(space, index)).and_then(|c| c.write);
        if let Some(w) = write {
            if self.conflict(w.unit, true, unit, false) {
                return Some(self.race(w, true, false));
            }
        }
        let u = &self.units[unit as usize];
        let (group, epoch) = (u.group, u.epoch);
        let units = &self.units;
        let cell = self.cells.entry((space, index)).or_default();
        if cell.groups.len() < 2 && !cell.groups.iter().any(|r| units[r.unit as usize].group == group) {
            cell.groups.push(Access { unit });
        }
        let same = |r: &Access| units[r.unit as usize].group == group && units[r.unit as usize].epoch == epoch;
        if !cell.latest.iter().all(same) {
            cell.latest.clear();
        }
        if cell.latest.len() < 2 && !cell.latest.iter().any(|r| r.unit == unit) {
            cell.latest.push(Access { unit });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(log: &mut RaceLog, group: u64, epoch: u32, steps: &[u64]) -> u32 {
        let steps = steps.iter().map(|&i| (Var(0), i)).collect();
        log.unit_id(&Unit { group: [group, 0, 0], epoch, steps })
    }

    #[test]
    fn ordering_rules() {
        let mut log = RaceLog::default();
        let sp = Space::Global(Name(0));
        let (u0, p1, p2) = (unit(&mut log, 0, 0, &[]), unit(&mut log, 0, 0, &[1]), unit(&mut log, 0, 0, &[2]));
        // Uniform write, then a par iteration reads it: the iteration's thread wrote it first.
        assert!(log.write(sp, 0, u0).is_none());
        assert!(log.read(sp, 0, p1).is_none());
        // Another iteration writes what iteration 1 read, before any barrier: a second
        // writer after the uniform one, and a write of what iteration 1 read.
        assert!(log.write(sp, 0, p2).is_some_and(|r| r.first_write));
        assert!(log.read(sp, 3, p1).is_none());
        assert!(log.write(sp, 3, p2).is_some_and(|r| !r.first_write));
        // Two iterations writing one element.
        assert!(log.write(sp, 1, p1).is_none());
        assert!(log.write(sp, 1, p2).is_some_and(|r| r.first_write && r.second_write));
        // After the barrier (next epoch), the same workgroup may read it.
        let e1 = unit(&mut log, 0, 1, &[]);
        assert!(log.read(sp, 1, e1).is_none());
        // Another workgroup may not, whatever the epoch.
        let g1 = unit(&mut log, 1, 5, &[]);
        assert!(log.read(sp, 1, g1).is_some());
        // An iteration's write is not seen by uniform code before the barrier.
        assert!(log.write(sp, 2, p1).is_none());
        assert!(log.read(sp, 2, u0).is_some());
    }

    #[test]
    fn many_readers_are_summarised_without_losing_a_race() {
        let mut log = RaceLog::default();
        let sp = Space::Global(Name(0));
        // Eight iterations read in epoch 0, then one reads in epoch 1 and another writes there.
        for i in 0..8 {
            let u = unit(&mut log, 0, 0, &[i]);
            assert!(log.read(sp, 0, u).is_none());
        }
        let (r1, w1) = (unit(&mut log, 0, 1, &[3]), unit(&mut log, 0, 1, &[4]));
        assert!(log.read(sp, 0, r1).is_none());
        assert!(log.write(sp, 0, w1).is_some_and(|r| !r.first_write));
        // Reads by workgroups 0, 1 and 2, then a write by workgroup 0: workgroup 1's read races.
        for g in 0..3 {
            let u = unit(&mut log, g, 0, &[]);
            assert!(log.read(sp, 1, u).is_none());
        }
        let g0 = unit(&mut log, 0, 0, &[]);
        assert!(log.write(sp, 1, g0).is_some_and(|r| r.first.group == [1, 0, 0]));
    }
}
