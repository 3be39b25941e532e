//! Calls into the `tokenizers` crate (and `minijinja`, for chat templates, see `chat.rs`) that
//! cannot take the engine down. The first crate panics on
//! some malformed files (0.23: a JSON syntax error inside `"decoder"` reaches an
//! `.expect("Helper")` in `decoders/mod.rs`) and on some well-formed ones at use (a `Strip`
//! decoder whose cuts cross slices a token backwards); `guarded` runs such a call under
//! `catch_unwind` and hands back the panic's message for the caller to turn into a
//! `TokenizerError`.
//!
//! The default panic hook would still print the panic (and a backtrace) to stderr, as if the
//! process had crashed. So the first guarded call installs, once per process, a hook that
//! forwards to the one installed before it unless the panicking thread is inside `guarded`
//! (a thread-local flag): other threads' panics, and panics outside guarded calls, print as
//! before. A hook an application sets later replaces this one; guarded panics then print but
//! are still caught.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside `guarded` (its panics are caught and reported there).
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

static QUIET_HOOK: Once = Once::new();

fn install_quiet_hook() {
    QUIET_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            // `try_with`: a panic while the thread's locals are being torn down still prints.
            if !GUARDED.try_with(Cell::get).unwrap_or(false) {
                previous(info);
            }
        }));
    });
}

/// Runs `f`; a panic inside it becomes `Err(the panic's message)`, printed nowhere.
///
/// `AssertUnwindSafe`: the callers pass calls on `tokenizers` values that are either dropped
/// after a panic (a load) or only read (`encode`/`decode` take `&self`; at worst a poisoned
/// lock inside makes every later call fail the same way, which is an error, not a crash).
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_quiet_hook();
    let outer = GUARDED.with(|g| g.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(outer));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string())
    })
}
