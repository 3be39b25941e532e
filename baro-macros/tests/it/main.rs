//! baro-macros' integration tests as one binary (STYLE 18): `expand` (the generated builders
//! equal hand-built IR) and `ui` (trybuild: one case per diagnostic, the cases and their
//! `.stderr` in `tests/ui/`, found from the package root, so they stay there). One module:
//! `cargo test -p baro-macros --test it ui::`.

mod expand;
mod ui;
