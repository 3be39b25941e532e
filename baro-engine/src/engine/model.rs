//! A model on a device: everything a step reads and no sequence owns (the device, the config
//! and weights, the compiled kernels, the precision, the memory plan), and the `Workspace`,
//! what the model's steps write but no sequence owns (staged decode's expert slot cache, the
//! rows scratch of batched passes, the prefill layer staging). One sequence's data is a
//! `State`; every step takes the model by `&self` and the states it advances by `&mut`:
//! `step(&self, &mut State, token)` (`decode`), `prefill` (`prefill`), `step_batch`
//! (`batch_step`).
//!
//! The workspace sits behind one `Mutex`, locked for the whole of every step, prefill and
//! batched step. Two reasons, one lock: the workspace is written by those passes, and every
//! pass queues its launches on the device's one default stream, which a graphed decode step
//! records whole (`Device::replay`), so a launch of another pass queued while it records would
//! land in its graph. Passes on one model therefore never overlap, whatever states they work
//! on; the lock says so in the type, and makes `Model` `Sync` (an `Arc<Model>` may be stepped
//! from several threads, one pass at a time) for one uncontended lock per pass. Never holds a
//! kernel body or calls a driver.

use std::sync::{Mutex, MutexGuard};

use baro_dsl::runtime::Device;

use crate::engine::error::EngineError;
use crate::engine::options::{EngineOptions, Precision};
use crate::engine::prefill::PrefillMode;
use crate::engine::registry::Kernels;
use crate::engine::scratch::Scratch;
use crate::engine::staging::{self, CacheStats, DecodeSlots, LayerStaging, MemoryMode, MemoryPlan};
use crate::engine::state::{State, StatePart};
use crate::engine::weights::{ModelSource, Weights};
use crate::model::ModelConfig;
use crate::tokenizer::TokenId;

/// A model's weights and kernels on a device, shared by every sequence stepped on it.
pub struct Model {
    pub(crate) device: Device,
    pub(crate) kernels: Kernels,
    pub(crate) weights: Weights,
    pub(crate) precision: Precision,
    pub(crate) memory: MemoryPlan,
    /// Positions each sequence's KV cache holds (`new_state`).
    pub(crate) max_ctx: usize,
    /// `EngineOptions::graphs`: resident decode steps replay each state's launch graphs.
    pub(crate) graphs: bool,
    /// The negative control's opt-out (`set_reordered_attention`).
    pub(crate) reordered_attention: bool,
    /// What passes write and no sequence owns; locked for a whole pass (module docs).
    workspace: Mutex<Workspace>,
}

/// What a model's passes write but no sequence owns.
pub(crate) struct Workspace {
    /// Staged mode's decode expert cache; `None` when the experts are resident.
    pub(crate) slots: Option<DecodeSlots>,
    /// The rows pass's buffers (batched prefill chunks, batched decode steps), allocated at
    /// the first one (or by `reserve_rows`); they only grow.
    pub(crate) rows: Option<Scratch>,
    /// Staged mode's whole-layer sets for batched passes, allocated at the first one.
    pub(crate) layer_staging: Option<LayerStaging>,
    /// Batched prefill's per-stage seconds when profiling (`set_prefill_profile`).
    pub(crate) prefill_profile: Option<std::collections::BTreeMap<&'static str, f64>>,
}

impl Workspace {
    /// Staged: allocates the two whole-layer sets batched passes stream experts into (the
    /// budget already counts them), once; resident: nothing.
    pub(crate) fn ensure_layer_staging(&mut self, device: &Device) -> Result<(), EngineError> {
        if let (Some(slots), None) = (&self.slots, &self.layer_staging) {
            self.layer_staging = Some(LayerStaging::new(device, slots.store())?);
        }
        Ok(())
    }

    /// Makes the rows scratch hold at least `rows` rows (it only grows).
    pub(crate) fn grow_rows(&mut self, model: &Model, rows: usize) -> Result<(), EngineError> {
        if self.rows.as_ref().is_none_or(|s| s.rows < rows) {
            self.rows = None;
            self.rows = Some(Scratch::new(&model.device, &model.weights.config, rows, model.max_ctx)?);
        }
        Ok(())
    }
}

impl Model {
    /// Compiles the decode kernels and uploads the weights of `source`, the routed experts
    /// resident or staged as the memory plan says. The plan counts one sequence's state (its
    /// bytes are measured on a state allocated for it and then freed).
    pub fn new(device: Device, source: &ModelSource, options: EngineOptions) -> Result<Model, EngineError> {
        Model::with_state(device, source, options).map(|(model, _)| model)
    }

    /// `new`, and the sequence state its memory plan measured.
    pub(crate) fn with_state(
        device: Device,
        source: &ModelSource,
        options: EngineOptions,
    ) -> Result<(Model, State), EngineError> {
        let cfg = source.config()?;
        if cfg.conv_kernel < 2 {
            return Err(EngineError::Unsupported {
                what: "conv kernel length",
                expected: "at least 2".into(),
                found: cfg.conv_kernel.to_string(),
            });
        }
        let max_ctx = match cfg.context_length {
            0 => options.max_ctx,
            n => options.max_ctx.min(n),
        }
        .max(1);
        let budget = match options.vram_budget {
            Some(b) => Some(b),
            None => device.memory_info()?.map(|m| m.free),
        };
        let kernels = Kernels::compile(&device)?;
        let before = device.allocated_bytes();
        let state = State::new(&device, &cfg, max_ctx)?;
        let mut weights = Weights::load_dense(&device, source, &cfg)?;
        // The rows scratch of a default prefill chunk is allocated at the first batched pass;
        // the plan counts it now, so that a budget which holds the weights also holds the chunk
        // (attention's probabilities in it grow with the context: GiBs at long context).
        let rows_scratch = Scratch::bytes(&cfg, PrefillMode::DEFAULT_CHUNK, max_ctx);
        let fixed = device.allocated_bytes() - before + rows_scratch;
        let (memory, slots) =
            staging::place_experts(&device, source, &cfg, &mut weights, budget, fixed, options.expert_slots)?;
        let workspace = Workspace { slots, rows: None, layer_staging: None, prefill_profile: None };
        let model = Model {
            device,
            kernels,
            weights,
            precision: options.precision,
            memory,
            max_ctx,
            graphs: options.graphs,
            reordered_attention: false,
            workspace: Mutex::new(workspace),
        };
        Ok((model, state))
    }

    /// The workspace, for one pass. A pass that panicked may have left the slot cache's
    /// bookkeeping out of step with the slots' bytes, so a poisoned lock is an error, never
    /// silently reused.
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, Workspace>, EngineError> {
        self.workspace.lock().map_err(|_| EngineError::Unsupported {
            what: "model workspace",
            expected: "a lock no pass panicked while holding".into(),
            found: "a poisoned lock (an earlier pass panicked: a bug in baro)".into(),
        })
    }

    /// The workspace between passes (`&mut self`: no pass holds it), for settings and
    /// counters; a poisoned lock's data is still readable.
    pub(crate) fn workspace_mut(&mut self) -> &mut Workspace {
        self.workspace.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the workspace's counters (waits for a pass in flight); a poisoned lock's data is
    /// still readable.
    pub(crate) fn peek<T>(&self, f: impl FnOnce(&Workspace) -> T) -> T {
        f(&self.workspace.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A fresh sequence state (position 0, zeroed) of this model's shapes and context.
    pub fn new_state(&self) -> Result<State, EngineError> {
        Ok(State::new(&self.device, &self.weights.config, self.max_ctx)?)
    }

    /// A copy of `state` (KV cache, conv rings, delta-rule states, position) in fresh buffers:
    /// stepping the copy continues the sequence from here, the original is untouched.
    pub fn snapshot(&self, state: &State) -> Result<State, EngineError> {
        let _pass = self.lock()?;
        Ok(state.snapshot(&self.device, &self.weights.config)?)
    }

    /// Reads `state` to the host buffer by buffer (`State::read_parts`: the KV cache's rows
    /// 0..pos, the GDN conv rings and delta-rule states whole), for a check that two ways of
    /// feeding the same tokens left the same bytes. Waits for the passes queued before it.
    pub fn read_state(&self, state: &State, visit: &mut dyn FnMut(StatePart, &[u8])) -> Result<(), EngineError> {
        let _pass = self.lock()?;
        Ok(state.read_parts(&self.device, &self.weights.config, visit)?)
    }

    /// Puts `state` back to position 0 (a new sequence).
    pub fn reset(&self, state: &mut State) -> Result<(), EngineError> {
        let _pass = self.lock()?;
        Ok(state.reset(&self.device)?)
    }

    /// What `step` would refuse for `token` fed to `state` (a token past the vocabulary, a
    /// full context), checked without touching the device.
    pub fn check_step(&self, state: &State, token: TokenId) -> Result<(), EngineError> {
        let vocab = self.weights.config.vocab_size;
        if token as usize >= vocab {
            return Err(EngineError::BadToken { token, vocab });
        }
        if state.pos >= state.max_ctx {
            return Err(EngineError::ContextFull { pos: state.pos, max_ctx: state.max_ctx });
        }
        Ok(())
    }

    /// Allocates the rows scratch (batched prefill chunks, batched decode steps) for up to
    /// `rows` rows, the output head's logits tile and, with staged experts, the two
    /// whole-layer staging sets now, so that later chunks and steps of at most `rows` rows
    /// allocate nothing: a server reserves its largest batch at start, and its device memory
    /// then stays flat however many requests come and go.
    pub fn reserve_rows(&self, rows: usize) -> Result<(), EngineError> {
        let mut ws = self.lock()?;
        ws.grow_rows(self, rows.max(1))?;
        ws.ensure_layer_staging(&self.device)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.weights.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Positions each sequence's state holds (the KV cache's capacity).
    pub fn max_context(&self) -> usize {
        self.max_ctx
    }

    /// The activations the quantized matvecs read.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Where the weights live and why.
    pub fn memory_plan(&self) -> &MemoryPlan {
        &self.memory
    }

    /// Whether the routed experts are staged (the decode slot cache, layer staging).
    pub(crate) fn staged(&self) -> bool {
        matches!(self.memory.mode, MemoryMode::Staged { .. })
    }

    /// Whether decode steps replay launch graphs: `EngineOptions::graphs` with resident
    /// experts (staged decode copies experts between launches, so it launches one by one).
    pub fn decode_graphs(&self) -> bool {
        self.graphs && !self.staged()
    }

    /// Staged mode's decode expert cache (its counters, slot count and store); `None` when
    /// resident. Takes `&mut self` so that no pass can hold the workspace meanwhile.
    pub fn decode_slots(&mut self) -> Option<&DecodeSlots> {
        self.workspace_mut().slots.as_ref()
    }

    /// Staged mode's batched staging sets, once a batched pass has used them.
    pub fn layer_staging(&mut self) -> Option<&LayerStaging> {
        self.workspace_mut().layer_staging.as_ref()
    }

    /// The decode expert cache's counters summed over layers; `None` when resident.
    pub fn expert_cache_stats(&self) -> Option<CacheStats> {
        self.peek(|ws| ws.slots.as_ref().map(DecodeSlots::stats))
    }
}

/// A model may be shared between threads (an `Arc<Model>`; its passes serialize on the
/// workspace lock) and a sequence's state moved between them.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    fn moved<T: Send>() {}
    shared::<Model>();
    moved::<State>();
};
