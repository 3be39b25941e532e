//! `cargo run -p baro-engine`: until the engine lands, a demonstration of the DSL. It builds
//! every example kernel pair, verifies each kernel and each rows sibling, runs them on the
//! host JIT, compares the rows sibling with replays of the m=1 kernel byte for byte, and
//! prints what was proved and measured. It never claims a target it did not run.

mod demo;

fn main() {
    match demo::run() {
        Ok(()) => {}
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
