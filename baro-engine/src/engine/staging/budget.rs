//! The device-memory plan: what the engine needs (non-expert weights, state and scratch, measured; the
//! routed experts, from the file's shapes) against a budget (`--vram-budget`, by default the
//! device's free memory), and the mode that fits: resident when everything does, otherwise
//! staged with as many decode slots per layer as fit (at most the ones asked for), otherwise
//! an error that says the budget, what was needed and the minimum that would work. Also the
//! byte-size text users type (`24G`) and the one the engine prints. Pure arithmetic: no
//! device, no allocation.

use std::fmt;

use crate::engine::weights::MatrixShape;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// What the model needs on the device, in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryNeeds {
    /// Non-expert weights, the KV cache, the GDN state, the RoPE table and the scratch buffers,
    /// as allocated, plus the rows scratch of one default prefill chunk (allocated at the
    /// first batched pass, counted from the start).
    pub fixed: u64,
    /// Per layer, the bytes of one routed expert (fused gate and up, down).
    pub per_expert: Vec<u64>,
    pub n_experts: usize,
    /// Experts each token uses per layer: the fewest decode slots that can work.
    pub top_k: usize,
}

impl MemoryNeeds {
    /// From the measured fixed bytes and every layer's expert shapes (fused gate and up, down).
    pub fn new(fixed: u64, shapes: &[[MatrixShape; 2]], n_experts: usize, top_k: usize) -> MemoryNeeds {
        let per_expert = shapes.iter().map(|parts| parts.iter().map(|p| p.mat_bytes() as u64).sum()).collect();
        MemoryNeeds { fixed, per_expert, n_experts, top_k }
    }
    /// Every routed expert of every layer.
    pub fn all_experts(&self) -> u64 {
        self.per_expert.iter().sum::<u64>() * self.n_experts as u64
    }
    /// One decode slot in every layer.
    pub fn slot_row(&self) -> u64 {
        self.per_expert.iter().sum()
    }
    /// Prefill's two whole-layer staging sets, each sized for the largest layer.
    pub fn staging(&self) -> u64 {
        2 * self.per_expert.iter().copied().max().unwrap_or(0) * self.n_experts as u64
    }
    /// Staged mode with `slots` decode slots per layer.
    pub fn staged(&self, slots: usize) -> u64 {
        self.fixed + self.staging() + slots as u64 * self.slot_row()
    }
    pub fn resident(&self) -> u64 {
        self.fixed + self.all_experts()
    }
}

/// Where the routed experts live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryMode {
    /// Every weight on the device.
    Resident,
    /// Routed experts in pinned host memory; `slots` decode slots per layer on the device (at
    /// most `asked`; fewer when the budget holds fewer), plus prefill's two staging sets.
    Staged { slots: usize, asked: usize },
}

/// The plan the engine runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// `None`: no budget (the host device, whose memory is the process's).
    pub budget: Option<u64>,
    pub needs: MemoryNeeds,
    pub mode: MemoryMode,
}

impl MemoryPlan {
    /// Device bytes the plan uses.
    pub fn device_bytes(&self) -> u64 {
        match self.mode {
            MemoryMode::Resident => self.needs.resident(),
            MemoryMode::Staged { slots, .. } => self.needs.staged(slots),
        }
    }
}

impl fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let budget = self.budget.map_or("no budget".to_string(), |b| format!("budget {}", format_bytes(b)));
        match self.mode {
            MemoryMode::Resident => {
                write!(f, "resident: {} on the device ({budget})", format_bytes(self.device_bytes()))
            }
            MemoryMode::Staged { slots, asked } => {
                let fewer =
                    if slots < asked { format!(", {asked} asked, the budget holds {slots}") } else { String::new() };
                write!(
                    f,
                    "staged: {} of routed experts in pinned host memory, {slots} expert slots per layer{fewer}, {} on the device ({budget})",
                    format_bytes(self.needs.all_experts()),
                    format_bytes(self.device_bytes())
                )
            }
        }
    }
}

/// A budget too small for even the smallest staged layout: the user's to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "vram budget: expected at least {} ({minimum} bytes: non-expert weights, state and scratch {} + prefill staging of two whole layers {} + {top_k} expert slots per layer {}), found {} ({budget} bytes); {asked} slots per layer would need {}",
    format_bytes(*minimum), format_bytes(*fixed), format_bytes(*staging), format_bytes(*slots_bytes), format_bytes(*budget), format_bytes(*needed)
)]
pub struct BudgetError {
    pub budget: u64,
    /// The staged layout with the slots asked for.
    pub needed: u64,
    /// The smallest budget that works: staged with top-k slots per layer.
    pub minimum: u64,
    pub fixed: u64,
    pub staging: u64,
    pub top_k: usize,
    pub slots_bytes: u64,
    pub asked: usize,
}

/// The mode for `budget` (`None`: unlimited) with up to `asked` decode slots per layer
/// (clamped to the number of experts; at least top-k).
pub fn plan(budget: Option<u64>, needs: MemoryNeeds, asked: usize) -> Result<MemoryPlan, BudgetError> {
    let Some(b) = budget else {
        return Ok(MemoryPlan { budget, needs, mode: MemoryMode::Resident });
    };
    if needs.resident() <= b {
        return Ok(MemoryPlan { budget, needs, mode: MemoryMode::Resident });
    }
    let asked = asked.clamp(needs.top_k, needs.n_experts.max(needs.top_k));
    let row = needs.slot_row().max(1);
    let fit = b.saturating_sub(needs.fixed + needs.staging()) / row;
    let slots = (asked as u64).min(fit) as usize;
    if slots < needs.top_k || needs.fixed + needs.staging() > b {
        return Err(BudgetError {
            budget: b,
            needed: needs.staged(asked),
            minimum: needs.staged(needs.top_k),
            fixed: needs.fixed,
            staging: needs.staging(),
            top_k: needs.top_k,
            slots_bytes: needs.top_k as u64 * needs.slot_row(),
            asked,
        });
    }
    Ok(MemoryPlan { budget, needs, mode: MemoryMode::Staged { slots, asked } })
}

/// A byte size as users type it: a number (a decimal fraction allowed) and an optional binary
/// suffix K, M, G or T (powers of 1024; `KiB`, `GB` and lowercase read the same): `24G`,
/// `1.5GiB`, `512m`, `1000000`. Fractions of a byte round down.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let bad = |why: &str| {
        format!("expected a size such as 24G, 512M or 1.5GiB (K, M, G, T: powers of 1024), found `{text}`{why}")
    };
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let unit = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KIB,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => TIB,
        _ => return Err(bad("")),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(bad(""));
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().map_err(|_| bad(" (too large)"))? };
    // The fraction in units of 10^-digits, exactly: value = whole·unit + frac·unit / 10^digits.
    let digits = frac.len().min(18) as u32;
    let frac_num: u128 = if digits == 0 { 0 } else { frac[..digits as usize].parse().map_err(|_| bad(""))? };
    let bytes = whole as u128 * unit as u128 + frac_num * unit as u128 / 10u128.pow(digits);
    if bytes == 0 {
        return Err(bad(" (zero bytes)"));
    }
    u64::try_from(bytes).map_err(|_| bad(" (too large)"))
}

/// `format_bytes(24 << 30)` = "24.00 GiB": three significant-ish digits in the largest unit
/// that is at least 1.
pub fn format_bytes(n: u64) -> String {
    let (unit, name) = match n {
        n if n >= TIB => (TIB, "TiB"),
        n if n >= GIB => (GIB, "GiB"),
        n if n >= MIB => (MIB, "MiB"),
        n if n >= KIB => (KIB, "KiB"),
        _ => return format!("{n} B"),
    };
    format!("{:.2} {name}", n as f64 / unit as f64)
}
