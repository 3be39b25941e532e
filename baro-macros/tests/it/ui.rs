//! One trybuild case per diagnostic of `#[kernel]` (the `.stderr` next to each is the exact
//! expected output), plus kernels that must compile. Regenerate with `TRYBUILD=overwrite`
//! and read every changed `.stderr`: the span must sit on the right token.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
