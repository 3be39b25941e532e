//! baro-macros' integration tests as one binary (STYLE 18): `args` (the typed argument
//! structs convert to the positional launch list), `expand` (the generated builders
//! equal hand-built IR), `pass` (kernels that must compile and run, one module each) and `ui`
//! (trybuild: one case per diagnostic, the cases and their `.stderr` in `tests/ui/`, found
//! from the package root, so they stay there). One module: `cargo test -p baro-macros --test
//! it ui::`.

mod args;
mod expand;
mod pass;
mod ui;
