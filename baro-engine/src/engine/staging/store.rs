//! The pinned host expert store: every layer's routed experts in page-locked host memory,
//! one pinned buffer per layer laid out (part: gate and up fused | down, expert, row, col) in the
//! stored element types, so one expert's bytes of one matrix are contiguous and a whole
//! layer's part is one range. The store only queues copies out of itself (`Device::
//! copy_from_pinned`); it never launches a kernel and never decides what to copy.

use baro_dsl::runtime::{Device, DeviceError, PinnedBuffer, Stream};

use crate::engine::weights::{host_experts, ExpertMatrices, Matrix, MatrixShape, ModelSource, WeightError};
use crate::model::ModelConfig;

/// The matrices of an expert, in store and slot order: its fused gate and up (gate rows, then
/// up rows), its down.
pub const PARTS: [&str; 2] = ["gate_up", "down"];

/// One matrix stack of a stored layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredPart {
    pub shape: MatrixShape,
    /// Byte offset of expert 0 in the layer's pinned buffer.
    pub offset: usize,
}

impl StoredPart {
    /// Bytes `offset..offset + len` of the layer's buffer hold `expert`'s matrix.
    pub fn expert_range(&self, expert: usize) -> (usize, usize) {
        let len = self.shape.mat_bytes();
        (self.offset + expert * len, len)
    }
}

struct StoredLayer {
    pinned: PinnedBuffer, // (part, expert, row, col): stored element types, as bytes
    parts: [StoredPart; 2],
}

/// Every layer's routed experts in pinned host memory.
pub struct ExpertStore {
    layers: Vec<StoredLayer>,
}

impl ExpertStore {
    /// Reads every layer's experts from `source` (borrowed from a GGUF file, assembled from
    /// a checkpoint) into one pinned buffer per layer of `device`.
    pub fn load(device: &Device, source: &ModelSource, cfg: &ModelConfig) -> Result<ExpertStore, WeightError> {
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            let host = host_experts(source, cfg, i)?;
            let total: usize = host.iter().map(|m| m.bytes.len()).sum();
            let what = || format!("blk.{i} routed experts (pinned host store)");
            let dev_err = |e: DeviceError| WeightError::Device { name: what(), source: Box::new(e) };
            let mut pinned = device.alloc_pinned(total).map_err(dev_err)?;
            let dst = pinned.as_mut_slice().map_err(dev_err)?;
            let mut offset = 0;
            let mut parts = [StoredPart { shape: host[0].shape, offset: 0 }; 2];
            for (p, m) in parts.iter_mut().zip(&host) {
                if m.bytes.len() != m.shape.bytes() {
                    return Err(WeightError::Shape {
                        name: what(),
                        expected: vec![m.shape.n_mats, m.shape.rows, m.shape.cols],
                        found: vec![m.bytes.len()],
                    });
                }
                dst[offset..offset + m.bytes.len()].copy_from_slice(&m.bytes);
                *p = StoredPart { shape: m.shape, offset };
                offset += m.bytes.len();
            }
            layers.push(StoredLayer { pinned, parts });
        }
        Ok(ExpertStore { layers })
    }

    pub fn n_layers(&self) -> usize {
        self.layers.len()
    }

    /// Layer `layer`'s fused gate-and-up and down stacks. Panics on a layer index out of range
    /// (a bug).
    pub fn parts(&self, layer: usize) -> &[StoredPart; 2] {
        &self.layers[layer].parts
    }

    /// The pinned bytes of layer `layer`, as `parts` lays them out.
    pub fn pinned(&self, layer: usize) -> &PinnedBuffer {
        &self.layers[layer].pinned
    }

    /// Pinned bytes of every layer.
    pub fn bytes(&self) -> u64 {
        self.layers.iter().map(|l| l.pinned.len() as u64).sum()
    }

    /// Queues on `stream` the copies of `expert`'s gate-and-up and down matrices of `layer`
    /// into matrix `slot` of the two stacks of `dst` (whose rows and columns must be the layer's).
    /// Returns the bytes queued.
    pub fn copy_expert(
        &self,
        device: &Device,
        stream: &Stream,
        layer: usize,
        expert: usize,
        dst: &mut ExpertMatrices,
        slot: usize,
    ) -> Result<usize, DeviceError> {
        let l = &self.layers[layer];
        let mut bytes = 0;
        for (part, m) in l.parts.iter().zip(dst.parts_mut()) {
            expect_fits(part.shape, m, slot)?;
            if expert >= part.shape.n_mats {
                return Err(DeviceError::Mismatch {
                    what: "expert copy",
                    expected: format!("an expert below {}", part.shape.n_mats),
                    found: expert.to_string(),
                });
            }
            let (off, len) = part.expert_range(expert);
            device.copy_from_pinned(stream, &l.pinned, off, &mut m.buf, slot * len, len)?;
            bytes += len;
        }
        Ok(bytes)
    }

    /// Queues on `stream` the copies of all of `layer`'s experts into `dst`, whose stacks must
    /// hold at least the layer's bytes; sets `dst`'s shapes to the layer's. Returns the bytes
    /// queued.
    pub fn copy_layer(
        &self,
        device: &Device,
        stream: &Stream,
        layer: usize,
        dst: &mut ExpertMatrices,
    ) -> Result<usize, DeviceError> {
        let l = &self.layers[layer];
        let mut bytes = 0;
        for (part, m) in l.parts.iter().zip(dst.parts_mut()) {
            let len = part.shape.bytes();
            if len > m.buf.byte_len() {
                return Err(DeviceError::Mismatch {
                    what: "layer staging set",
                    expected: format!("at least {len} bytes for layer {layer}"),
                    found: format!("{} bytes", m.buf.byte_len()),
                });
            }
            device.copy_from_pinned(stream, &l.pinned, part.offset, &mut m.buf, 0, len)?;
            (m.ty, m.n_mats, m.rows, m.cols) = (part.shape.ty, part.shape.n_mats, part.shape.rows, part.shape.cols);
            bytes += len;
        }
        Ok(bytes)
    }
}

/// Slot `slot` of `m` can take one matrix of `shape`.
fn expect_fits(shape: MatrixShape, m: &Matrix, slot: usize) -> Result<(), DeviceError> {
    let want = (shape.ty, shape.rows, shape.cols);
    if (m.ty, m.rows, m.cols) != want {
        return Err(DeviceError::Mismatch {
            what: "expert slot",
            expected: format!("{want:?} matrices"),
            found: format!("{:?}", (m.ty, m.rows, m.cols)),
        });
    }
    if slot >= m.n_mats || (slot + 1) * shape.mat_bytes() > m.buf.byte_len() {
        return Err(DeviceError::Mismatch {
            what: "expert slot",
            expected: format!("a slot below {}", m.n_mats),
            found: slot.to_string(),
        });
    }
    Ok(())
}

impl ExpertMatrices {
    /// Gate and up (fused), down.
    pub fn parts(&self) -> [&Matrix; 2] {
        [&self.gate_up, &self.down]
    }
    pub fn parts_mut(&mut self) -> [&mut Matrix; 2] {
        [&mut self.gate_up, &mut self.down]
    }
}
