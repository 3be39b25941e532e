//! The HIP runtime's types as baro declares them: status codes as a plain `i32`, handles as
//! raw pointers, the device properties struct of ROCm 6 and 7 (`hipDeviceProp_tR0600`), and
//! the names of the status codes. The functions themselves are looked up at run time
//! (`library.rs`); nothing here links `libamdhip64`.
//!
//! Why our own declarations: the HIP runtime a binary meets may be newer or older than any
//! headers baro could be built against, and a status code missing from a Rust enum would be
//! undefined behaviour the moment it is returned. An `i32` can hold every code. This module
//! must never interpret a code beyond naming it.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// A HIP status code (`hipError_t`), kept as a plain integer.
pub type Code = c_int;
pub type DevicePtr = *mut c_void;
pub type Module = *mut c_void;
pub type Function = *mut c_void;
pub type Stream = *mut c_void;
pub type Event = *mut c_void;

pub const SUCCESS: Code = 0;
pub const ERROR_NO_DEVICE: Code = 100;

/// `hipDeviceProp_tR0600` of ROCm 6 and 7's `hip_runtime_api.h`, field for field up to
/// `gcnArchName` (the fields baro reads are `name`, `warpSize` and `gcnArchName`); the rest
/// of the struct is `_tail`, larger than what the headers declare after `gcnArchName`.
#[repr(C)]
pub struct DeviceProp {
    pub name: [c_char; 256],
    pub uuid: [c_char; 16],
    pub luid: [c_char; 8],
    pub luidDeviceNodeMask: c_uint,
    pub totalGlobalMem: usize,
    pub sharedMemPerBlock: usize,
    pub regsPerBlock: c_int,
    pub warpSize: c_int,
    pub memPitch: usize,
    pub maxThreadsPerBlock: c_int,
    pub maxThreadsDim: [c_int; 3],
    pub maxGridSize: [c_int; 3],
    pub clockRate: c_int,
    pub totalConstMem: usize,
    pub major: c_int,
    pub minor: c_int,
    pub textureAlignment: usize,
    pub texturePitchAlignment: usize,
    /// `deviceOverlap` .. `maxSurfaceCubemapLayered[2]`: 46 ints.
    pub ints_a: [c_int; 46],
    pub surfaceAlignment: usize,
    /// `concurrentKernels` .. `localL1CacheSupported`: 16 ints.
    pub ints_b: [c_int; 16],
    pub sharedMemPerMultiprocessor: usize,
    /// `regsPerMultiprocessor` .. `cooperativeMultiDeviceLaunch`: 12 ints.
    pub ints_c: [c_int; 12],
    pub sharedMemPerBlockOptin: usize,
    /// `pageableMemoryAccessUsesHostPageTables` .. `accessPolicyMaxWindowSize`: 4 ints.
    pub ints_d: [c_int; 4],
    pub reservedSharedMemPerBlock: usize,
    /// `hostRegisterSupported` .. `unifiedFunctionPointers` (13), `reserved[63]`,
    /// `hipReserved[32]`.
    pub ints_e: [c_int; 13 + 63 + 32],
    pub gcnArchName: [c_char; 256],
    pub _tail: [u8; 4096],
}

/// The HIP functions baro calls, with their C signatures.
pub mod sig {
    use super::*;
    pub type Init = unsafe extern "C" fn(flags: c_uint) -> Code;
    pub type RuntimeGetVersion = unsafe extern "C" fn(version: *mut c_int) -> Code;
    pub type GetDeviceCount = unsafe extern "C" fn(count: *mut c_int) -> Code;
    pub type SetDevice = unsafe extern "C" fn(device: c_int) -> Code;
    pub type GetDeviceProperties = unsafe extern "C" fn(prop: *mut DeviceProp, device: c_int) -> Code;
    pub type Malloc = unsafe extern "C" fn(ptr: *mut DevicePtr, size: usize) -> Code;
    pub type Free = unsafe extern "C" fn(ptr: DevicePtr) -> Code;
    pub type MemcpyHtoD = unsafe extern "C" fn(dst: DevicePtr, src: *mut c_void, size: usize) -> Code;
    pub type MemcpyDtoH = unsafe extern "C" fn(dst: *mut c_void, src: DevicePtr, size: usize) -> Code;
    pub type MemcpyHtoDAsync =
        unsafe extern "C" fn(dst: DevicePtr, src: *mut c_void, size: usize, stream: Stream) -> Code;
    pub type MemGetInfo = unsafe extern "C" fn(free: *mut usize, total: *mut usize) -> Code;
    pub type StreamWaitEvent = unsafe extern "C" fn(stream: Stream, event: Event, flags: c_uint) -> Code;
    pub type MemcpyDtoDAsync =
        unsafe extern "C" fn(dst: DevicePtr, src: DevicePtr, size: usize, stream: Stream) -> Code;
    pub type MemcpyDtoHAsync =
        unsafe extern "C" fn(dst: *mut c_void, src: DevicePtr, size: usize, stream: Stream) -> Code;
    pub type MemsetAsync = unsafe extern "C" fn(dst: DevicePtr, value: c_int, size: usize, stream: Stream) -> Code;
    pub type ModuleLoadData = unsafe extern "C" fn(module: *mut Module, image: *const c_void) -> Code;
    pub type ModuleUnload = unsafe extern "C" fn(module: Module) -> Code;
    pub type ModuleGetFunction =
        unsafe extern "C" fn(function: *mut Function, module: Module, name: *const c_char) -> Code;
    pub type ModuleLaunchKernel = unsafe extern "C" fn(
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
    pub type StreamCreate = unsafe extern "C" fn(stream: *mut Stream) -> Code;
    pub type StreamDestroy = unsafe extern "C" fn(stream: Stream) -> Code;
    pub type StreamSynchronize = unsafe extern "C" fn(stream: Stream) -> Code;
    pub type EventCreate = unsafe extern "C" fn(event: *mut Event) -> Code;
    pub type EventDestroy = unsafe extern "C" fn(event: Event) -> Code;
    pub type EventRecord = unsafe extern "C" fn(event: Event, stream: Stream) -> Code;
    pub type EventSynchronize = unsafe extern "C" fn(event: Event) -> Code;
    pub type EventElapsedTime = unsafe extern "C" fn(ms: *mut f32, start: Event, stop: Event) -> Code;
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
