//! Runtimes (to be written).
