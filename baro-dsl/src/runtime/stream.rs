//! Streams (ordered queues of device work) and events (points in a stream, for timing and
//! for ordering one stream after another). On the host every call runs to completion before
//! returning, so a host stream is empty, a host event is a wall-clock instant and waiting on
//! one is already satisfied. While `Device::replay` records a stream's launches, every other
//! operation on it (a copy, a read or write, an event, a synchronisation) is refused
//! (`DeviceError::Recording`), never reordered around the recorded launches.

use std::sync::Mutex;
use std::time::Instant;

use super::device::DeviceError;
use super::graph::{Node, Recording, RecordingGuard};

/// An ordered queue of device work.
pub struct Stream {
    pub(crate) inner: StreamImpl,
    /// `Some` while `Device::replay`'s closure runs: launches are recorded here, not queued.
    pub(crate) recording: Recording,
}

pub(crate) enum StreamImpl {
    Host,
    #[cfg(feature = "cuda")]
    Cuda(super::cuda::CudaQueue),
    #[cfg(feature = "hip")]
    Hip(super::hip::HipQueue),
}

impl Stream {
    pub(crate) fn new(inner: StreamImpl) -> Stream {
        Stream { inner, recording: Mutex::new(None) }
    }

    pub(crate) fn host() -> Stream {
        Stream::new(StreamImpl::Host)
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
        match &self.inner {
            StreamImpl::Host => Ok(()),
            #[cfg(feature = "cuda")]
            StreamImpl::Cuda(q) => q.synchronize(),
            #[cfg(feature = "hip")]
            StreamImpl::Hip(q) => q.synchronize(),
        }
    }

    /// Makes work queued on this stream from now on wait until `event` (as last recorded on
    /// any stream of the same device) has completed; the host thread does not wait. An event
    /// never recorded is already complete. On the host: nothing to wait for.
    pub fn wait_event(&self, event: &Event) -> Result<(), DeviceError> {
        self.refuse_while_recording("an event wait")?;
        match (&self.inner, &event.inner) {
            (StreamImpl::Host, EventImpl::Host(_)) => Ok(()),
            #[cfg(feature = "cuda")]
            (StreamImpl::Cuda(q), EventImpl::Cuda(e)) => q.wait(e),
            #[cfg(feature = "hip")]
            (StreamImpl::Hip(q), EventImpl::Hip(e)) => q.wait(e),
            #[allow(unreachable_patterns)]
            _ => Err(DeviceError::Mismatch {
                what: "event",
                expected: "an event and a stream of one device".into(),
                found: "two devices".into(),
            }),
        }
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn cuda(&self) -> Result<&super::cuda::CudaQueue, DeviceError> {
        match &self.inner {
            StreamImpl::Cuda(q) => Ok(q),
            #[allow(unreachable_patterns)]
            _ => Err(DeviceError::Mismatch {
                what: "stream",
                expected: "a cuda stream".into(),
                found: "a stream of another device".into(),
            }),
        }
    }

    #[cfg(feature = "hip")]
    pub(crate) fn hip(&self) -> Result<&super::hip::HipQueue, DeviceError> {
        match &self.inner {
            StreamImpl::Hip(q) => Ok(q),
            #[allow(unreachable_patterns)]
            _ => Err(DeviceError::Mismatch {
                what: "stream",
                expected: "a hip stream".into(),
                found: "a stream of another device".into(),
            }),
        }
    }
}

pub struct Event {
    pub(crate) inner: EventImpl,
}

pub(crate) enum EventImpl {
    Host(Mutex<Option<Instant>>),
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaEvent),
    #[cfg(feature = "hip")]
    Hip(super::hip::HipEvent),
}

impl Event {
    pub(crate) fn host() -> Event {
        Event { inner: EventImpl::Host(Mutex::new(None)) }
    }

    /// Marks the point after all work queued on `stream` so far.
    pub fn record(&self, stream: &Stream) -> Result<(), DeviceError> {
        stream.refuse_while_recording("an event record")?;
        match (&self.inner, &stream.inner) {
            (EventImpl::Host(t), StreamImpl::Host) => {
                *t.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                Ok(())
            }
            #[cfg(feature = "cuda")]
            (EventImpl::Cuda(e), StreamImpl::Cuda(q)) => q.record(e),
            #[cfg(feature = "hip")]
            (EventImpl::Hip(e), StreamImpl::Hip(q)) => q.record(e),
            #[allow(unreachable_patterns)]
            _ => Err(DeviceError::Mismatch {
                what: "event",
                expected: "an event and a stream of one device".into(),
                found: "two devices".into(),
            }),
        }
    }

    /// Milliseconds from this event to `end` (both recorded); waits for `end`.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, DeviceError> {
        match (&self.inner, &end.inner) {
            (EventImpl::Host(a), EventImpl::Host(b)) => {
                let a = *a.lock().unwrap_or_else(|e| e.into_inner());
                let b = *b.lock().unwrap_or_else(|e| e.into_inner());
                match (a, b) {
                    (Some(a), Some(b)) => Ok(b.saturating_duration_since(a).as_secs_f32() * 1e3),
                    _ => Err(DeviceError::Mismatch {
                        what: "elapsed time",
                        expected: "two recorded events".into(),
                        found: "an event never recorded".into(),
                    }),
                }
            }
            #[cfg(feature = "cuda")]
            (EventImpl::Cuda(a), EventImpl::Cuda(b)) => {
                a.elapsed_ms(b).map_err(|e| super::cuda::driver_error("cuEventElapsedTime", e))
            }
            #[cfg(feature = "hip")]
            (EventImpl::Hip(a), EventImpl::Hip(b)) => a.elapsed_ms(b),
            #[allow(unreachable_patterns)]
            _ => Err(DeviceError::Mismatch {
                what: "event",
                expected: "two events of one device".into(),
                found: "two devices".into(),
            }),
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.inner {
            StreamImpl::Host => "Stream(host)",
            #[cfg(feature = "cuda")]
            StreamImpl::Cuda(_) => "Stream(cuda)",
            #[cfg(feature = "hip")]
            StreamImpl::Hip(_) => "Stream(hip)",
        })
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Event")
    }
}
