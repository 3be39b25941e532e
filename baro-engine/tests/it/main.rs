//! baro-engine's integration tests as one binary (STYLE 18: one link of LLVM and the engine,
//! not one per file): a module per former `tests/*.rs` (`server_features` keeps its
//! submodules), sharing the helper modules `common` (fixtures, the test device:
//! `BARO_TEST_DEVICE`) and `server_common` (the default model, a loopback server and client).
//! Data stays beside this folder (`tests/data/`; `tests/clients/` is the client tier, not
//! Rust). One module: `cargo test -p baro-engine --test it kernels_matvec::`.
//!
//! The tests share one process and run on parallel threads: none may set environment
//! variables, change the current directory or rely on being alone (temporary files are named
//! per test, a server per test or `server_common::shared()`, whose counters only `server_api`
//! reads).

mod common;
mod server_common;

mod cli_errors;
mod cli_generate;
mod engine_batch_step;
mod engine_context_memory;
mod engine_digest;
mod engine_errors;
mod engine_fixtures;
mod engine_fused;
mod engine_gguf;
mod engine_graphs;
mod engine_q8;
mod kernels_attention;
mod kernels_gdn;
mod kernels_gpu_compile;
mod kernels_matvec;
mod kernels_moe;
mod kernels_norm;
mod kernels_q8;
mod kernels_rows;
mod model_exp_rounding;
mod model_fixtures;
mod model_malformed;
mod model_names;
mod model_quant;
mod model_safetensors;
mod pack_cli;
mod pack_synth;
mod prefill_identity;
mod reference_fixtures;
mod reference_gguf;
mod sampling_filters;
mod sampling_stop;
mod server_api;
mod server_batch;
mod server_cli;
mod server_errors;
mod server_features;
mod server_logprob;
mod staging_budget;
mod staging_cache;
mod staging_identity;
mod staging_layer;
mod tokenizer_chat;
mod tokenizer_gguf;
mod tokenizer_json;
