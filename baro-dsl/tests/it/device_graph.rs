//! Launch graphs (`Device::replay`) on the host device: a recorded-and-replayed sequence of
//! launches equals the same launches made directly, byte for byte, through the first replay
//! (built), a replay with new buffer contents, a changed scalar and a changed buffer (updated
//! in place) and an added launch (rebuilt); a failed bounds check inside a replay is reported
//! with the kernel's name; anything but a launch while recording is refused. The checks are
//! written once over a `Device` (`replay_matches_direct_launches`, `replay_reports_bounds_errors`)
//! so that `device_cuda` runs them on a GPU too.

use baro_dsl::runtime::{Buffer, Device, DeviceArg as A, DeviceError, LaunchGraph, Replay};
use baro_dsl::{testkernels, ScalarType};

const K: usize = 67;
const M: usize = 5;

/// One set of the sequence's buffers: y = W1 x (k of the K columns), z = W2 y, u = W3 z,
/// and a second output `y2` the sequence can write instead of `y`.
struct Set {
    w1: Buffer, // (M, K)
    w2: Buffer, // (M, M)
    w3: Buffer, // (M, M)
    x: Buffer,  // (K)
    y: Buffer,  // (M)
    y2: Buffer, // (M)
    z: Buffer,  // (M)
    u: Buffer,  // (M)
}

fn data(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 + seed) * 0.37).sin()).collect()
}

impl Set {
    fn new(d: &Device) -> Set {
        let f = |n| d.alloc(ScalarType::F32, n).unwrap();
        Set {
            w1: d.upload(&data(M * K, 1.0)).unwrap(),
            w2: d.upload(&data(M * M, 2.0)).unwrap(),
            w3: d.upload(&data(M * M, 3.0)).unwrap(),
            x: d.upload(&data(K, 4.0)).unwrap(),
            y: f(M),
            y2: f(M),
            z: f(M),
            u: f(M),
        }
    }

    fn outputs(&self, d: &Device) -> Vec<Vec<u8>> {
        [&self.y, &self.y2, &self.z, &self.u].iter().map(|b| d.read_bytes(b).unwrap()).collect()
    }
}

/// The sequence's shape for one step.
#[derive(Clone, Copy)]
struct Shape {
    /// Columns of W1 (and elements of x) the first matvec reads.
    k: usize,
    /// Write `y2` instead of `y`.
    other_y: bool,
    /// Add the third matvec.
    third: bool,
}

/// Queues the sequence on the default stream (recorded when `replay` records it).
fn launch(d: &Device, s: &mut Set, shape: Shape) -> Result<(), DeviceError> {
    let mv = d.compile(&testkernels::matvec()).unwrap(); // (w, x, y, k, m)
    let st = d.default_stream();
    let Set { w1, w2, w3, x, y, y2, z, u } = s;
    let y = if shape.other_y { y2 } else { y };
    d.launch(st, &mv, &mut [A::buf(w1), A::buf(x), A::buf_mut(y), shape.k.into(), M.into()])?;
    d.launch(st, &mv, &mut [A::buf(w2), A::buf(y), A::buf_mut(z), M.into(), M.into()])?;
    if shape.third {
        d.launch(st, &mv, &mut [A::buf(w3), A::buf(z), A::buf_mut(u), M.into(), M.into()])?;
    }
    Ok(())
}

/// Each step replayed through one graph equals the same launches made directly on a second
/// set of buffers, and each replay takes the expected path.
pub(crate) fn replay_matches_direct_launches(d: &Device) {
    let (mut graphed, mut direct) = (Set::new(d), Set::new(d));
    let mut graph = LaunchGraph::new();
    let base = Shape { k: K, other_y: false, third: false };
    let steps: [(&str, Shape, Option<Vec<f32>>, Replay); 6] = [
        ("first replay", base, None, Replay::Built { nodes: 2 }),
        ("new contents of x", base, Some(data(K, 9.0)), Replay::Updated { nodes: 2, changed: 0 }),
        ("a scalar changed", Shape { k: K - 5, ..base }, None, Replay::Updated { nodes: 2, changed: 1 }),
        (
            "a buffer changed",
            Shape { other_y: true, ..base },
            Some(data(K, 5.0)),
            Replay::Updated { nodes: 2, changed: 2 },
        ),
        ("a launch added", Shape { third: true, ..base }, None, Replay::Built { nodes: 3 }),
        ("the same again", Shape { third: true, ..base }, Some(data(K, 6.0)), Replay::Updated { nodes: 3, changed: 0 }),
    ];
    for (what, shape, x, path) in steps {
        if let Some(x) = x {
            d.write(&mut graphed.x, &x).unwrap();
            d.write(&mut direct.x, &x).unwrap();
        }
        // SAFETY: every buffer the closure launches with lives in `graphed`, which outlives
        // the call and is touched by nothing else meanwhile.
        let ((), replay) =
            unsafe { d.replay(d.default_stream(), &mut graph, || launch(d, &mut graphed, shape)) }.unwrap();
        assert_eq!(replay, path, "{what}");
        launch(d, &mut direct, shape).unwrap();
        d.default_stream().synchronize().unwrap();
        let (got, want) = (graphed.outputs(d), direct.outputs(d));
        assert_eq!(got, want, "{what}: replayed and direct launches differ");
        assert!(got[2].iter().any(|&b| b != 0), "{what}: the sequence wrote nothing");
    }
    let stats = graph.stats();
    assert_eq!((stats.replays, stats.builds, stats.updated_nodes, graph.node_count()), (6, 2, 3, 3));
}

/// A failed bounds check in a replayed node is reported with its kernel's name (on the host
/// by `replay`, on a GPU by the next synchronisation); the next replay runs clean.
pub(crate) fn replay_reports_bounds_errors(d: &Device) {
    let mv = d.compile(&testkernels::matvec()).unwrap();
    let mut s = Set::new(d);
    let mut graph = LaunchGraph::new();
    let mut step = |outputs: usize| {
        let Set { w1, w2, x, y, z, .. } = &mut s;
        // SAFETY: the buffers live in `s`, which outlives the call.
        let r = unsafe {
            d.replay(d.default_stream(), &mut graph, || {
                d.launch(d.default_stream(), &mv, &mut [A::buf(w1), A::buf(x), A::buf_mut(y), K.into(), M.into()])?;
                d.launch(d.default_stream(), &mv, &mut [A::buf(w2), A::buf(y), A::buf_mut(z), M.into(), outputs.into()])
            })
        };
        r.and_then(|_| d.default_stream().synchronize())
    };
    let e = step(M + 1).unwrap_err();
    // The second node's extra output row reads past W2 before it writes past z.
    assert_eq!(e.to_string(), format!("kernel `matvec` read `w[{0}]` but `w` has {0} elements", M * M));
    step(M).unwrap();
    step(M).unwrap();
}

fn host() -> Device {
    Device::host().expect("host device")
}

#[test]
fn replayed_launches_equal_direct_ones_through_updates_and_rebuilds() {
    replay_matches_direct_launches(&host());
}

#[test]
fn a_bounds_error_inside_a_replay_names_the_kernel() {
    replay_reports_bounds_errors(&host());
}

/// Every non-launch operation on the recording stream is refused with a clear message, the
/// failed recording replays nothing, and the stream records no more afterwards.
#[test]
fn anything_but_a_launch_while_recording_is_refused() {
    let d = host();
    let mv = d.compile(&testkernels::matvec()).unwrap();
    let mut s = Set::new(&d);
    let mut other = d.alloc(ScalarType::F32, M).unwrap();
    let pinned = d.alloc_pinned(4).unwrap();
    let event = d.new_event().unwrap();
    let mut graph = LaunchGraph::new();
    let st = d.default_stream();
    type Op<'a> = Box<dyn Fn(&Device, &mut Buffer, &Buffer) -> Result<(), DeviceError> + 'a>;
    let ops: Vec<(&str, Op)> = vec![
        ("a buffer read", Box::new(|d, _, y| d.read_bytes(y).map(drop))),
        ("a buffer write", Box::new(|d, o, _| d.write(o, &[0.0f32; M]))),
        ("a device-to-device copy", Box::new(|d, o, y| d.copy(d.default_stream(), y, o))),
        ("a copy from pinned memory", Box::new(|d, o, _| d.copy_from_pinned(d.default_stream(), &pinned, 0, o, 0, 4))),
        ("a stream synchronisation", Box::new(|d, _, _| d.default_stream().synchronize())),
        ("an event record", Box::new(|d, _, _| event.record(d.default_stream()))),
        ("an event wait", Box::new(|d, _, _| d.default_stream().wait_event(&event))),
        (
            "a nested `Device::replay`",
            Box::new(|d, _, _| {
                unsafe { d.replay(d.default_stream(), &mut LaunchGraph::new(), || Ok::<(), DeviceError>(())) }.map(drop)
            }),
        ),
    ];
    for (op, f) in &ops {
        let Set { w1, x, y, .. } = &mut s;
        // SAFETY: the buffers live in `s` and `other`, which outlive the call.
        let e = unsafe {
            d.replay(st, &mut graph, || {
                d.launch(st, &mv, &mut [A::buf(w1), A::buf(x), A::buf_mut(y), K.into(), M.into()])?;
                f(&d, &mut other, y)
            })
        }
        .unwrap_err();
        assert_eq!(e.to_string(), format!("{op} while the stream records launches for `Device::replay`: expected only kernel launches until its closure returns"));
        assert_eq!(d.read::<f32>(&s.y).unwrap(), vec![0.0; M], "{op}: a failed recording launched something");
    }
    assert_eq!(graph.stats().replays, 0);
    st.synchronize().unwrap();
}
