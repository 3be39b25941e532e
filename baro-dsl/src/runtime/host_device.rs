//! The host JIT behind the `Device` interface: "device buffers" are host memory, streams are
//! empty (every launch runs to completion on the calling thread), launches go through
//! `HostKernel::launch` (which never modifies a buffer on error).

use std::sync::Arc;

use super::check::check_args;
use super::device::{DeviceArg, DeviceError};
use super::{Arg, HostKernel, HostRuntime};
use crate::ir::Kernel;

pub(crate) struct HostDevice {
    rt: HostRuntime,
}

impl HostDevice {
    pub(crate) fn new() -> Result<HostDevice, DeviceError> {
        let rt = HostRuntime::new().map_err(|e| DeviceError::Driver { call: "llvm native target initialisation", message: e.to_string() })?;
        Ok(HostDevice { rt })
    }

    pub(crate) fn name(&self) -> String {
        format!("host ({})", std::env::consts::ARCH)
    }

    pub(crate) fn driver_version(&self) -> String {
        let (a, b, c) = inkwell::support::get_llvm_version();
        format!("LLVM {a}.{b}.{c} JIT")
    }

    pub(crate) fn compile(&self, k: &Kernel) -> Result<Arc<HostKernel>, DeviceError> {
        self.rt.compile(k).map_err(|e| DeviceError::Compile { kernel: k.name.clone(), target: "host".into(), message: e.to_string() })
    }

    pub(crate) fn launch(&self, k: &HostKernel, args: &mut [DeviceArg<'_>]) -> Result<(), DeviceError> {
        check_args(k.kernel(), args.iter().map(DeviceArg::shape))?;
        let mut host_args = Vec::with_capacity(args.len());
        for (i, a) in args.iter_mut().enumerate() {
            let foreign = || DeviceError::Mismatch { what: "launch argument", expected: format!("a host buffer at #{i}"), found: "a buffer of another device".into() };
            host_args.push(match a {
                DeviceArg::Scalar(c) => Arg::Scalar(*c),
                DeviceArg::Buf(b) => Arg::Buf { elem: b.elem(), bytes: b.host_bytes().ok_or_else(foreign)? },
                DeviceArg::Words(b) => {
                    b.expect_elem(crate::ir::ScalarType::U8)?;
                    Arg::Buf { elem: crate::ir::ScalarType::U32, bytes: b.host_word_bytes().ok_or_else(foreign)? }
                }
                DeviceArg::BufMut(b) => {
                    let elem = b.elem();
                    Arg::BufMut { elem, bytes: b.host_bytes_mut().ok_or_else(foreign)? }
                }
            });
        }
        k.launch(&mut host_args).map_err(DeviceError::Launch)
    }
}
