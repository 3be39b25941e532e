//! baro-fuzz's integration test binary (STYLE 18's layout, as in every crate): `corpus`
//! replays the committed corpora and regressions. `cargo test -p baro-fuzz --test it`.

mod corpus;
