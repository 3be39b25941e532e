//! Reduction schedules: the declared order of a reduction (`order`) and its expansion into
//! an exact tree of additions (`tree`).

mod order;
mod tree;

pub use order::{Combine, Schedule, ScheduleError};
pub use tree::{combine, Tree};
