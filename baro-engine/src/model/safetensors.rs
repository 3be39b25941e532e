//! Hugging Face checkpoints: a folder with `config.json` and one `model.safetensors` or several
//! shards named by `model.safetensors.index.json`. Every shard is memory-mapped and its header
//! checked by the `safetensors` crate; tensors are borrowed from the maps. Names are normalised
//! to the text model's: `model.language_model.X` becomes `model.X`; MTP (`mtp.*`) and vision
//! (`model.visual.*`, `visual.*`) tensors are skipped. Element types F32, F16 and BF16.
//! Never copies a tensor and never panics on file contents.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};

use crate::model::config::{ConfigError, ModelConfig};
use crate::model::source::Bytes;
use crate::model::tensor::{TensorType, TensorView};

/// What went wrong reading an HF checkpoint: the checkpoint's fault except `Io`.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    #[error("cannot read {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("bad safetensors file {path}: {message}")]
    Header { path: PathBuf, message: String },
    #[error("bad {path}: {message}")]
    Index { path: PathBuf, message: String },
    #[error("unsupported dtype for tensor {tensor:?} in {path}: {found}; supported: F32, F16, BF16")]
    Dtype { path: PathBuf, tensor: String, found: String },
    #[error("tensor {tensor:?} appears twice (in {first} and {second})")]
    Duplicate { tensor: String, first: PathBuf, second: PathBuf },
    #[error(transparent)]
    Config(#[from] ConfigError),
}

struct Entry {
    shard: usize,
    ty: TensorType,
    shape: Vec<usize>,
    /// Absolute byte range in the shard.
    start: usize,
    end: usize,
}

/// A loaded checkpoint: config plus memory-mapped shards.
pub struct HfCheckpoint {
    pub config: ModelConfig,
    shards: Vec<(PathBuf, Bytes)>,
    tensors: BTreeMap<String, Entry>,
}

/// `model.language_model.X` → `model.X`; `None` for tensors the text model ignores.
pub fn normalise_name(name: &str) -> Option<String> {
    if name.starts_with("mtp.")
        || name.starts_with("model.visual.")
        || name.starts_with("visual.")
        || name.starts_with("model.mtp.")
    {
        return None;
    }
    Some(match name.strip_prefix("model.language_model.") {
        Some(rest) => format!("model.{rest}"),
        None => name.to_string(),
    })
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> HfError + '_ {
    move |e| HfError::Io { path: path.to_path_buf(), message: e.to_string() }
}

impl HfCheckpoint {
    /// Opens a checkpoint folder.
    pub fn open(dir: &Path) -> Result<HfCheckpoint, HfError> {
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(io(&config_path))?;
        let config = ModelConfig::from_hf_json(&text)?;
        let index_path = dir.join("model.safetensors.index.json");
        let files: Vec<PathBuf> = if index_path.exists() {
            let text = std::fs::read_to_string(&index_path).map_err(io(&index_path))?;
            let index: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| HfError::Index { path: index_path.clone(), message: e.to_string() })?;
            let map = index.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| HfError::Index {
                path: index_path.clone(),
                message: "expected an object \"weight_map\", found none".into(),
            })?;
            let mut names: Vec<String> = Vec::new();
            for (tensor, file) in map {
                let file = file.as_str().ok_or_else(|| HfError::Index {
                    path: index_path.clone(),
                    message: format!("weight_map[{tensor:?}]: expected a file name, found {file}"),
                })?;
                if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                    return Err(HfError::Index {
                        path: index_path.clone(),
                        message: format!("weight_map[{tensor:?}]: expected a file name in the folder, found {file:?}"),
                    });
                }
                if !names.iter().any(|n| n == file) {
                    names.push(file.to_string());
                }
            }
            names.sort();
            names.into_iter().map(|n| dir.join(n)).collect()
        } else {
            vec![dir.join("model.safetensors")]
        };
        let shards =
            files.into_iter().map(|p| Bytes::map(&p).map_err(io(&p)).map(|b| (p, b))).collect::<Result<Vec<_>, _>>()?;
        HfCheckpoint::from_shards(config, shards)
    }

    /// Builds a checkpoint from shards already in memory (tests).
    pub fn from_parts(config: ModelConfig, shards: Vec<(PathBuf, Vec<u8>)>) -> Result<HfCheckpoint, HfError> {
        HfCheckpoint::from_shards(config, shards.into_iter().map(|(p, b)| (p, Bytes::Owned(b))).collect())
    }

    fn from_shards(config: ModelConfig, shards: Vec<(PathBuf, Bytes)>) -> Result<HfCheckpoint, HfError> {
        let mut tensors: BTreeMap<String, Entry> = BTreeMap::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, (path, bytes)) in shards.iter().enumerate() {
            let (header_len, meta) = SafeTensors::read_metadata(bytes)
                .map_err(|e| HfError::Header { path: path.clone(), message: format!("{e:?}") })?;
            let data_start = 8 + header_len;
            for (name, info) in meta.tensors() {
                let Some(norm) = normalise_name(&name) else { continue };
                let ty = match info.dtype {
                    Dtype::F32 => TensorType::F32,
                    Dtype::F16 => TensorType::F16,
                    Dtype::BF16 => TensorType::BF16,
                    other => {
                        return Err(HfError::Dtype { path: path.clone(), tensor: name, found: format!("{other:?}") })
                    }
                };
                // read_metadata checked that the offsets tile the data area exactly.
                let (start, end) = (data_start + info.data_offsets.0, data_start + info.data_offsets.1);
                if end > bytes.len() || ty.bytes_for(&info.shape) != Some(end - start) {
                    return Err(HfError::Header {
                        path: path.clone(),
                        message: format!(
                            "tensor {name:?}: byte range {start}..{end} does not hold shape {:?} of {ty}",
                            info.shape
                        ),
                    });
                }
                if let Some(&first) = seen.get(&norm) {
                    return Err(HfError::Duplicate {
                        tensor: norm,
                        first: shards[first].0.clone(),
                        second: path.clone(),
                    });
                }
                seen.insert(norm.clone(), i);
                tensors.insert(norm, Entry { shard: i, ty, shape: info.shape.clone(), start, end });
            }
        }
        Ok(HfCheckpoint { config, shards, tensors })
    }

    /// Normalised names of every tensor the text model uses, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// A tensor by normalised name, borrowed from its shard.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        let e = self.tensors.get(name)?;
        Some(TensorView { ty: e.ty, shape: &e.shape, bytes: &self.shards[e.shard].1[e.start..e.end] })
    }
}
