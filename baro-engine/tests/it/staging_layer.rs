//! The staging runtime pieces on their own: the pinned store holds each layer's experts as
//! the file has them; whole-layer staging into two sets on a copy stream, ordered by events,
//! delivers every layer byte-equal to the store with the layer's shapes; decode slots hold
//! exactly the experts the cache says, evicting least recently used first. F32 safetensors
//! and a Q8_0 GGUF (raw blocks). Runs on the host, or with `BARO_TEST_DEVICE=cuda` on a GPU.

use crate::common;

use baro_dsl::runtime::Device;
use baro_engine::engine::staging::{DecodeSlots, ExpertStore, LayerStaging};
use baro_engine::engine::weights::{expert_shapes, host_experts};
use baro_engine::engine::{ModelSource, WeightError};
use baro_engine::model::{GgufFile, HfCheckpoint, TensorType};
use common::{canonical_f32, dev, fixture, gguf_from, pick_type};

/// The tiny fixture as a Q8_0 GGUF (matrices whose rows are whole blocks; F32 otherwise).
fn q8_source() -> ModelSource {
    let ck = HfCheckpoint::open(&fixture("tiny")).unwrap();
    let bytes = gguf_from(&ck.config, &canonical_f32(&ck), &|shape| pick_type(TensorType::Q8_0, shape));
    ModelSource::Gguf(GgufFile::from_vec(bytes).unwrap())
}

fn part_bytes(d: &Device, m: &baro_engine::engine::Matrix, len: usize) -> Vec<u8> {
    d.read_bytes(&m.buf).unwrap()[..len].to_vec()
}

fn check_store_and_staging(source: &ModelSource) -> Result<(), WeightError> {
    let d = dev();
    let cfg = source.config()?;
    let store = ExpertStore::load(&d, source, &cfg)?;
    let shapes = expert_shapes(source, &cfg)?;
    assert_eq!(store.n_layers(), cfg.n_layers);
    let mut total = 0;
    for (l, layer_shapes) in shapes.iter().enumerate() {
        let host = host_experts(source, &cfg, l)?;
        let pinned = store.pinned(l).as_slice().unwrap();
        for ((part, h), shape) in store.parts(l).iter().zip(&host).zip(layer_shapes) {
            assert_eq!(
                (part.shape, h.shape),
                (*shape, *shape),
                "layer {l}: the directory's shapes are the loaded ones"
            );
            assert_eq!(&pinned[part.offset..part.offset + h.bytes.len()], &h.bytes[..], "layer {l}: store bytes");
            total += h.bytes.len() as u64;
        }
    }
    assert_eq!(store.bytes(), total);

    let mut staging = LayerStaging::new(&d, &store).unwrap();
    let compute = d.new_stream().unwrap();
    staging.stage(&d, &store, 0, 0).unwrap();
    for l in 0..cfg.n_layers {
        let set = l % 2;
        if l + 1 < cfg.n_layers {
            staging.stage(&d, &store, l + 1, 1 - set).unwrap();
        }
        assert_eq!(staging.layer_in(set), Some(l));
        let experts = staging.wait(&compute, set).unwrap();
        compute.synchronize().unwrap();
        let host = host_experts(source, &cfg, l)?;
        for (m, h) in experts.parts().into_iter().zip(&host) {
            assert_eq!(
                (m.ty, m.n_mats, m.rows, m.cols),
                (h.shape.ty, h.shape.n_mats, h.shape.rows, h.shape.cols),
                "layer {l}: staged shape"
            );
            assert_eq!(part_bytes(&d, m, h.bytes.len()), h.bytes.to_vec(), "layer {l}: staged bytes");
        }
        staging.release(&compute, set).unwrap();
    }
    staging.copy_stream().synchronize().unwrap();
    assert_eq!(staging.copied_bytes(), total);
    assert!(staging.wait(&compute, 2).is_err());
    assert!(staging
        .stage(&d, &store, cfg.n_layers, 0)
        .unwrap_err()
        .to_string()
        .contains(&format!("expected a layer below {}", cfg.n_layers)));
    Ok(())
}

#[test]
fn f32_layers_stage_byte_equal_through_both_sets() {
    check_store_and_staging(&ModelSource::Hf(HfCheckpoint::open(&fixture("tiny")).unwrap())).unwrap();
}

#[test]
fn q8_0_layers_stage_byte_equal_through_both_sets() {
    check_store_and_staging(&q8_source()).unwrap();
}

#[test]
fn a_set_never_staged_is_an_error() {
    let d = dev();
    let source = q8_source();
    let cfg = source.config().unwrap();
    let store = ExpertStore::load(&d, &source, &cfg).unwrap();
    let staging = LayerStaging::new(&d, &store).unwrap();
    assert_eq!(
        staging.wait(d.default_stream(), 1).err().expect("an error").to_string(),
        "layer staging: expected set 1 staged before use, found a set never staged"
    );
    let one_layer: u64 = store.parts(0).iter().map(|p| p.shape.bytes() as u64).sum();
    assert_eq!(staging.device_bytes(), 2 * one_layer, "all layers of the fixture have one size");
}

#[test]
fn decode_slots_hold_the_experts_the_cache_names() {
    let d = dev();
    let source = q8_source();
    let cfg = source.config().unwrap();
    let store = ExpertStore::load(&d, &source, &cfg).unwrap();
    let mut slots = DecodeSlots::new(&d, store, 3, cfg.n_experts_used).unwrap();
    let mut ids = d.alloc(baro_dsl::ScalarType::U32, 2).unwrap();
    let layer = 2;
    let host = host_experts(&source, &cfg, layer).unwrap();
    for token in [[1u32, 6], [6, 0], [3, 1], [3, 6]] {
        d.write(&mut ids, &token).unwrap();
        let (experts, slot_ids) = slots.map(&d, d.default_stream(), layer, &ids).unwrap();
        d.default_stream().synchronize().unwrap();
        let slot_of: Vec<u32> = d.read(slot_ids).unwrap();
        for (&e, &slot) in token.iter().zip(&slot_of) {
            for (m, h) in experts.parts().into_iter().zip(&host) {
                let len = h.shape.mat_bytes();
                let got = d.read_bytes(&m.buf).unwrap()[slot as usize * len..(slot as usize + 1) * len].to_vec();
                assert_eq!(
                    got,
                    h.bytes[e as usize * len..(e as usize + 1) * len].to_vec(),
                    "expert {e} in slot {slot}"
                );
            }
        }
    }
    // [1, 6] fill slots 0, 1; [6, 0]: 6 hits, 0 fills slot 2; [3, 1]: 1 hits, 3 evicts 6
    // (slots 1 and 2 were both last used by the second token: the lower wins); [3, 6]: 3
    // hits, 6 evicts 0 from slot 2.
    let s = slots.layer_stats()[layer];
    assert_eq!((s.lookups, s.hits, s.misses, s.evictions), (8, 3, 5, 2));
    let len: usize = host.iter().map(|h| h.shape.mat_bytes()).sum();
    assert_eq!(slots.copied_bytes(), 5 * len as u64);
    assert_eq!(
        slots.layer_stats().iter().enumerate().filter(|(l, _)| *l != layer).map(|(_, s)| s.lookups).sum::<u64>(),
        0
    );
}
