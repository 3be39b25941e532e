//! Spinners on stderr around the CLI's slow steps (building the default model, loading a
//! model, compiling kernels and uploading weights). Hidden when stderr is not a terminal, so
//! piped output and tests see none of it. Never prints to stdout.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Runs `f` under a spinner showing `message` and the elapsed time; clears it afterwards and
/// returns `f`'s result with the wall-clock time it took.
pub fn spin<T>(message: &str, f: impl FnOnce() -> T) -> (T, Duration) {
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner().with_message(message.to_string());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    } else {
        ProgressBar::hidden()
    };
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    bar.finish_and_clear();
    (out, took)
}
