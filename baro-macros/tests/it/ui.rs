//! One trybuild case per diagnostic of `#[kernel]` (the `.stderr` next to each is the exact
//! expected output). Regenerate with `TRYBUILD=overwrite` and read every changed `.stderr`:
//! the span must sit on the right token. Kernels that must compile are the `pass` module's.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail_*.rs");
}
