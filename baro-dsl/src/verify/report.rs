//! What the verifier reports: errors attached to IR entities, and sibling mismatches as data
//! (which output, both expressions, the first differing node) that the macro turns into a
//! spanned compile error. This module holds data and its printing; it checks nothing.

use std::fmt;

/// Where in a kernel an error sits: the path of statement positions from the body down
/// (`[2, 0]` = first statement inside the third top-level statement's first block), and,
/// for reductions, the reduction's ordinal in source order (pre-order over the kernel).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Location {
    pub stmt_path: Vec<u32>,
    /// Ordinal of the `Expr::Reduce` involved, counting every reduction in the kernel in
    /// pre-order (statements in order, sub-expressions left to right, outer before inner).
    pub reduce: Option<u32>,
    /// Ordinal of the `Stmt::Store` involved, counting stores in pre-order.
    pub store: Option<u32>,
}

/// One well-formedness or schedule error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub kernel: String,
    pub location: Location,
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Types, entity bounds, definitions, mutability.
    Malformed,
    /// A barrier or shuffle in control flow that depends on the lane.
    NonUniformSync,
    /// A float accumulation in a loop outside any declared reduction.
    UndeclaredReduction,
    /// Expanded code does not compute the tree its declared schedule gives.
    ScheduleNotImplemented,
    /// The symbolic executor could not run the kernel (data-dependent control flow, ...).
    Unsupported,
    /// The shapes tried never gave a reduction enough elements for its order to matter, so
    /// passing would prove nothing about it (`location.reduce` names it).
    Vacuous,
    /// A reduction declared order-free (`order = any`) whose value could depend on the order:
    /// a float reduction, or an integer sum not proven free of overflow (`range`).
    OrderFree,
    /// Two accesses to one element by concurrent units of one launch, at least one a write,
    /// with no order between them (see `race`).
    Race,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel `{}`", self.kernel)?;
        if !self.location.stmt_path.is_empty() {
            write!(f, " at statement {:?}", self.location.stmt_path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why a rows kernel is not an order-preserving sibling of its m=1 kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SiblingError {
    /// One of the two kernels is malformed (or the rows kernel does not declare the sibling).
    Invalid(Vec<VerifyError>),
    /// The declared schedules differ: reduction `reduce` (ordinal in the rows kernel) has
    /// `rows_schedule`, the m=1 kernel's corresponding reduction has `m1_schedule`.
    Schedule { reduce: u32, rows_schedule: String, m1_schedule: String, detail: String },
    /// The arithmetic differs for some output element.
    Arithmetic(Box<Mismatch>),
}

/// A counterexample: for `shape`, output `buffer[index]` of the rows kernel (row `row`) is
/// not the m=1 kernel's `buffer[m1_index]` on that row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub shape: Vec<(String, u64)>,
    pub buffer: String,
    pub row: u64,
    pub index: u64,
    pub m1_index: u64,
    /// Both expressions, abbreviated (deep subtrees elided as `…`).
    pub m1_expr: String,
    pub rows_expr: String,
    /// The first differing node (pre-order), printed from both sides, with its path.
    pub first_difference: String,
    /// Where in the rows kernel the differing output was written.
    pub location: Location,
}

impl fmt::Display for SiblingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SiblingError::Invalid(errs) => {
                for (i, e) in errs.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            SiblingError::Schedule { reduce, rows_schedule, m1_schedule, detail } => write!(
                f,
                "reduction #{reduce} is declared `{rows_schedule}` in the rows kernel and `{m1_schedule}` in the m=1 kernel: {detail}"
            ),
            SiblingError::Arithmetic(m) => write!(f, "{m}"),
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape: Vec<String> = self.shape.iter().map(|(n, v)| format!("{n} = {v}")).collect();
        write!(
            f,
            "output {}[{}] (row {}, {}): first difference {}\n  m=1:  {}\n  rows: {}",
            self.buffer,
            self.index,
            self.row,
            shape.join(", "),
            self.first_difference,
            self.m1_expr,
            self.rows_expr
        )
    }
}

/// What a successful sibling check covered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiblingProof {
    /// Number of shapes (assignments of the integer scalar params) executed.
    pub shapes: usize,
    /// Number of output elements whose DAGs were compared.
    pub outputs: usize,
}

/// What a successful single-kernel verification covered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelProof {
    pub shapes: usize,
    /// Lanes regions whose code was checked against their declared schedule (summed over shapes).
    pub regions_checked: usize,
}
