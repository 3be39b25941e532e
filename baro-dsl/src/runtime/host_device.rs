//! The host JIT behind the `Device` interface: "device buffers" are host memory, streams are
//! empty (every launch runs to completion on the calling thread), launches go through
//! `HostKernel::launch` (which never modifies a buffer on error). A recorded launch
//! (`record`) keeps the buffers' addresses, and its replay (`launch_node`) rebuilds the same
//! arguments from them: the caller of `Device::replay` keeps those buffers alive.

use std::sync::Arc;

use super::check::check_args;
use super::device::{DeviceArg, DeviceError, KernelImpl};
use super::graph::Node;
use super::{Arg, HostKernel, HostRuntime};
use crate::ir::{Access, Const, Kernel, ParamKind};

pub(crate) struct HostDevice {
    rt: HostRuntime,
}

impl HostDevice {
    pub(crate) fn new() -> Result<HostDevice, DeviceError> {
        let rt = HostRuntime::new()
            .map_err(|e| DeviceError::Driver { call: "llvm native target initialisation", message: e.to_string() })?;
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
        self.rt.compile(k).map_err(|e| DeviceError::Compile {
            kernel: k.name.clone(),
            target: "host".into(),
            message: e.to_string(),
        })
    }

    pub(crate) fn launch(&self, k: &HostKernel, args: &mut [DeviceArg<'_>]) -> Result<(), DeviceError> {
        check_args(k.kernel(), args.iter().map(DeviceArg::shape))?;
        let mut host_args = Vec::with_capacity(args.len());
        for (i, a) in args.iter_mut().enumerate() {
            let foreign = || DeviceError::Mismatch {
                what: "launch argument",
                expected: format!("a host buffer at #{i}"),
                found: "a buffer of another device".into(),
            };
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

    /// `launch`'s checks, then the arguments as parameter words: per buffer its address and
    /// element count as the kernel sees it, per scalar its bits.
    pub(crate) fn record(&self, k: &Arc<HostKernel>, args: &mut [DeviceArg<'_>]) -> Result<Node, DeviceError> {
        check_args(k.kernel(), args.iter().map(DeviceArg::shape))?;
        let mut words = Vec::with_capacity(2 * args.len());
        for (i, a) in args.iter_mut().enumerate() {
            let foreign = || DeviceError::Mismatch {
                what: "launch argument",
                expected: format!("a host buffer at #{i}"),
                found: "a buffer of another device".into(),
            };
            match a {
                DeviceArg::Scalar(c) => words.push(c.bits),
                DeviceArg::Buf(b) => words.extend([b.host_addr().ok_or_else(foreign)? as u64, b.len() as u64]),
                DeviceArg::Words(b) => {
                    b.expect_elem(crate::ir::ScalarType::U8)?;
                    words.extend([b.host_addr().ok_or_else(foreign)? as u64, b.byte_len().div_ceil(4) as u64]);
                }
                DeviceArg::BufMut(b) => {
                    let len = b.len() as u64;
                    words.extend([b.host_addr_mut().ok_or_else(foreign)? as u64, len]);
                }
            }
        }
        Ok(Node { kernel: KernelImpl::Host(k.clone()), grid: [0; 3], words })
    }

    /// Launches a node `record` made, through `HostKernel::launch`.
    ///
    /// # Safety
    ///
    /// Every buffer the node names is alive and not otherwise borrowed (`Device::replay`).
    pub(crate) unsafe fn launch_node(&self, node: &Node) -> Result<(), DeviceError> {
        // Irrefutable in a build without GPU backends, where the host is the only kind.
        #[allow(irrefutable_let_patterns)]
        let KernelImpl::Host(k) = &node.kernel
        else {
            return Err(DeviceError::Mismatch {
                what: "launch graph node",
                expected: "a host kernel".into(),
                found: "a kernel of another device (a bug in baro)".into(),
            });
        };
        let mut args = Vec::with_capacity(k.kernel().params.len());
        let mut words = node.words.iter().copied();
        let mut next = || {
            words.next().ok_or_else(|| DeviceError::Mismatch {
                what: "launch graph node",
                expected: format!("the parameter words of `{}`", k.kernel().name),
                found: "fewer (a bug in baro)".into(),
            })
        };
        for p in &k.kernel().params {
            args.push(match p.kind {
                ParamKind::Scalar(ty) => Arg::Scalar(Const::new(ty, next()?)),
                ParamKind::Buffer { elem, access } => {
                    let (addr, len) = (next()? as usize, next()? as usize);
                    let bytes = len * elem.size_bytes();
                    // SAFETY: `record` took `addr` from a live host buffer of at least `bytes`
                    // bytes (its element count as this parameter's type), which the caller
                    // keeps alive and unborrowed; a writable parameter's address came from a
                    // `&mut Buffer` (`DeviceArg::BufMut`, which `check_args` required).
                    unsafe {
                        if access == Access::ReadWrite {
                            Arg::BufMut { elem, bytes: std::slice::from_raw_parts_mut(addr as *mut u8, bytes) }
                        } else {
                            Arg::Buf { elem, bytes: std::slice::from_raw_parts(addr as *const u8, bytes) }
                        }
                    }
                }
            });
        }
        k.launch(&mut args).map_err(DeviceError::Launch)
    }
}
