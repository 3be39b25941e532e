//! The server's features beyond generation, in one test binary (one link of the engine):
//! routes and error shapes (`routes`), constrained decoding (`constrain`), tool calls
//! (`tools`) and the block prefix cache (`prefix`). Each module's `//!` says what it shows.

#[path = "../server_common/mod.rs"]
mod server_common;

mod constrain;
mod prefix;
mod routes;
mod tools;
