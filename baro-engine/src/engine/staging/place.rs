//! Puts the routed experts where the memory plan says: uploaded into `Weights` (resident) or
//! into the pinned store with decode slots on the device (staged). Called once by
//! `Model::new` after the non-expert weights and the state are on the device, so their bytes
//! are measured, not estimated. Never launches a kernel.

use baro_dsl::runtime::Device;

use crate::engine::staging::budget::{plan, MemoryMode, MemoryNeeds, MemoryPlan};
use crate::engine::staging::slots::DecodeSlots;
use crate::engine::staging::store::ExpertStore;
use crate::engine::weights::{expert_shapes, host_experts, upload_experts, ModelSource, Weights};
use crate::engine::EngineError;
use crate::model::ModelConfig;

/// Plans against `budget` (`None`: no limit) with `fixed` bytes already allocated, then
/// uploads or stages every layer's experts.
pub fn place_experts(
    device: &Device,
    source: &ModelSource,
    cfg: &ModelConfig,
    weights: &mut Weights,
    budget: Option<u64>,
    fixed: u64,
    slots: usize,
) -> Result<(MemoryPlan, Option<DecodeSlots>), EngineError> {
    if slots < cfg.n_experts_used {
        return Err(EngineError::Unsupported {
            what: "expert slots",
            expected: format!("at least the model's top-k ({})", cfg.n_experts_used),
            found: slots.to_string(),
        });
    }
    let shapes = expert_shapes(source, cfg)?;
    let needs = MemoryNeeds::new(fixed, &shapes, cfg.n_experts, cfg.n_experts_used);
    let plan = plan(budget, needs, slots)?;
    match plan.mode {
        MemoryMode::Resident => {
            for (i, layer) in weights.layers.iter_mut().enumerate() {
                layer.moe.experts = Some(upload_experts(device, host_experts(source, cfg, i)?)?);
            }
            Ok((plan, None))
        }
        MemoryMode::Staged { slots, .. } => {
            let store = ExpertStore::load(device, source, cfg)?;
            let decode = DecodeSlots::new(device, store, slots, cfg.n_experts_used)?;
            Ok((plan, Some(decode)))
        }
    }
}
