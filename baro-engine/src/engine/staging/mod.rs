//! Expert staging: where the routed experts live when the device-memory budget does not hold
//! them all. `budget` plans resident vs staged; `store` keeps every layer's experts in pinned
//! host memory; `cache` + `slots` are decode's per-layer LRU expert slots; `layer` is
//! prefill's double-buffered whole-layer staging on a copy stream. Staging changes where bytes
//! live, never what is computed: the same kernels read the same bytes, by slot instead of by
//! expert id. Nothing here launches a kernel or calls a driver.

pub mod budget;
pub mod cache;
pub mod layer;
pub mod place;
pub mod slots;
pub mod store;

pub use budget::{format_bytes, parse_bytes, plan, BudgetError, MemoryMode, MemoryNeeds, MemoryPlan};
pub use cache::{CacheError, CacheStats, Miss, SlotCache};
pub use layer::LayerStaging;
pub use place::place_experts;
pub use slots::{DecodeSlots, SlotError};
pub use store::{ExpertStore, StoredPart};
