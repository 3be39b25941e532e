//! Streams (ordered queues of device work) and events (points in a stream, for timing and
//! for ordering one stream after another), over their backend's own (`Backend::Stream`,
//! `Backend::Event`). On the host every call runs to completion before returning, so a host
//! stream is empty, a host event is a wall-clock instant and waiting on one is already
//! satisfied. While `Device::replay` records a stream's launches, every other operation on
//! it (a copy, a read or write, an event, a synchronisation) is refused
//! (`DeviceError::Recording`), never reordered around the recorded launches.

use std::sync::{Arc, Mutex};

use super::backend::{AnyHandle, DynBackend};
use super::device::DeviceError;
use super::graph::{Node, Recording, RecordingGuard};

/// An ordered queue of device work.
pub struct Stream {
    backend: Arc<dyn DynBackend>,
    /// The backend's stream.
    pub(crate) queue: AnyHandle,
    /// `Some` while `Device::replay`'s closure runs: launches are recorded here, not queued.
    pub(crate) recording: Recording,
}

impl Stream {
    pub(crate) fn new(backend: Arc<dyn DynBackend>, queue: AnyHandle) -> Stream {
        Stream { backend, queue, recording: Mutex::new(None) }
    }

    /// `op` may not be queued on this stream while it records launches.
    pub(crate) fn refuse_while_recording(&self, op: &'static str) -> Result<(), DeviceError> {
        if self.recording.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            return Err(DeviceError::Recording { op });
        }
        Ok(())
    }

    /// Starts recording this stream's launches; the guard ends it.
    pub(crate) fn begin_recording(&self) -> Result<RecordingGuard<'_>, DeviceError> {
        let mut r = self.recording.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_some() {
            return Err(DeviceError::Recording { op: "a nested `Device::replay`" });
        }
        *r = Some(Vec::new());
        Ok(RecordingGuard { recording: &self.recording })
    }

    /// While recording: `record()`'s node is appended and `Ok(true)` returned; otherwise
    /// `Ok(false)` and nothing is called.
    pub(crate) fn record_if_recording(
        &self,
        record: impl FnOnce() -> Result<Node, DeviceError>,
    ) -> Result<bool, DeviceError> {
        let mut r = self.recording.lock().unwrap_or_else(|e| e.into_inner());
        match r.as_mut() {
            Some(nodes) => {
                nodes.push(record()?);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Waits for all queued work, then reports the first failed bounds check of any kernel
    /// launched on this stream since the last synchronisation (replayed graphs included).
    pub fn synchronize(&self) -> Result<(), DeviceError> {
        self.refuse_while_recording("a stream synchronisation")?;
        self.backend.synchronize(&self.queue)
    }

    /// Makes work queued on this stream from now on wait until `event` (as last recorded on
    /// any stream of the same device) has completed; the host thread does not wait. An event
    /// never recorded is already complete. On the host: nothing to wait for.
    pub fn wait_event(&self, event: &Event) -> Result<(), DeviceError> {
        self.refuse_while_recording("an event wait")?;
        self.backend.wait_event(&self.queue, &event.event)
    }
}

pub struct Event {
    pub(crate) backend: Arc<dyn DynBackend>,
    /// The backend's event.
    pub(crate) event: AnyHandle,
}

impl Event {
    /// Marks the point after all work queued on `stream` so far.
    pub fn record(&self, stream: &Stream) -> Result<(), DeviceError> {
        stream.refuse_while_recording("an event record")?;
        self.backend.record_event(&self.event, &stream.queue)
    }

    /// Milliseconds from this event to `end` (both recorded); waits for `end`.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, DeviceError> {
        self.backend.elapsed_ms(&self.event, &end.event)
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({})", self.queue.kind())
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Event")
    }
}
