//! The server's features beyond generation: routes and error shapes (`routes`), constrained
//! decoding (`constrain`), tool calls (`tools`) and the block prefix cache (`prefix`). Each
//! module's `//!` says what it shows.

mod constrain;
mod prefix;
mod routes;
mod tools;
