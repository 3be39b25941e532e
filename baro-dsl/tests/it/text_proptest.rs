//! Property tests of the IR text form: random kernels (well-typed or not, with dangling ids
//! and invalid schedules) print and parse back to themselves, and the parser never panics on
//! random text, token soup, or printed kernels with random edits.

use baro_dsl::ir::{
    Access, BinOp, Buf, Const, Expr, Implements, Kernel, MathFn, MmaI8, Param, ParamId, ParamKind, Reduce, ReduceOp,
    ScalarType, SharedArray, SharedId, Sibling, Stmt, Tile, UnOp, Var, VarDecl, VerifyShapes,
};
use baro_dsl::schedule::{Combine, Schedule};
use proptest::prelude::*;
use proptest::sample::select;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z_][a-zA-Z0-9_]{0,7}",
        // Keywords and id-like words are still just names where a name is expected.
        1 => select(vec!["let", "mut", "in", "body", "kernel", "v3", "p0", "s1", "true", "reduce", "f32", "_"]).prop_map(String::from),
    ]
}

fn scalar_type() -> impl Strategy<Value = ScalarType> {
    select(ScalarType::ALL.to_vec())
}

fn constant() -> impl Strategy<Value = Const> {
    let special = select(vec![
        0u64,
        1,
        0x8000_0000,
        0x7fc0_0001,
        0xff80_0000,
        0x0000_0001,
        0x7f7f_ffff,
        0x8000,
        0x7c01,
        u64::MAX,
    ]);
    (scalar_type(), prop_oneof![any::<u64>(), special, any::<f32>().prop_map(|f| f.to_bits() as u64)])
        .prop_map(|(ty, bits)| Const::new(ty, bits))
}

/// Small ids mostly hit declared entities; some dangle; a few are huge.
fn id() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..6, 1 => 6u32..40, 1 => Just(u32::MAX)]
}

fn combine() -> impl Strategy<Value = Combine> {
    select(vec![Combine::Sequential, Combine::Butterfly, Combine::Pairwise])
}

fn schedule() -> impl Strategy<Value = Schedule> {
    let leaf = prop_oneof![
        Just(Schedule::Sequential),
        (0u32..70, combine()).prop_map(|(count, combine)| Schedule::Lanes { count, combine }),
        (any::<u32>(), combine()).prop_map(|(size, combine)| Schedule::Chunked { size, combine }),
    ];
    leaf.prop_recursive(3, 6, 1, |inner| {
        (0u32..100, inner).prop_map(|(block, across)| Schedule::Blocked { block, across: Box::new(across) })
    })
}

fn buf() -> impl Strategy<Value = Buf> {
    prop_oneof![id().prop_map(|i| Buf::Param(ParamId(i))), id().prop_map(|i| Buf::Shared(SharedId(i)))]
}

fn expr() -> BoxedStrategy<Expr> {
    let leaf = prop_oneof![
        constant().prop_map(Expr::Const),
        id().prop_map(|i| Expr::Var(Var(i))),
        id().prop_map(|i| Expr::Param(ParamId(i))),
        any::<u8>().prop_map(Expr::GroupId),
    ];
    leaf.prop_recursive(5, 48, 3, |e| {
        let b = || e.clone().prop_map(Box::new);
        prop_oneof![
            (buf(), b()).prop_map(|(buf, index)| Expr::Load { buf, index }),
            (select(UnOp::ALL.to_vec()), b()).prop_map(|(op, arg)| Expr::Unary { op, arg }),
            (select(BinOp::ALL.to_vec()), b(), b()).prop_map(|(op, lhs, rhs)| Expr::Binary { op, lhs, rhs }),
            (b(), b(), b()).prop_map(|(cond, then, els)| Expr::Select { cond, then, els }),
            (b(), b(), b()).prop_map(|(a, b, c)| Expr::Fma { a, b, c }),
            (scalar_type(), b()).prop_map(|(to, arg)| Expr::Cast { to, arg }),
            (scalar_type(), b()).prop_map(|(to, arg)| Expr::Bitcast { to, arg }),
            (select(MathFn::ALL.to_vec()), b()).prop_map(|(func, arg)| Expr::Call { func, arg }),
            (id(), b(), b()).prop_map(|(v, value, body)| Expr::Let { var: Var(v), value, body }),
            reduce(e.clone()).prop_map(|r| Expr::Reduce(Box::new(r))),
            (b(), any::<u32>()).prop_map(|(value, mask)| Expr::ShuffleXor { value, mask }),
        ]
    })
    .boxed()
}

fn reduce(e: BoxedStrategy<Expr>) -> impl Strategy<Value = Reduce> {
    (
        select(vec![ReduceOp::Add, ReduceOp::Max, ReduceOp::Min, ReduceOp::FmaSum]),
        scalar_type(),
        schedule(),
        id(),
        e.clone(),
        e,
    )
        .prop_map(|(op, ty, schedule, v, len, body)| Reduce { op, ty, schedule, var: Var(v), len, body })
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = prop_oneof![
        (id(), expr()).prop_map(|(v, value)| Stmt::Let { var: Var(v), value }),
        (id(), expr()).prop_map(|(v, value)| Stmt::Assign { var: Var(v), value }),
        (buf(), expr(), expr()).prop_map(|(buf, index, value)| Stmt::Store { buf, index, value }),
        Just(Stmt::Barrier),
        (any::<u32>(), expr()).prop_map(|(id, cond)| Stmt::Check { id, cond }),
        ((id(), expr(), expr()), (id(), expr(), expr()), (id(), expr(), expr()), expr()).prop_map(
            |(c, a, b, steps)| {
                let tile = |(s, offset, stride): (u32, Expr, Expr)| Tile { array: SharedId(s), offset, stride };
                Stmt::MmaI8(Box::new(MmaI8 { c: tile(c), a: tile(a), b: tile(b), steps }))
            }
        ),
    ];
    leaf.prop_recursive(3, 24, 4, |s| {
        let block = || prop::collection::vec(s.clone(), 0..4);
        prop_oneof![
            (id(), expr(), expr(), expr(), block()).prop_map(|(v, start, end, step, body)| Stmt::For {
                var: Var(v),
                start,
                end,
                step,
                body
            }),
            (expr(), block(), block()).prop_map(|(cond, then_body, else_body)| Stmt::If { cond, then_body, else_body }),
            (id(), expr(), prop::option::of(any::<u32>()), block()).prop_map(|(v, end, team, body)| Stmt::ParFor {
                var: Var(v),
                end,
                team,
                body
            }),
            (id(), any::<u32>(), prop::option::of((id(), reduce(expr()))), block()).prop_map(
                |(lane, count, imp, body)| {
                    let implements = imp.map(|(r, red)| Implements::one(Var(r), red));
                    Stmt::Lanes { lane: Var(lane), count, implements, body }
                }
            ),
        ]
    })
}

fn kernel() -> impl Strategy<Value = Kernel> {
    let param = (
        name(),
        prop_oneof![
            (scalar_type(), select(vec![Access::Read, Access::ReadWrite]))
                .prop_map(|(elem, access)| ParamKind::Buffer { elem, access }),
            scalar_type().prop_map(ParamKind::Scalar),
        ],
    )
        .prop_map(|(name, kind)| Param { name, kind });
    let shared = (name(), scalar_type(), any::<u32>()).prop_map(|(name, elem, len)| SharedArray { name, elem, len });
    let var = (name(), scalar_type(), any::<bool>()).prop_map(|(name, ty, mutable)| VarDecl { name, ty, mutable });
    let sibling = (
        name(),
        id(),
        prop::collection::vec((id(), expr()), 0..3),
        prop::collection::vec((id(), expr()), 0..2),
        prop::collection::vec(id(), 0..2),
    )
        .prop_map(|(of, rows, s, steps, carried)| Sibling {
            of,
            rows: ParamId(rows),
            row_strides: s.into_iter().map(|(p, e)| (ParamId(p), e)).collect(),
            row_steps: steps.into_iter().map(|(p, e)| (ParamId(p), e)).collect(),
            carried: carried.into_iter().map(ParamId).collect(),
        });
    let verify = prop::collection::vec((id(), prop::collection::vec(any::<u64>(), 0..4)), 0..3)
        .prop_map(|v| VerifyShapes { values: v.into_iter().map(|(p, xs)| (ParamId(p), xs)).collect() });
    (
        name(),
        prop::collection::vec(param, 0..6),
        prop::collection::vec(shared, 0..3),
        prop::collection::vec(var, 0..7),
        prop::collection::vec(expr(), 0..4),
        prop::collection::vec(stmt(), 0..6),
        prop::option::of(sibling),
        verify,
        (prop::option::of(any::<u32>()), prop::option::of(any::<u32>())),
    )
        .prop_map(|(name, params, shared, vars, grid, body, sibling, verify_shapes, (block, min_groups))| Kernel {
            name,
            params,
            shared,
            vars,
            grid,
            block,
            min_groups,
            body,
            sibling,
            verify_shapes,
        })
}

/// If `text` parses, its printed form must read back to the same kernel and print the same.
fn check_canonical(text: &str) -> Result<(), TestCaseError> {
    if let Ok(k) = Kernel::from_text(text) {
        let printed = k.to_string();
        let back = Kernel::from_text(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(&back, &k);
        prop_assert_eq!(back.to_string(), printed);
    }
    Ok(())
}

/// An edit to apply to a printed kernel at a position given as a fraction of its length.
#[derive(Clone, Debug)]
enum Edit {
    Delete { at: f64, len: usize },
    Insert { at: f64, text: String },
    Duplicate { at: f64, len: usize },
    Truncate { at: f64 },
}

fn edit() -> impl Strategy<Value = Edit> {
    let snippet = prop_oneof![
        select(vec![
            "(", ")", "{", "}", "[", "]", ",", ":", "=", "..", "<", ">", "&", ";", "-", "0x", "v0", "p9", "s0:x", "1e",
            "let", "reduce(", "lanes", "é", "\n", "//"
        ])
        .prop_map(String::from),
        "[ -~]{1,4}",
    ];
    prop_oneof![
        (0.0..1.0f64, 1usize..8).prop_map(|(at, len)| Edit::Delete { at, len }),
        (0.0..1.0f64, snippet).prop_map(|(at, text)| Edit::Insert { at, text }),
        (0.0..1.0f64, 1usize..40).prop_map(|(at, len)| Edit::Duplicate { at, len }),
        (0.0..1.0f64).prop_map(|at| Edit::Truncate { at }),
    ]
}

fn apply(text: &str, edit: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    let pos = |at: f64| ((chars.len() as f64 * at) as usize).min(chars.len());
    let s = |a: usize, b: usize| chars[a.min(chars.len())..b.min(chars.len())].iter().collect::<String>();
    match edit {
        Edit::Delete { at, len } => s(0, pos(*at)) + &s(pos(*at) + len, chars.len()),
        Edit::Insert { at, text } => s(0, pos(*at)) + text + &s(pos(*at), chars.len()),
        Edit::Duplicate { at, len } => s(0, pos(*at) + len) + &s(pos(*at), chars.len()),
        Edit::Truncate { at } => s(0, pos(*at)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_kernels_round_trip(k in kernel()) {
        let text = k.to_string();
        let back = Kernel::from_text(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &k);
        prop_assert_eq!(back.to_string(), text);
    }

    #[test]
    fn edited_kernels_never_panic(k in kernel(), edits in prop::collection::vec(edit(), 1..4)) {
        let mut text = k.to_string();
        for e in &edits {
            text = apply(&text, e);
        }
        check_canonical(&text)?;
    }

    #[test]
    fn random_text_never_panics(text in prop_oneof![any::<String>(), "[ -~\n]{0,300}"]) {
        check_canonical(&text)?;
        check_canonical(&format!("kernel k {{ body {{ {text} }} }}"))?;
    }

    #[test]
    fn token_soup_never_panics(words in prop::collection::vec(select(vec![
        "kernel", "k", "{", "}", "(", ")", "[", "]", ",", ":", "=", "..", "<", ">", "&", ";", "param", "shared", "var",
        "grid", "sibling", "of", "rows", "strides", "verify", "in", "body", "mut", "let", "store", "for", "step", "if",
        "else", "parfor", "lanes", "implements", "barrier", "mma_i8", "steps", "reduce", "sum", "max", "seq", "butterfly", "blocked",
        "chunked", "load", "select", "cast", "bitcast", "group_id", "shuffle_xor", "add", "neg", "exp", "true", "v0",
        "v1:x", "p0", "p0:n", "s0", "f32", "f16", "usize", "1", "0", "-1", "1.5", "0x7fc00001", "99999999999999999999",
    ]), 0..80)) {
        let text = words.join(" ");
        check_canonical(&text)?;
        check_canonical(&format!("kernel k {{ param p0 n: usize var v0 x: f32 body {{ {text} }} }}"))?;
    }
}
