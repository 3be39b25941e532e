//! The host's matrix step: `Stmt::MmaI8` rewritten, before lowering, into the plain IR of
//! its definition (`MmaI8::reference`): for each of the 16 × 8 outputs, an i32 accumulator
//! from 0 through `dot4_i8` of the row's and column's words in order, then one store. The
//! loads and the store are the IR's, so bounds are checked as everywhere. Exact, like every
//! integer operation; the verifier proved the sums do not wrap, so the order is immaterial.
//! Nothing else in the kernel changes.

use crate::ir::{BinOp, Buf, Const, Dot4Kind, Expr, Kernel, MmaI8, ScalarType, Stmt, Var, MMA_K_WORDS, MMA_M, MMA_N};

/// Whether `body` holds a matrix step anywhere.
pub(super) fn has_mma(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::MmaI8(_) => true,
        Stmt::For { body, .. } | Stmt::ParFor { body, .. } | Stmt::Lanes { body, .. } => has_mma(body),
        Stmt::If { then_body, else_body, .. } => has_mma(then_body) || has_mma(else_body),
        _ => false,
    })
}

/// `k` with every matrix step written out as loops.
pub(super) fn expand(k: &Kernel) -> Kernel {
    let mut k = k.clone();
    let body = std::mem::take(&mut k.body);
    k.body = block(&mut k, body);
    k
}

fn block(k: &mut Kernel, body: Vec<Stmt>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            Stmt::MmaI8(m) => out.extend(step(k, *m)),
            Stmt::For { var, start, end, step, body } => {
                out.push(Stmt::For { var, start, end, step, body: block(k, body) })
            }
            Stmt::ParFor { var, end, team, body } => out.push(Stmt::ParFor { var, end, team, body: block(k, body) }),
            Stmt::Lanes { lane, count, implements, body } => {
                out.push(Stmt::Lanes { lane, count, implements, body: block(k, body) })
            }
            Stmt::If { cond, then_body, else_body } => {
                let then_body = block(k, then_body);
                out.push(Stmt::If { cond, then_body, else_body: block(k, else_body) })
            }
            s => out.push(s),
        }
    }
    out
}

fn step(k: &mut Kernel, m: MmaI8) -> Vec<Stmt> {
    let idx = ScalarType::INDEX;
    let mut out = Vec::new();
    // Each operand evaluated once, as on a GPU.
    let names = ["mma_c_off", "mma_c_stride", "mma_a_off", "mma_a_stride", "mma_b_off", "mma_b_stride", "mma_steps"];
    let mut vals = Vec::new();
    for (e, name) in m.exprs().into_iter().zip(names) {
        let v = k.add_var(name, idx, false);
        out.push(Stmt::Let { var: v, value: e.clone() });
        vals.push(Expr::Var(v));
    }
    let [c_off, c_stride, a_off, a_stride, b_off, b_stride, steps]: [Expr; 7] = match vals.try_into() {
        Ok(v) => v,
        Err(_) => unreachable!("seven operands"),
    };
    let row = k.add_var("mma_m", idx, false);
    let col = k.add_var("mma_n", idx, false);
    let word = k.add_var("mma_w", idx, false);
    let acc = k.add_var("mma_acc", ScalarType::I32, true);
    let add = |a: Expr, b: Expr| Expr::bin(BinOp::Add, a, b);
    let mul = |a: Expr, b: Expr| Expr::bin(BinOp::Mul, a, b);
    let at = |off: &Expr, stride: &Expr, i: Var, j: Expr| add(add(off.clone(), mul(Expr::Var(i), stride.clone())), j);
    let x = Expr::load(Buf::Shared(m.a.array), at(&a_off, &a_stride, row, Expr::Var(word)));
    let y = Expr::load(Buf::Shared(m.b.array), at(&b_off, &b_stride, col, Expr::Var(word)));
    let words = mul(steps, Expr::index(MMA_K_WORDS as u64));
    let inner = vec![
        Stmt::Let { var: acc, value: Expr::c(Const::new(ScalarType::I32, 0)) },
        Stmt::For {
            var: word,
            start: Expr::index(0),
            end: words,
            step: Expr::index(1),
            body: vec![Stmt::Assign { var: acc, value: Expr::dot4(Dot4Kind::I8I8, x, y, Expr::Var(acc)) }],
        },
        Stmt::Store {
            buf: Buf::Shared(m.c.array),
            index: at(&c_off, &c_stride, row, Expr::Var(col)),
            value: Expr::Var(acc),
        },
    ];
    let over = |var: Var, n: u32, body: Vec<Stmt>| Stmt::For {
        var,
        start: Expr::index(0),
        end: Expr::index(n as u64),
        step: Expr::index(1),
        body,
    };
    out.push(over(row, MMA_M, vec![over(col, MMA_N, inner)]));
    out
}
