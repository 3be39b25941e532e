//! The few HIP runtime functions baro calls, declared here with a plain `i32` status instead
//! of `hip-runtime-sys`'s `hipError_t` Rust enum, and the names of the status codes.
//!
//! Why our own declarations: the HIP runtime a binary meets at run time may be newer or older
//! than the headers `hip-runtime-sys` was generated from (HIP 5.4 headers; Debian ships 5.2.3;
//! users run 6.x/7.x), and any code missing from that Rust enum would be undefined behaviour
//! the moment it is returned. An `i32` can hold every code. `hip-runtime-sys` is still the
//! crate that finds and links `libamdhip64` (its build script) and supplies the layout of
//! `hipDeviceProp_t`. This module must never interpret a code beyond naming it.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};

pub use hip_runtime_sys::hipDeviceProp_t as DeviceProp;

/// A HIP status code (`hipError_t`), kept as a plain integer.
pub type Code = c_int;
pub type DevicePtr = *mut c_void;
pub type Module = *mut c_void;
pub type Function = *mut c_void;
pub type Stream = *mut c_void;
pub type Event = *mut c_void;

pub const SUCCESS: Code = 0;
pub const ERROR_NO_DEVICE: Code = 100;

extern "C" {
    pub fn hipInit(flags: c_uint) -> Code;
    pub fn hipRuntimeGetVersion(version: *mut c_int) -> Code;
    pub fn hipGetDeviceCount(count: *mut c_int) -> Code;
    pub fn hipSetDevice(device: c_int) -> Code;
    pub fn hipGetDeviceProperties(prop: *mut DeviceProp, device: c_int) -> Code;
    pub fn hipMalloc(ptr: *mut DevicePtr, size: usize) -> Code;
    pub fn hipFree(ptr: DevicePtr) -> Code;
    pub fn hipMemcpyHtoD(dst: DevicePtr, src: *mut c_void, size: usize) -> Code;
    pub fn hipMemcpyDtoH(dst: *mut c_void, src: DevicePtr, size: usize) -> Code;
    pub fn hipMemcpyHtoDAsync(dst: DevicePtr, src: *mut c_void, size: usize, stream: Stream) -> Code;
    pub fn hipMemGetInfo(free: *mut usize, total: *mut usize) -> Code;
    pub fn hipStreamWaitEvent(stream: Stream, event: Event, flags: c_uint) -> Code;
    pub fn hipMemcpyDtoDAsync(dst: DevicePtr, src: DevicePtr, size: usize, stream: Stream) -> Code;
    pub fn hipMemcpyDtoHAsync(dst: *mut c_void, src: DevicePtr, size: usize, stream: Stream) -> Code;
    pub fn hipMemsetAsync(dst: DevicePtr, value: c_int, size: usize, stream: Stream) -> Code;
    pub fn hipModuleLoadData(module: *mut Module, image: *const c_void) -> Code;
    pub fn hipModuleUnload(module: Module) -> Code;
    pub fn hipModuleGetFunction(function: *mut Function, module: Module, name: *const c_char) -> Code;
    #[allow(clippy::too_many_arguments)]
    pub fn hipModuleLaunchKernel(
        function: Function,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_bytes: c_uint,
        stream: Stream,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> Code;
    pub fn hipStreamCreate(stream: *mut Stream) -> Code;
    pub fn hipStreamDestroy(stream: Stream) -> Code;
    pub fn hipStreamSynchronize(stream: Stream) -> Code;
    pub fn hipEventCreate(event: *mut Event) -> Code;
    pub fn hipEventDestroy(event: Event) -> Code;
    pub fn hipEventRecord(event: Event, stream: Stream) -> Code;
    pub fn hipEventSynchronize(event: Event) -> Code;
    pub fn hipEventElapsedTime(ms: *mut f32, start: Event, stop: Event) -> Code;
}

/// The name HIP 5.2's headers give `code`, or `None` for a code they do not list (a newer or
/// older runtime may return such codes).
pub fn code_name(code: Code) -> Option<&'static str> {
    Some(match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        4 => "hipErrorDeinitialized",
        5 => "hipErrorProfilerDisabled",
        6 => "hipErrorProfilerNotInitialized",
        7 => "hipErrorProfilerAlreadyStarted",
        8 => "hipErrorProfilerAlreadyStopped",
        9 => "hipErrorInvalidConfiguration",
        12 => "hipErrorInvalidPitchValue",
        13 => "hipErrorInvalidSymbol",
        17 => "hipErrorInvalidDevicePointer",
        21 => "hipErrorInvalidMemcpyDirection",
        35 => "hipErrorInsufficientDriver",
        52 => "hipErrorMissingConfiguration",
        53 => "hipErrorPriorLaunchFailure",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        202 => "hipErrorContextAlreadyCurrent",
        205 => "hipErrorMapFailed",
        206 => "hipErrorUnmapFailed",
        207 => "hipErrorArrayIsMapped",
        208 => "hipErrorAlreadyMapped",
        209 => "hipErrorNoBinaryForGpu",
        210 => "hipErrorAlreadyAcquired",
        211 => "hipErrorNotMapped",
        212 => "hipErrorNotMappedAsArray",
        213 => "hipErrorNotMappedAsPointer",
        214 => "hipErrorECCNotCorrectable",
        215 => "hipErrorUnsupportedLimit",
        216 => "hipErrorContextAlreadyInUse",
        217 => "hipErrorPeerAccessUnsupported",
        218 => "hipErrorInvalidKernelFile",
        219 => "hipErrorInvalidGraphicsContext",
        300 => "hipErrorInvalidSource",
        301 => "hipErrorFileNotFound",
        302 => "hipErrorSharedObjectSymbolNotFound",
        303 => "hipErrorSharedObjectInitFailed",
        304 => "hipErrorOperatingSystem",
        400 => "hipErrorInvalidHandle",
        401 => "hipErrorIllegalState",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        702 => "hipErrorLaunchTimeOut",
        708 => "hipErrorSetOnActiveProcess",
        709 => "hipErrorContextIsDestroyed",
        710 => "hipErrorAssert",
        801 => "hipErrorNotSupported",
        900 => "hipErrorStreamCaptureUnsupported",
        901 => "hipErrorStreamCaptureInvalidated",
        902 => "hipErrorStreamCaptureMerge",
        903 => "hipErrorStreamCaptureUnmatched",
        904 => "hipErrorStreamCaptureUnjoined",
        905 => "hipErrorStreamCaptureIsolation",
        906 => "hipErrorStreamCaptureImplicit",
        907 => "hipErrorCapturedEvent",
        908 => "hipErrorStreamCaptureWrongThread",
        910 => "hipErrorGraphExecUpdateFailure",
        999 => "hipErrorUnknown",
        1052 => "hipErrorRuntimeMemory",
        1053 => "hipErrorRuntimeOther",
        _ => return None,
    })
}
