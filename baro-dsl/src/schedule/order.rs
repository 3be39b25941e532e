//! Reduction schedules as data: which binary tree of additions a reduction of length K uses.
//!
//! A schedule never depends on a target: its lane count is part of the arithmetic, and the
//! lowering maps it onto whatever wave width the target has (or refuses clearly).

use std::fmt;

/// How a fixed number of partial results is combined into one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Combine {
    /// `((p0 + p1) + p2) + ...`
    Sequential,
    /// xor butterfly with masks `n/2, n/4, ..., 1`; the result is lane 0's value, where each
    /// step computes `own + partner` (`n` a power of two).
    Butterfly,
    /// Adjacent pairs level by level: `(p0 + p1) + (p2 + p3)`, ... (`n` a power of two).
    Pairwise,
}

impl Combine {
    pub fn name(self) -> &'static str {
        match self {
            Combine::Sequential => "seq",
            Combine::Butterfly => "butterfly",
            Combine::Pairwise => "pairwise",
        }
    }
    pub fn from_name(s: &str) -> Option<Combine> {
        match s {
            "seq" => Some(Combine::Sequential),
            "butterfly" => Some(Combine::Butterfly),
            "pairwise" => Some(Combine::Pairwise),
            _ => None,
        }
    }
    /// True if this combine only works for a power-of-two number of partials.
    pub fn needs_power_of_two(self) -> bool {
        !matches!(self, Combine::Sequential)
    }
}

/// A reduction order. Every partial sum starts from `+0.0` and adds elements left to right;
/// an empty reduction yields `+0.0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// `((0 + a0) + a1) + ...`
    Sequential,
    /// `count` lanes; lane `l` sums `a[l], a[l + count], ...` sequentially; the `count`
    /// partials are then combined by `combine`.
    Lanes { count: u32, combine: Combine },
    /// Consecutive chunks of `size` elements, each summed sequentially; the chunk sums
    /// (`ceil(K / size)` of them, at least one) combined by `combine`.
    Chunked { size: u32, combine: Combine },
    /// Consecutive blocks of `block` elements (a quantization block), each summed
    /// sequentially; the block sums are reduced by `across` as if they were the elements.
    Blocked { block: u32, across: Box<Schedule> },
    /// No order: the reduction's value is the same in every order, which the verifier must
    /// prove (an integer sum whose partial sums provably fit its type, an integer max/min;
    /// never a float). Its tree (`expand`) is the sequential one, one representative of all;
    /// a lowering may use any tree.
    Any,
}

/// Why a schedule is not usable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("a {what} of {n} is not allowed: expected at least 1")]
    Zero { what: &'static str, n: u32 },
    #[error("combine `{combine}` needs a power-of-two count, found {n}")]
    NotPowerOfTwo { combine: &'static str, n: u32 },
}

impl Schedule {
    pub fn lanes(count: u32, combine: Combine) -> Schedule {
        Schedule::Lanes { count, combine }
    }

    /// Checks counts and sizes; every constructor path goes through this before use.
    pub fn validate(&self) -> Result<(), ScheduleError> {
        match self {
            Schedule::Sequential | Schedule::Any => Ok(()),
            Schedule::Lanes { count, combine } => {
                if *count == 0 {
                    return Err(ScheduleError::Zero { what: "lane count", n: 0 });
                }
                if combine.needs_power_of_two() && !count.is_power_of_two() {
                    return Err(ScheduleError::NotPowerOfTwo { combine: combine.name(), n: *count });
                }
                Ok(())
            }
            Schedule::Chunked { size, .. } => {
                if *size == 0 {
                    return Err(ScheduleError::Zero { what: "chunk size", n: 0 });
                }
                Ok(())
            }
            Schedule::Blocked { block, across } => {
                if *block == 0 {
                    return Err(ScheduleError::Zero { what: "block size", n: 0 });
                }
                across.validate()
            }
        }
    }

    /// True if any level of this schedule is `Any` (`blocked(32, any)` too): its value must
    /// then be proven the same in every order.
    pub fn is_order_free(&self) -> bool {
        match self {
            Schedule::Any => true,
            Schedule::Blocked { across, .. } => across.is_order_free(),
            _ => false,
        }
    }

    /// The number of lanes this schedule's outermost level spreads work over (1 if none).
    pub fn lane_count(&self) -> u32 {
        match self {
            Schedule::Lanes { count, .. } => *count,
            Schedule::Blocked { across, .. } => across.lane_count(),
            _ => 1,
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Sequential => f.write_str("seq"),
            Schedule::Any => f.write_str("any"),
            Schedule::Lanes { count, combine } => write!(f, "lanes({count}, {})", combine.name()),
            Schedule::Chunked { size, combine } => write!(f, "chunked({size}, {})", combine.name()),
            Schedule::Blocked { block, across } => write!(f, "blocked({block}, {across})"),
        }
    }
}

/// Parses the printed form of a schedule (`seq`, `any`, `lanes(32, butterfly)`,
/// `chunked(64, pairwise)`, `blocked(32, lanes(32, butterfly))`).
impl std::str::FromStr for Schedule {
    type Err = String;
    fn from_str(s: &str) -> Result<Schedule, String> {
        let s = s.trim();
        if s == "seq" {
            return Ok(Schedule::Sequential);
        }
        if s == "any" {
            return Ok(Schedule::Any);
        }
        let open = s.find('(').ok_or_else(|| format!("expected a schedule, found `{s}`"))?;
        if !s.ends_with(')') {
            return Err(format!("expected `)` at the end of schedule `{s}`"));
        }
        let head = &s[..open];
        let inner = &s[open + 1..s.len() - 1];
        let comma = inner.find(',').ok_or_else(|| format!("expected two arguments in `{s}`"))?;
        let n: u32 = inner[..comma]
            .trim()
            .parse()
            .map_err(|_| format!("expected a count in `{s}`, found `{}`", inner[..comma].trim()))?;
        let rest = inner[comma + 1..].trim();
        let combine =
            || Combine::from_name(rest).ok_or_else(|| format!("expected seq, butterfly or pairwise, found `{rest}`"));
        let sched = match head {
            "lanes" => Schedule::Lanes { count: n, combine: combine()? },
            "chunked" => Schedule::Chunked { size: n, combine: combine()? },
            "blocked" => Schedule::Blocked { block: n, across: Box::new(rest.parse()?) },
            other => return Err(format!("expected seq, lanes, chunked or blocked, found `{other}`")),
        };
        sched.validate().map_err(|e| e.to_string())?;
        Ok(sched)
    }
}
