//! HIP streams with their launch error records (`runtime::records`), and timing events.
//! A queue never reads a record before the stream has finished the launch that writes it.

use std::convert::Infallible;
use std::ptr::null_mut;
use std::sync::Mutex;

use super::{api, check, ffi, HipKernel, HipMem};
use crate::runtime::abi::{param_ptrs, RECORD_BYTES, RECORD_WORDS};
use crate::runtime::device::{DeviceError, DeviceKernel};
use crate::runtime::records::{Ring, RECORD_SLOTS};

/// A HIP stream (or the null stream) and its error-record ring.
pub(crate) struct HipQueue {
    raw: ffi::Stream,
    /// Whether `raw` was created here (and is destroyed on drop); false for the null stream.
    owned: bool,
    device: i32,
    records: Mutex<Records>,
}

/// The ring's slots: (RECORD_SLOTS, 4 x u64), zero except for launches still pending; no
/// graphs on HIP.
type Records = Ring<HipMem, Infallible>;

// SAFETY: a stream handle may be used from any thread; the record ring is behind a mutex.
unsafe impl Send for HipQueue {}
unsafe impl Sync for HipQueue {}

impl Drop for HipQueue {
    fn drop(&mut self) {
        if self.owned {
            if let Ok(hip) = api() {
                // SAFETY: created by `hipStreamCreate`, destroyed exactly once; HIP finishes its
                // pending work first. The record ring is freed afterwards by its own drop.
                unsafe { (hip.hipStreamDestroy)(self.raw) };
            }
        }
    }
}

impl HipQueue {
    /// A new stream on the current device (`device`).
    pub(crate) fn new(device: i32) -> Result<HipQueue, DeviceError> {
        let slots = HipMem::zeroed(device, RECORD_SLOTS * RECORD_BYTES)?;
        let mut raw: ffi::Stream = null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        check("hipStreamCreate", unsafe { (api()?.hipStreamCreate)(&mut raw) })?;
        Ok(HipQueue { raw, owned: true, device, records: Mutex::new(Ring::new(slots)) })
    }

    /// The current device's null stream.
    pub(crate) fn null(device: i32) -> Result<HipQueue, DeviceError> {
        let slots = HipMem::zeroed(device, RECORD_SLOTS * RECORD_BYTES)?;
        Ok(HipQueue { raw: null_mut(), owned: false, device, records: Mutex::new(Ring::new(slots)) })
    }

    pub(crate) fn device(&self) -> i32 {
        self.device
    }

    /// Queues a launch of `k` (`kernel`'s) with its argument `words` (the error record's
    /// address is appended here); `lens` are the parameters' element counts for the error
    /// message.
    pub(crate) fn launch(
        &self,
        kernel: &DeviceKernel,
        k: &HipKernel,
        mut words: Vec<u64>,
        lens: Vec<u64>,
        grid: [u32; 3],
    ) -> Result<(), DeviceError> {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if records.is_full() {
            self.check_records(&mut records)?;
        }
        let slot = records.next_slot();
        words.push(records.slots.ptr as u64 + (slot * RECORD_BYTES) as u64);
        let mut params = param_ptrs(&mut words);
        // SAFETY: `params` holds one pointer per kernel parameter of the ABI, each to a live
        // 8-byte word that HIP copies before returning; every buffer address is a live
        // allocation of this device holding at least its element count (the kernel
        // bounds-checks every access against it); the record slot is zeroed, in the ring, and
        // read only after the stream finishes; block_dim was checked at load.
        let code = unsafe {
            (api()?.hipModuleLaunchKernel)(
                k.function,
                grid[0],
                grid[1],
                grid[2],
                k.artifact.block_dim,
                1,
                1,
                0,
                self.raw,
                params.as_mut_ptr(),
                null_mut(),
            )
        };
        check("hipModuleLaunchKernel", code)?;
        records.launched(kernel.clone(), lens);
        Ok(())
    }

    /// Queues a device-to-device copy (both allocations hold at least `len` bytes).
    pub(crate) fn copy(&self, src: ffi::DevicePtr, dst: ffi::DevicePtr, len: usize) -> Result<(), DeviceError> {
        // SAFETY: both are live allocations of at least `len` bytes (the caller's buffers);
        // they are distinct allocations because one is borrowed mutably.
        check("hipMemcpyDtoDAsync", unsafe { (api()?.hipMemcpyDtoDAsync)(dst, src, len, self.raw) })
    }

    /// Queues a copy of `src` into `dst + dst_off` and waits for the stream: `src` is
    /// pageable memory, which HIP may still read after an asynchronous call returns.
    pub(crate) fn copy_from_host(&self, src: &[u8], dst: ffi::DevicePtr) -> Result<(), DeviceError> {
        // SAFETY: `dst` points into a live allocation with at least `src.len()` bytes left
        // (the caller's checked range); `src` is borrowed for the whole call, which does not
        // return before the stream has finished the copy.
        check("hipMemcpyHtoDAsync", unsafe {
            (api()?.hipMemcpyHtoDAsync)(dst, src.as_ptr().cast_mut().cast(), src.len(), self.raw)
        })?;
        self.sync_stream()
    }

    /// Work queued on this stream from now on waits for `e`'s last recorded point.
    pub(crate) fn wait(&self, e: &HipEvent) -> Result<(), DeviceError> {
        if e.device != self.device {
            return Err(DeviceError::Mismatch {
                what: "event",
                expected: format!("an event of hip device {}", self.device),
                found: format!("one of hip device {}", e.device),
            });
        }
        super::set_device(self.device)?;
        // SAFETY: live stream and event handles of one device; flags 0 is the only defined value.
        check("hipStreamWaitEvent", unsafe { (api()?.hipStreamWaitEvent)(self.raw, e.raw, 0) })
    }

    /// Waits for all queued work, then reports the first failed bounds check (in launch
    /// order) of the kernels launched since the last synchronisation.
    pub(crate) fn synchronize(&self) -> Result<(), DeviceError> {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        self.check_records(&mut records)
    }

    fn sync_stream(&self) -> Result<(), DeviceError> {
        // SAFETY: a live stream handle (or the null stream).
        check("hipStreamSynchronize", unsafe { (api()?.hipStreamSynchronize)(self.raw) })
    }

    fn check_records(&self, records: &mut Records) -> Result<(), DeviceError> {
        self.sync_stream()?;
        let first = records.check(|slots, n| self.take_records(slots, n), |never| match *never {})?;
        first.map_or(Ok(()), Err)
    }

    /// Reads the first `n` records of `slots` and zeroes them; the stream is idle.
    fn take_records(&self, slots: &mut HipMem, n: usize) -> Result<Vec<u64>, DeviceError> {
        let mut words = vec![0u64; n * RECORD_WORDS];
        let bytes = n * RECORD_BYTES;
        // SAFETY: the ring holds `RECORD_SLOTS * RECORD_BYTES >= bytes` bytes; `words` is
        // `bytes` writable bytes; the stream is idle, so no kernel writes the ring meanwhile.
        check("hipMemcpyDtoHAsync (error records)", unsafe {
            (api()?.hipMemcpyDtoHAsync)(words.as_mut_ptr().cast(), slots.ptr, bytes, self.raw)
        })?;
        self.sync_stream()?;
        // SAFETY: as above; zeroes the slots just read.
        check("hipMemsetAsync (error records)", unsafe { (api()?.hipMemsetAsync)(slots.ptr, 0, bytes, self.raw) })?;
        self.sync_stream()?;
        Ok(words)
    }

    pub(crate) fn record(&self, e: &HipEvent) -> Result<(), DeviceError> {
        if e.device != self.device {
            return Err(DeviceError::Mismatch {
                what: "event",
                expected: format!("an event of hip device {}", self.device),
                found: format!("one of hip device {}", e.device),
            });
        }
        super::set_device(self.device)?;
        // SAFETY: live event and stream handles of one device.
        check("hipEventRecord", unsafe { (api()?.hipEventRecord)(e.raw, self.raw) })
    }
}

/// A point in a stream's work, for timing.
pub(crate) struct HipEvent {
    raw: ffi::Event,
    device: i32,
}

// SAFETY: event handles may be used from any thread; HIP's event calls are thread-safe.
unsafe impl Send for HipEvent {}
unsafe impl Sync for HipEvent {}

impl Drop for HipEvent {
    fn drop(&mut self) {
        if let Ok(hip) = api() {
            // SAFETY: created by `hipEventCreate`, destroyed exactly once.
            unsafe { (hip.hipEventDestroy)(self.raw) };
        }
    }
}

impl HipEvent {
    /// A new event on the current device (`device`).
    pub(crate) fn new(device: i32) -> Result<HipEvent, DeviceError> {
        let mut raw: ffi::Event = null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        check("hipEventCreate", unsafe { (api()?.hipEventCreate)(&mut raw) })?;
        Ok(HipEvent { raw, device })
    }

    /// Milliseconds from this event to `end`; waits for `end` to complete.
    pub(crate) fn elapsed_ms(&self, end: &HipEvent) -> Result<f32, DeviceError> {
        // SAFETY: a live event handle.
        check("hipEventSynchronize", unsafe { (api()?.hipEventSynchronize)(end.raw) })?;
        let mut ms = 0f32;
        // SAFETY: live event handles; `ms` is a valid out-pointer.
        check("hipEventElapsedTime", unsafe { (api()?.hipEventElapsedTime)(&mut ms, self.raw, end.raw) })?;
        Ok(ms)
    }
}
