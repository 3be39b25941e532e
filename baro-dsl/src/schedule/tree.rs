//! Expansion of a schedule, for a given length, into its exact tree of additions.
//!
//! This is the meaning of a schedule: the verifier compares kernels against these trees and
//! plain-Rust references evaluate them. It must never depend on a target.

use super::order::{Combine, Schedule};
use std::fmt;

/// A binary tree of additions over the elements `0..K` of a reduction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tree {
    /// The `+0.0` every partial sum starts from.
    Zero,
    /// Element `i` of the reduction.
    Leaf(u64),
    /// `lhs + rhs`, in that operand order.
    Add(Box<Tree>, Box<Tree>),
}

impl Tree {
    fn add(a: Tree, b: Tree) -> Tree {
        Tree::Add(Box::new(a), Box::new(b))
    }

    /// Evaluates the tree with `leaf(i)` for element `i`, `zero` for `Zero` and `op` for each
    /// addition, in exactly the tree's order.
    pub fn eval<T: Clone>(&self, zero: T, leaf: &impl Fn(u64) -> T, op: &impl Fn(T, T) -> T) -> T {
        match self {
            Tree::Zero => zero,
            Tree::Leaf(i) => leaf(*i),
            Tree::Add(a, b) => {
                let x = a.eval(zero.clone(), leaf, op);
                let y = b.eval(zero, leaf, op);
                op(x, y)
            }
        }
    }

    /// Evaluates the tree of an `fma_sum`: each addition of element `i` to a partial `p`
    /// (every element sits there: partials start at `Zero`) is `fused(i, p)`, every other
    /// addition (of two partials) `op`.
    pub fn eval_fused<T: Clone>(&self, zero: T, fused: &impl Fn(u64, T) -> T, op: &impl Fn(T, T) -> T) -> T {
        match self {
            Tree::Zero => zero,
            Tree::Add(a, b) => {
                let x = a.eval_fused(zero.clone(), fused, op);
                match **b {
                    Tree::Leaf(i) => fused(i, x),
                    _ => op(x, b.eval_fused(zero, fused, op)),
                }
            }
            // A bare element is never produced by `expand` (each is added to a partial).
            Tree::Leaf(i) => fused(*i, zero),
        }
    }

    /// Number of additions in the tree.
    pub fn adds(&self) -> usize {
        match self {
            Tree::Add(a, b) => 1 + a.adds() + b.adds(),
            _ => 0,
        }
    }

    /// Replaces every leaf `i` with `f(i)` (used to nest schedules).
    fn map_leaves(self, f: &impl Fn(u64) -> Tree) -> Tree {
        match self {
            Tree::Leaf(i) => f(i),
            Tree::Zero => Tree::Zero,
            Tree::Add(a, b) => Tree::add(a.map_leaves(f), b.map_leaves(f)),
        }
    }
}

impl fmt::Display for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tree::Zero => f.write_str("0"),
            Tree::Leaf(i) => write!(f, "a{i}"),
            Tree::Add(a, b) => write!(f, "({a} + {b})"),
        }
    }
}

/// `((0 + a[first]) + a[first + stride]) + ...` over `first, first + stride, ... < end`.
fn sequential(first: u64, end: u64, stride: u64) -> Tree {
    let mut t = Tree::Zero;
    let mut i = first;
    while i < end {
        t = Tree::add(t, Tree::Leaf(i));
        i += stride;
    }
    t
}

/// Combines `parts` (in lane order) the way `combine` says.
pub fn combine(parts: Vec<Tree>, combine: Combine) -> Tree {
    assert!(!parts.is_empty(), "combine of zero partials");
    match combine {
        Combine::Sequential => {
            let mut it = parts.into_iter();
            let first = it.next().unwrap_or(Tree::Zero);
            it.fold(first, Tree::add)
        }
        Combine::Butterfly => {
            let n = parts.len();
            let mut vals = parts;
            let mut mask = n / 2;
            while mask >= 1 {
                vals = (0..n).map(|l| Tree::add(vals[l].clone(), vals[l ^ mask].clone())).collect();
                mask /= 2;
            }
            vals.swap_remove(0)
        }
        Combine::Pairwise => {
            let mut vals = parts;
            while vals.len() > 1 {
                let mut next = Vec::with_capacity(vals.len().div_ceil(2));
                let mut it = vals.into_iter();
                while let Some(a) = it.next() {
                    match it.next() {
                        Some(b) => next.push(Tree::add(a, b)),
                        None => next.push(a),
                    }
                }
                vals = next;
            }
            vals.swap_remove(0)
        }
    }
}

impl Schedule {
    /// The exact tree of additions this schedule performs for a reduction of length `k`.
    pub fn expand(&self, k: u64) -> Tree {
        match self {
            // `any`: every order gives one value (proven by the verifier); this tree stands for all.
            Schedule::Sequential | Schedule::Any => sequential(0, k, 1),
            Schedule::Lanes { count, combine: c } => {
                let count = *count as u64;
                let parts = (0..count).map(|l| sequential(l, k, count)).collect();
                combine(parts, *c)
            }
            Schedule::Chunked { size, combine: c } => {
                let size = *size as u64;
                let chunks = k.div_ceil(size).max(1);
                let parts = (0..chunks).map(|j| sequential(j * size, k.min((j + 1) * size), 1)).collect();
                combine(parts, *c)
            }
            Schedule::Blocked { block, across } => {
                let block = *block as u64;
                let blocks = k.div_ceil(block);
                across.expand(blocks).map_leaves(&|b| sequential(b * block, k.min((b + 1) * block), 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_trees_fuse_elements_into_partials_and_add_partials() {
        let show = |t: &Tree| {
            t.eval_fused(String::from("0"), &|i, p| format!("fma(x{i}, w{i}, {p})"), &|a, b| format!("({a} + {b})"))
        };
        let t = Schedule::lanes(2, Combine::Butterfly).expand(3);
        assert_eq!(show(&t), "(fma(x2, w2, fma(x0, w0, 0)) + fma(x1, w1, 0))");
        let t = Schedule::Blocked { block: 2, across: Box::new(Schedule::Sequential) }.expand(3);
        assert_eq!(show(&t), "((0 + fma(x1, w1, fma(x0, w0, 0))) + fma(x2, w2, 0))");
        // With `fused(i, p) = p + a_i` it is the plain sum's tree, addition for addition.
        for s in
            ["seq", "lanes(4, pairwise)", "lanes(4, butterfly)", "chunked(3, seq)", "blocked(2, lanes(2, butterfly))"]
        {
            let t = s.parse::<Schedule>().unwrap().expand(11);
            let plain = t.eval(String::from("0"), &|i| format!("a{i}"), &|a, b| format!("({a} + {b})"));
            assert_eq!(
                t.eval_fused(String::from("0"), &|i, p| format!("({p} + a{i})"), &|a, b| format!("({a} + {b})")),
                plain,
                "{s}"
            );
            assert_eq!(plain, t.to_string(), "{s}");
        }
    }

    #[test]
    fn sequential_starts_from_zero() {
        assert_eq!(Schedule::Sequential.expand(3).to_string(), "(((0 + a0) + a1) + a2)");
        assert_eq!(Schedule::Sequential.expand(0), Tree::Zero);
    }

    #[test]
    fn butterfly_of_four_lanes() {
        let t = Schedule::lanes(4, Combine::Butterfly).expand(6);
        // lane partials: p0 = (0+a0)+a4, p1 = (0+a1)+a5, p2 = 0+a2, p3 = 0+a3
        // mask 2: l0 = p0+p2, l1 = p1+p3; mask 1: l0 = (p0+p2)+(p1+p3)
        assert_eq!(t.to_string(), "((((0 + a0) + a4) + (0 + a2)) + (((0 + a1) + a5) + (0 + a3)))");
    }

    #[test]
    fn pairwise_and_sequential_combines_differ() {
        let p = Schedule::lanes(4, Combine::Pairwise).expand(4);
        let s = Schedule::lanes(4, Combine::Sequential).expand(4);
        assert_eq!(p.to_string(), "(((0 + a0) + (0 + a1)) + ((0 + a2) + (0 + a3)))");
        assert_eq!(s.to_string(), "((((0 + a0) + (0 + a1)) + (0 + a2)) + (0 + a3))");
    }

    #[test]
    fn blocked_nests_sequential_blocks() {
        let t = Schedule::Blocked { block: 2, across: Box::new(Schedule::Sequential) }.expand(3);
        assert_eq!(t.to_string(), "((0 + ((0 + a0) + a1)) + (0 + a2))");
    }

    #[test]
    fn every_element_appears_once() {
        let scheds: Vec<Schedule> =
            ["seq", "lanes(8, butterfly)", "lanes(3, seq)", "chunked(5, pairwise)", "blocked(4, lanes(4, butterfly))"]
                .iter()
                .map(|s| s.parse().unwrap())
                .collect();
        for s in &scheds {
            for k in [0u64, 1, 7, 33, 100] {
                let t = s.expand(k);
                let mut seen = vec![0u32; k as usize];
                fn walk(t: &Tree, seen: &mut [u32]) {
                    match t {
                        Tree::Leaf(i) => seen[*i as usize] += 1,
                        Tree::Zero => {}
                        Tree::Add(a, b) => {
                            walk(a, seen);
                            walk(b, seen)
                        }
                    }
                }
                walk(&t, &mut seen);
                assert!(seen.iter().all(|&c| c == 1), "{s} k={k}");
            }
        }
    }

    #[test]
    fn print_parse_round_trip() {
        for s in ["seq", "lanes(32, butterfly)", "chunked(64, pairwise)", "blocked(32, lanes(32, butterfly))"] {
            assert_eq!(s.parse::<Schedule>().unwrap().to_string(), s);
        }
        assert!("lanes(12, butterfly)".parse::<Schedule>().is_err());
    }
}
