//! The hash-consed expression DAG the symbolic executor builds: one node per distinct
//! (operation, operand order, operands) so that two computations are the same arithmetic
//! exactly when they end in the same `NodeId`.
//!
//! It never simplifies, folds or reorders anything: `a + b` and `b + a` are different nodes,
//! and `0 + a` is not `a`. That strictness is the point of the verifier. The one exception
//! is asked for by name: `canonical_int_sums`, for code an order-free integer sum let pick
//! its own tree.

use crate::ir::{BinOp, Const, Dot4Kind, MathFn, ScalarType, UnOp};
use std::collections::HashMap;
use std::fmt::Write;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-rotate hasher for the hash-consing table: nodes are small fixed-size keys and
/// hashing them dominates execution time; SipHash's DoS resistance buys nothing here.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64)
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64)
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A node of the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// An interned name (buffer, shared array or scalar parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Bin(BinOp),
    Un(UnOp),
    Cast,
    Bitcast,
    Select,
    Call(MathFn),
    /// `fma(a, b, c)`: one rounding, never the node `a·b + c`.
    Fma,
    /// A 4-way byte dot (`Expr::Dot4`): exact integer arithmetic, one node.
    Dot4(Dot4Kind),
}

const NONE: NodeId = NodeId(u32::MAX);

/// Leaves printed before the rest of an expression is elided.
const ATOM_BUDGET: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// The initial content of `buf[index]`.
    Leaf {
        buf: Name,
        index: u64,
    },
    /// A load whose index is itself symbolic; `version` counts the stores to `buf` before it.
    Load {
        buf: Name,
        index: NodeId,
        version: u32,
    },
    Const(Const),
    /// A float (or other non-concrete) scalar parameter.
    Param(Name),
    /// `op` over up to three operands (unused ones are `NONE`), producing `ty`.
    Op {
        op: Op,
        ty: ScalarType,
        args: [NodeId; 3],
    },
}

impl Node {
    pub fn children(&self) -> impl Iterator<Item = NodeId> + '_ {
        let args: &[NodeId] = match self {
            Node::Op { args, .. } => args,
            Node::Load { index, .. } => std::slice::from_ref(index),
            _ => &[],
        };
        args.iter().copied().filter(|a| *a != NONE)
    }
}

/// The arena: nodes, the hash-consing table and interned names.
#[derive(Default)]
pub struct Dag {
    nodes: Vec<Node>,
    table: FastMap<Node, NodeId>,
    names: Vec<String>,
    name_table: HashMap<String, Name>,
}

impl Dag {
    pub fn new() -> Dag {
        Dag::default()
    }

    pub fn name(&mut self, s: &str) -> Name {
        if let Some(n) = self.name_table.get(s) {
            return *n;
        }
        let n = Name(self.names.len() as u32);
        self.names.push(s.to_string());
        self.name_table.insert(s.to_string(), n);
        n
    }

    pub fn name_str(&self, n: Name) -> &str {
        &self.names[n.0 as usize]
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    pub fn intern(&mut self, n: Node) -> NodeId {
        // One hash and one probe whether the node is new or not.
        let next = NodeId(self.nodes.len() as u32);
        match self.table.entry(n) {
            std::collections::hash_map::Entry::Occupied(e) => *e.get(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(next);
                self.nodes.push(n);
                next
            }
        }
    }

    /// `id` with every integer sum in it rewritten to one form: its terms (nested integer
    /// additions of the same type flattened, zero constants dropped), each in this form,
    /// sorted by node and added left to right from the first. Wrapping integer addition is
    /// associative and commutative, so two nodes with one canonical form compute the same
    /// bits. Only the schedule-implementation check uses it, and only for kernels with an
    /// order-free reduction (`order = any`), whose code may add in any tree; float nodes and
    /// every other operation keep their exact shape. It adds nodes, never changes one.
    pub fn canonical_int_sums(&mut self, id: NodeId, memo: &mut HashMap<NodeId, NodeId>) -> NodeId {
        if let Some(c) = memo.get(&id) {
            return *c;
        }
        let out = match *self.node(id) {
            Node::Op { op: Op::Bin(BinOp::Add), ty, .. } if ty.is_int() => {
                let mut terms = Vec::new();
                let mut stack = vec![id];
                while let Some(n) = stack.pop() {
                    match *self.node(n) {
                        Node::Op { op: Op::Bin(BinOp::Add), ty: t, args } if t == ty => {
                            stack.extend([args[1], args[0]])
                        }
                        Node::Const(c) if c.bits == 0 => {}
                        _ => terms.push(n),
                    }
                }
                let mut terms: Vec<NodeId> = terms.into_iter().map(|t| self.canonical_int_sums(t, memo)).collect();
                terms.sort();
                let mut it = terms.into_iter();
                match it.next() {
                    None => self.constant(Const::zero(ty)),
                    Some(first) => it.fold(first, |acc, t| self.op(Op::Bin(BinOp::Add), ty, &[acc, t])),
                }
            }
            Node::Op { op, ty, args } => {
                let mut a = args;
                for x in a.iter_mut().filter(|x| **x != NONE) {
                    *x = self.canonical_int_sums(*x, memo);
                }
                self.intern(Node::Op { op, ty, args: a })
            }
            Node::Load { buf, index, version } => {
                let index = self.canonical_int_sums(index, memo);
                self.intern(Node::Load { buf, index, version })
            }
            _ => id,
        };
        memo.insert(id, out);
        out
    }

    pub fn constant(&mut self, c: Const) -> NodeId {
        self.intern(Node::Const(c))
    }

    pub fn op(&mut self, op: Op, ty: ScalarType, args: &[NodeId]) -> NodeId {
        let mut a = [NONE; 3];
        a[..args.len()].copy_from_slice(args);
        self.intern(Node::Op { op, ty, args: a })
    }

    /// Prints `id` as an expression, eliding subtrees deeper than `depth`, and everything
    /// after the first `ATOM_BUDGET` leaves, as `…`.
    pub fn show(&self, id: NodeId, depth: usize) -> String {
        let mut s = String::new();
        let mut budget = ATOM_BUDGET;
        self.write(&mut s, id, depth, false, &mut budget);
        s
    }

    fn write(&self, s: &mut String, id: NodeId, depth: usize, in_mul: bool, budget: &mut usize) {
        if depth == 0 || *budget == 0 {
            s.push('…');
            return;
        }
        if !matches!(self.node(id), Node::Op { .. } | Node::Load { .. }) {
            *budget -= 1;
        }
        let d = depth - 1;
        match *self.node(id) {
            Node::Leaf { buf, index } => {
                let _ = write!(s, "{}[{index}]", self.name_str(buf));
            }
            Node::Load { buf, index, .. } => {
                let _ = write!(s, "{}[", self.name_str(buf));
                self.write(s, index, d, false, budget);
                s.push(']');
            }
            Node::Const(c) => match c.as_f32() {
                Some(v)
                    if v.is_finite() && format!("{v}").parse::<f32>().ok().map(f32::to_bits) == Some(v.to_bits()) =>
                {
                    let _ = write!(s, "{v}");
                }
                _ => {
                    let _ = write!(s, "{c}");
                }
            },
            Node::Param(n) => s.push_str(self.name_str(n)),
            Node::Op { op, ty, args } => match op {
                Op::Bin(BinOp::Mul) => {
                    if in_mul {
                        s.push('(');
                    }
                    self.write(s, args[0], d, true, budget);
                    s.push('·');
                    self.write(s, args[1], d, true, budget);
                    if in_mul {
                        s.push(')');
                    }
                }
                Op::Bin(b) => {
                    let sym = match b {
                        BinOp::Add => Some("+"),
                        BinOp::Sub => Some("-"),
                        BinOp::Div => Some("/"),
                        BinOp::Rem => Some("%"),
                        BinOp::Lt => Some("<"),
                        BinOp::Le => Some("<="),
                        BinOp::Gt => Some(">"),
                        BinOp::Ge => Some(">="),
                        BinOp::Eq => Some("=="),
                        BinOp::Ne => Some("!="),
                        _ => None,
                    };
                    match sym {
                        Some(sym) => {
                            s.push('(');
                            self.write(s, args[0], d, false, budget);
                            let _ = write!(s, " {sym} ");
                            self.write(s, args[1], d, false, budget);
                            s.push(')');
                        }
                        None => self.call(s, b.name(), &args[..2], d, budget),
                    }
                }
                Op::Un(u) => self.call(s, u.name(), &args[..1], d, budget),
                Op::Call(f) => self.call(s, f.name(), &args[..1], d, budget),
                Op::Cast => {
                    self.write(s, args[0], d, true, budget);
                    let _ = write!(s, " as {ty}");
                }
                Op::Bitcast => self.call(s, &format!("bitcast::<{ty}>"), &args[..1], d, budget),
                Op::Select => self.call(s, "select", &args, d, budget),
                Op::Fma => self.call(s, "fma", &args, d, budget),
                Op::Dot4(k) => self.call(s, k.name(), &args, d, budget),
            },
        }
    }

    fn call(&self, s: &mut String, name: &str, args: &[NodeId], depth: usize, budget: &mut usize) {
        s.push_str(name);
        s.push('(');
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            self.write(s, *a, depth, false, budget);
        }
        s.push(')');
    }

    /// The first node (pre-order, left to right) where `a` and `b` differ: its operand path
    /// and the two differing sub-expressions. `None` if they are the same node.
    pub fn first_difference(&self, a: NodeId, b: NodeId) -> Option<(Vec<usize>, NodeId, NodeId)> {
        let mut path = Vec::new();
        let (mut a, mut b) = (a, b);
        loop {
            if a == b {
                return None;
            }
            let (na, nb) = (self.node(a), self.node(b));
            let shallow_same = match (na, nb) {
                (Node::Op { op: o1, ty: t1, args: a1 }, Node::Op { op: o2, ty: t2, args: a2 }) => {
                    o1 == o2
                        && t1 == t2
                        && a1.iter().filter(|x| **x != NONE).count() == a2.iter().filter(|x| **x != NONE).count()
                }
                (Node::Load { buf: b1, version: v1, .. }, Node::Load { buf: b2, version: v2, .. }) => {
                    b1 == b2 && v1 == v2
                }
                _ => false,
            };
            if !shallow_same {
                return Some((path, a, b));
            }
            let next = na.children().zip(nb.children()).enumerate().find(|(_, (x, y))| x != y);
            let atom = |n: NodeId| !matches!(self.node(n), Node::Op { .. } | Node::Load { .. });
            match next {
                // Two differing leaves read best with the operation that combines them.
                Some((_, (x, y))) if atom(x) && atom(y) => return Some((path, a, b)),
                Some((i, (x, y))) => {
                    path.push(i);
                    a = x;
                    b = y;
                }
                None => return Some((path, a, b)),
            }
        }
    }

    /// A one-line description of the first difference between `expected` and `found`.
    pub fn describe_difference(
        &self,
        expected: NodeId,
        found: NodeId,
        expected_side: &str,
        found_side: &str,
    ) -> String {
        match self.first_difference(expected, found) {
            None => "none".to_string(),
            Some((path, x, y)) => {
                let at = if path.is_empty() {
                    "at the root".to_string()
                } else {
                    let p: Vec<String> = path.iter().map(|i| i.to_string()).collect();
                    format!("at operand path {}", p.join("."))
                };
                format!("{at}: {expected_side} has `{}`, {found_side} has `{}`", self.show(x, 8), self.show(y, 8))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_int_sums_reassociate_integers_only() {
        let mut d = Dag::new();
        let x = d.name("x");
        let i32t = ScalarType::I32;
        let [a, b, c] = [0, 1, 2].map(|i| d.intern(Node::Leaf { buf: x, index: i }));
        let zero = d.constant(Const::zero(i32t));
        let add = |d: &mut Dag, p, q| d.op(Op::Bin(BinOp::Add), i32t, &[p, q]);
        // ((0 + a) + b) + c and (c + b) + (a + 0): one canonical form.
        let l = add(&mut d, zero, a);
        let l = add(&mut d, l, b);
        let l = add(&mut d, l, c);
        let cb = add(&mut d, c, b);
        let a0 = add(&mut d, a, zero);
        let r = add(&mut d, cb, a0);
        assert_ne!(l, r);
        let mut memo = HashMap::new();
        assert_eq!(d.canonical_int_sums(l, &mut memo), d.canonical_int_sums(r, &mut memo));
        // A different multiset of terms stays different: a + b + b is not a + b + c.
        let ab = add(&mut d, a, b);
        let abb = add(&mut d, ab, b);
        assert_ne!(d.canonical_int_sums(abb, &mut memo), d.canonical_int_sums(l, &mut memo));
        // Float additions keep their order.
        let f = ScalarType::F32;
        let fab = d.op(Op::Bin(BinOp::Add), f, &[a, b]);
        let fba = d.op(Op::Bin(BinOp::Add), f, &[b, a]);
        assert_ne!(d.canonical_int_sums(fab, &mut memo), d.canonical_int_sums(fba, &mut memo));
    }

    #[test]
    fn hash_consing_keeps_operand_order() {
        let mut d = Dag::new();
        let x = d.name("x");
        let a = d.intern(Node::Leaf { buf: x, index: 0 });
        let b = d.intern(Node::Leaf { buf: x, index: 1 });
        let ab = d.op(Op::Bin(BinOp::Add), ScalarType::F32, &[a, b]);
        let ab2 = d.op(Op::Bin(BinOp::Add), ScalarType::F32, &[a, b]);
        let ba = d.op(Op::Bin(BinOp::Add), ScalarType::F32, &[b, a]);
        assert_eq!(ab, ab2);
        assert_ne!(ab, ba);
        assert_eq!(d.show(ab, 5), "(x[0] + x[1])");
        let diff = d.describe_difference(ab, ba, "m=1", "rows");
        assert_eq!(diff, "at the root: m=1 has `(x[0] + x[1])`, rows has `(x[1] + x[0])`");
        let c = d.constant(Const::f32(0.0));
        let deep = d.op(Op::Bin(BinOp::Add), ScalarType::F32, &[ab, c]);
        let deep2 = d.op(Op::Bin(BinOp::Add), ScalarType::F32, &[ba, c]);
        assert_eq!(
            d.describe_difference(deep, deep2, "m=1", "rows"),
            "at operand path 0: m=1 has `(x[0] + x[1])`, rows has `(x[1] + x[0])`"
        );
    }
}
