//! `par_team`: a lane reduction inside a parallel loop needs a team of that many lanes per
//! iteration. `lanes::expand` refuses a team-less loop and a team of another size (the GPU
//! lowering would otherwise give each iteration one thread and treat the loop's threads as
//! the reduction's lanes), and accepts the matching team.

use baro_dsl::ir::Kernel;

fn matvec8(team: &str) -> Kernel {
    let text = format!(
        "kernel matvec8 {{
    param p0 x: &[f32]
    param p1 w: &[f32]
    param p2 y: &mut [f32]
    param p3 k: usize
    param p4 n: usize
    var v0 base: usize
    var v1 t: usize
    var v2 o: usize
    var v3 i: usize
    grid [div(add(p4, 7:usize), 8:usize)]
    block 256
    body {{
        let v0 = mul(group_id(0), 8:usize)
        parfor v1 in ..8:usize {team}{{
            let v2 = add(v0, v1)
            store p2[v2] = reduce(sum, f32, lanes(32, butterfly), v3, p3,
                mul(load(p0, v3), load(p1, add(mul(v2, p3), v3))))
        }}
    }}
}}"
    );
    Kernel::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn reduction_in_a_team_less_par_loop_is_refused() {
    let err =
        baro_dsl::lanes::expand(&matvec8("")).expect_err("a team-less loop with a lane reduction must be refused");
    let msg = err.to_string();
    assert!(msg.contains("par_team(0..n, 32)"), "the error names the fix: {msg}");
}

#[test]
fn team_of_another_size_is_refused() {
    let err = baro_dsl::lanes::expand(&matvec8("team 16 "))
        .expect_err("a team of 16 for a 32-lane reduction must be refused");
    let msg = err.to_string();
    assert!(msg.contains("teams of 16 lanes"), "the error names the team: {msg}");
}

#[test]
fn matching_team_expands_and_round_trips() {
    let k = matvec8("team 32 ");
    let text = k.to_string();
    assert!(text.contains("team 32"), "{text}");
    assert_eq!(Kernel::from_text(&text).as_ref(), Ok(&k));
    baro_dsl::lanes::expand(&k).expect("a 32-lane team for a 32-lane reduction expands");
}
