//! One typed options struct for compilation, and the one place that reads the environment.
//!
//! Every field that can change the bytes of a compiled kernel feeds the cache key
//! (`CompileOptions::key_bytes`); fields that only change where things are written do not.

use std::path::PathBuf;

/// AMDGPU code object version written into the module flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodeObjectVersion {
    V4,
    V5,
}

/// The order in which the host runtime runs the iterations of `par` loops and the
/// workgroups of a launch. A race-free kernel gives the same bytes in every order; `Shuffled`
/// exists so that byte-parity tests on the host can show a race the GPU would expose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HostOrder {
    /// 0, 1, 2, ...: the order of the source.
    #[default]
    Sequential,
    /// A seeded permutation per loop and per grid axis: i ↦ (a·i + b) mod n, a and b chosen
    /// from the seed, a coprime with n (loops of 2^31 iterations or more stay in order).
    Shuffled { seed: u64 },
}

/// How a CUDA launch graph (`Device::replay`) orders its kernels: `BARO_GRAPH_ORDER=chain|data`
/// (default chain). Never changes a byte of any output, only which kernels may run at the same
/// time; the host and HIP replay in recording order either way. Not part of the cache key (it
/// changes no compiled code).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GraphOrder {
    /// Each kernel after the one recorded before it, as on one stream.
    #[default]
    Chain,
    /// Each kernel after the last earlier one that wrote a buffer it uses and, for a buffer it
    /// writes, after every earlier one that read that buffer since (`runtime::graph::node_deps`):
    /// kernels with no path between them may run side by side, and every kernel reads what it
    /// would read in recording order.
    Data,
}

impl HostOrder {
    /// `(a, b)` of the permutation, or `None` in source order. `a` is a prime above 2^31,
    /// hence coprime with every n below it.
    pub fn affine(self) -> Option<(u64, u64)> {
        const PRIMES: [u64; 5] = [2147483659, 2654435761, 3221225473, 4294967291, 4294967311];
        match self {
            HostOrder::Sequential => None,
            HostOrder::Shuffled { seed } => {
                Some((PRIMES[(seed % PRIMES.len() as u64) as usize], seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1))
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// `BARO_DUMP=dir`: write every stage (`.ir .ll .s .hsaco .ptx`) of every kernel there.
    pub dump_dir: Option<PathBuf>,
    /// `BARO_CACHE_DIR=dir` (default `$XDG_CACHE_HOME/baro` or `~/.cache/baro`): compiled
    /// kernels of every target (host objects, PTX, code objects); `BARO_CACHE=off` disables it.
    pub cache_dir: Option<PathBuf>,
    /// `BARO_AMDGPU_COV=4|5` (default 5).
    pub amdgpu_code_object: CodeObjectVersion,
    /// `BARO_LD_LLD=path` (default: `ld.lld-19`, then `ld.lld` on PATH).
    pub ld_lld: Option<PathBuf>,
    /// `BARO_LANE_UNROLL=1..=32` (default 8): iterations of a lane region's strided loop
    /// unrolled together on NVPTX (1: not unrolled). Never changes what is computed.
    pub lane_unroll: u32,
    /// `BARO_SEQ_UNROLL=1..=64` (default 8): outside lane regions, iterations of an innermost
    /// sequential loop with affine accesses unrolled together on NVPTX, divided by the
    /// accumulators one iteration advances (a `seq` reduction over R rows: R). Never changes
    /// what is computed.
    pub seq_unroll: u32,
    /// `BARO_LOOP_VERSIONING=on|off` (default on): emit the unchecked copy of innermost loops
    /// whose affine accesses are proven in range (`lower::gpu::version`). Never changes what
    /// is computed; off is for measuring it.
    pub loop_versioning: bool,
    /// `BARO_HOST_ORDER=sequential|shuffled|shuffled:SEED` (default sequential; `shuffled` is
    /// seed 1): the order the host runtime runs `par` iterations and workgroups in. Changes
    /// the host code, never a race-free kernel's bytes.
    pub host_order: HostOrder,
    /// `BARO_GRAPH_ORDER=chain|data` (default chain): how a CUDA launch graph orders its
    /// kernels (`GraphOrder`). Read here with the other variables; it changes no compiled code.
    pub graph_order: GraphOrder,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {var}={found}: expected {expected}")]
pub struct OptionsError {
    pub var: &'static str,
    pub found: String,
    pub expected: &'static str,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            dump_dir: None,
            cache_dir: None,
            amdgpu_code_object: CodeObjectVersion::V5,
            ld_lld: None,
            lane_unroll: 8,
            seq_unroll: 8,
            loop_versioning: true,
            host_order: HostOrder::Sequential,
            graph_order: GraphOrder::Chain,
        }
    }
}

impl CompileOptions {
    /// Reads `BARO_*` variables; an unparsable value is an error, never silently ignored.
    pub fn from_env() -> Result<CompileOptions, OptionsError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like `from_env`, with the environment given as a function (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<CompileOptions, OptionsError> {
        let mut o = CompileOptions {
            dump_dir: get("BARO_DUMP").filter(|s| !s.is_empty()).map(PathBuf::from),
            ..Default::default()
        };
        o.cache_dir = match get("BARO_CACHE").as_deref() {
            Some("off") | Some("0") => None,
            Some("on") | Some("1") | None | Some("") => get("BARO_CACHE_DIR")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .or_else(|| get("XDG_CACHE_HOME").filter(|s| !s.is_empty()).map(|d| PathBuf::from(d).join("baro")))
                .or_else(|| get("HOME").map(|h| PathBuf::from(h).join(".cache").join("baro"))),
            Some(other) => return Err(OptionsError { var: "BARO_CACHE", found: other.into(), expected: "on or off" }),
        };
        o.amdgpu_code_object = match get("BARO_AMDGPU_COV").as_deref() {
            None | Some("") | Some("5") => CodeObjectVersion::V5,
            Some("4") => CodeObjectVersion::V4,
            Some(other) => {
                return Err(OptionsError { var: "BARO_AMDGPU_COV", found: other.into(), expected: "4 or 5" })
            }
        };
        o.ld_lld = get("BARO_LD_LLD").filter(|s| !s.is_empty()).map(PathBuf::from);
        if let Some(v) = get("BARO_LANE_UNROLL").filter(|s| !s.is_empty()) {
            o.lane_unroll = match v.parse::<u32>() {
                Ok(n @ 1..=32) => n,
                _ => {
                    return Err(OptionsError { var: "BARO_LANE_UNROLL", found: v, expected: "an integer from 1 to 32" })
                }
            };
        }
        if let Some(v) = get("BARO_SEQ_UNROLL").filter(|s| !s.is_empty()) {
            o.seq_unroll = match v.parse::<u32>() {
                Ok(n @ 1..=64) => n,
                _ => {
                    return Err(OptionsError { var: "BARO_SEQ_UNROLL", found: v, expected: "an integer from 1 to 64" })
                }
            };
        }
        o.loop_versioning = match get("BARO_LOOP_VERSIONING").as_deref() {
            None | Some("") | Some("on") | Some("1") => true,
            Some("off") | Some("0") => false,
            Some(other) => {
                return Err(OptionsError { var: "BARO_LOOP_VERSIONING", found: other.into(), expected: "on or off" })
            }
        };
        o.host_order = match get("BARO_HOST_ORDER").as_deref() {
            None | Some("") | Some("sequential") => HostOrder::Sequential,
            Some("shuffled") => HostOrder::Shuffled { seed: 1 },
            Some(other) => match other.strip_prefix("shuffled:").and_then(|n| n.parse::<u64>().ok()) {
                Some(seed) => HostOrder::Shuffled { seed },
                None => {
                    return Err(OptionsError {
                        var: "BARO_HOST_ORDER",
                        found: other.into(),
                        expected: "sequential, shuffled or shuffled:SEED",
                    })
                }
            },
        };
        o.graph_order = match get("BARO_GRAPH_ORDER").as_deref() {
            None | Some("") | Some("chain") => GraphOrder::Chain,
            Some("data") => GraphOrder::Data,
            Some(other) => {
                return Err(OptionsError { var: "BARO_GRAPH_ORDER", found: other.into(), expected: "chain or data" })
            }
        };
        Ok(o)
    }

    /// The options that can change compiled bytes, as bytes for the cache key.
    pub fn key_bytes(&self) -> Vec<u8> {
        let cov = match self.amdgpu_code_object {
            CodeObjectVersion::V4 => 4u8,
            CodeObjectVersion::V5 => 5u8,
        };
        let mut key = vec![cov, self.lane_unroll as u8, self.loop_versioning as u8];
        // Appended only when not the default, so the keys of every other kernel stay as they were.
        if self.seq_unroll != 8 {
            key.extend([2, self.seq_unroll as u8]);
        }
        if let HostOrder::Shuffled { seed } = self.host_order {
            key.push(1);
            key.extend(seed.to_le_bytes());
        }
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn reads_the_environment_once_and_typed() {
        let o = CompileOptions::from_lookup(env(&[("BARO_DUMP", "/tmp/d"), ("HOME", "/h"), ("BARO_AMDGPU_COV", "4")]))
            .unwrap();
        assert_eq!(o.dump_dir, Some(PathBuf::from("/tmp/d")));
        assert_eq!(o.cache_dir, Some(PathBuf::from("/h/.cache/baro")));
        assert_eq!(o.amdgpu_code_object, CodeObjectVersion::V4);
        let off = CompileOptions::from_lookup(env(&[("BARO_CACHE", "off"), ("HOME", "/h")])).unwrap();
        assert_eq!(off.cache_dir, None);
    }

    #[test]
    fn bad_values_are_errors() {
        let e = CompileOptions::from_lookup(env(&[("BARO_AMDGPU_COV", "6")])).unwrap_err();
        assert_eq!(e.to_string(), "environment variable BARO_AMDGPU_COV=6: expected 4 or 5");
        let e = CompileOptions::from_lookup(env(&[("BARO_LANE_UNROLL", "0")])).unwrap_err();
        assert_eq!(e.to_string(), "environment variable BARO_LANE_UNROLL=0: expected an integer from 1 to 32");
        let e = CompileOptions::from_lookup(env(&[("BARO_SEQ_UNROLL", "65")])).unwrap_err();
        assert_eq!(e.to_string(), "environment variable BARO_SEQ_UNROLL=65: expected an integer from 1 to 64");
        let seq = CompileOptions::from_lookup(env(&[("BARO_SEQ_UNROLL", "32")])).unwrap();
        assert_eq!(seq.seq_unroll, 32);
        assert_ne!(seq.key_bytes(), CompileOptions::default().key_bytes(), "the unroll is part of the cache key");
        let e = CompileOptions::from_lookup(env(&[("BARO_LOOP_VERSIONING", "maybe")])).unwrap_err();
        assert_eq!(e.to_string(), "environment variable BARO_LOOP_VERSIONING=maybe: expected on or off");
        let e = CompileOptions::from_lookup(env(&[("BARO_GRAPH_ORDER", "dag")])).unwrap_err();
        assert_eq!(e.to_string(), "environment variable BARO_GRAPH_ORDER=dag: expected chain or data");
    }

    #[test]
    fn the_graph_order_is_read_and_changes_no_cache_key() {
        assert_eq!(CompileOptions::default().graph_order, GraphOrder::Chain);
        let data = CompileOptions::from_lookup(env(&[("BARO_GRAPH_ORDER", "data")])).unwrap();
        assert_eq!(data.graph_order, GraphOrder::Data);
        let chain = CompileOptions::from_lookup(env(&[("BARO_GRAPH_ORDER", "chain")])).unwrap();
        assert_eq!(chain.graph_order, GraphOrder::Chain);
        assert_eq!(data.key_bytes(), CompileOptions::default().key_bytes(), "no compiled byte depends on it");
    }

    #[test]
    fn code_shaping_options_are_in_the_cache_key() {
        let base = CompileOptions::default();
        let unroll = CompileOptions::from_lookup(env(&[("BARO_LANE_UNROLL", "2")])).unwrap();
        let plain = CompileOptions::from_lookup(env(&[("BARO_LOOP_VERSIONING", "off")])).unwrap();
        assert_eq!((unroll.lane_unroll, plain.loop_versioning), (2, false));
        assert_ne!(base.key_bytes(), unroll.key_bytes());
        assert_ne!(base.key_bytes(), plain.key_bytes());
        let shuffled = CompileOptions::from_lookup(env(&[("BARO_HOST_ORDER", "shuffled:7")])).unwrap();
        assert_eq!(shuffled.host_order, HostOrder::Shuffled { seed: 7 });
        assert_ne!(base.key_bytes(), shuffled.key_bytes());
        let e = CompileOptions::from_lookup(env(&[("BARO_HOST_ORDER", "random")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment variable BARO_HOST_ORDER=random: expected sequential, shuffled or shuffled:SEED"
        );
    }
}
