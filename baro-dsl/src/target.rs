//! Compilation targets: the host CPU, NVIDIA GPUs through NVPTX, AMD GPUs through AMDGPU.
//!
//! The wave width (lanes that run in lockstep and exchange values by shuffles) comes from
//! here and nowhere else.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// x86-64 JIT in this process; lanes are emulated in lockstep, any lane count works.
    Host,
    /// `nvptx64-nvidia-cuda`, compute capability `sm` (90 for Hopper).
    Nvptx { sm: u32 },
    /// `amdgcn-amd-amdhsa`, processor `arch` (`gfx1100`, `gfx942`, ...).
    Amdgpu { arch: String },
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unsupported target `{found}`: expected host, sm_NN (e.g. sm_90) or gfxNNN (e.g. gfx1100, gfx942)")]
pub struct TargetError {
    pub found: String,
}

impl Target {
    /// Lanes per wave: 32 on NVIDIA and RDNA (gfx10/11/12, wave32), 64 on GCN/CDNA (gfx9).
    /// `None` on the host, which emulates any width.
    pub fn wave_width(&self) -> Option<u32> {
        match self {
            Target::Host => None,
            Target::Nvptx { .. } => Some(32),
            Target::Amdgpu { arch } => Some(if arch.starts_with("gfx9") { 64 } else { 32 }),
        }
    }

    pub fn triple(&self) -> &'static str {
        match self {
            Target::Host => "x86_64-unknown-linux-gnu",
            Target::Nvptx { .. } => "nvptx64-nvidia-cuda",
            Target::Amdgpu { .. } => "amdgcn-amd-amdhsa",
        }
    }

    /// The processor name LLVM knows (`sm_90`, `gfx1100`); empty for the host.
    pub fn cpu(&self) -> String {
        match self {
            Target::Host => String::new(),
            Target::Nvptx { sm } => format!("sm_{sm}"),
            Target::Amdgpu { arch } => arch.clone(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Host => f.write_str("host"),
            Target::Nvptx { sm } => write!(f, "sm_{sm}"),
            Target::Amdgpu { arch } => f.write_str(arch),
        }
    }
}

impl std::str::FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Target, TargetError> {
        let err = || TargetError { found: s.to_string() };
        if s == "host" {
            return Ok(Target::Host);
        }
        if let Some(n) = s.strip_prefix("sm_") {
            let sm: u32 = n.parse().map_err(|_| err())?;
            if !(50..=120).contains(&sm) {
                return Err(err());
            }
            return Ok(Target::Nvptx { sm });
        }
        if let Some(n) = s.strip_prefix("gfx") {
            if n.len() >= 3 && n.chars().all(|c| c.is_ascii_hexdigit()) {
                return Ok(Target::Amdgpu { arch: s.to_string() });
            }
        }
        Err(err())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wave_width_comes_from_the_target() {
        assert_eq!("gfx1100".parse::<Target>().unwrap().wave_width(), Some(32));
        assert_eq!("gfx942".parse::<Target>().unwrap().wave_width(), Some(64));
        assert_eq!("sm_90".parse::<Target>().unwrap().wave_width(), Some(32));
        assert_eq!(Target::Host.wave_width(), None);
    }

    #[test]
    fn bad_names_say_what_is_expected() {
        let e = "cuda".parse::<Target>().unwrap_err().to_string();
        assert!(e.contains("expected host, sm_NN"), "{e}");
        assert!("sm_9x".parse::<Target>().is_err());
        assert!("gfx".parse::<Target>().is_err());
    }
}
