//! The host runtime: compiles kernels with LLVM into in-process machine code (cached per
//! kernel) and launches them on the calling thread.
//!
//! A launch never corrupts user data: writable buffers are copied, the kernel runs on the
//! copies, and the copies are written back only if the whole launch succeeded. An
//! out-of-bounds access, a bad loop step, a wrong argument or a bad grid is an error that
//! says what was expected and what was found; it never panics and never writes through a
//! user slice.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;

use super::args::Arg;
use super::check::check_args;
use super::error::describe_record;
use super::grid::grid_size;
use crate::ir::{Access, Kernel, ParamKind};
use crate::lower::{self, ErrorRecord};
use crate::options::{CompileOptions, HostOrder};

/// The host runtime could not start (LLVM's native target is unavailable).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("host runtime: {0}")]
pub struct RuntimeError(pub String);

/// A kernel could not be compiled. `Verify` and `Expand` are the kernel author's to fix;
/// `Lower` and `Llvm` are bugs in baro.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("kernel `{kernel}` is not well formed:\n{}", .errors.join("\n"))]
    Verify { kernel: String, errors: Vec<String> },
    #[error(transparent)]
    Expand(#[from] crate::lanes::ExpandError),
    #[error(transparent)]
    Lower(#[from] lower::LowerError),
    #[error("kernel `{kernel}`: llvm: {message}")]
    Llvm { kernel: String, message: String },
}

pub use super::error::LaunchError;

type EntryFn = unsafe extern "C" fn(*const *mut u8, *const u64, *const u64, *const u64, *mut u8, *mut ErrorRecord);

/// One kernel's LLVM context, module and execution engine, kept alive as long as its code
/// may run. The context is leaked into a `'static` borrow at creation and reclaimed in `Drop`
/// after everything borrowing it is gone.
struct Jit {
    ctx: *mut Context,
    module: ManuallyDrop<Module<'static>>,
    engine: ManuallyDrop<ExecutionEngine<'static>>,
    entry: EntryFn,
}

impl Drop for Jit {
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, in dependency order (the module is owned by the
        // engine; both borrow the context), and `ctx` came from `Box::into_raw`.
        unsafe {
            ManuallyDrop::drop(&mut self.module);
            ManuallyDrop::drop(&mut self.engine);
            drop(Box::from_raw(self.ctx));
        }
    }
}

// SAFETY: after construction the LLVM objects are never touched again except by `Drop`
// (which runs once, on whichever thread drops the last `Arc<HostKernel>`); what threads
// share is only `entry`, a pointer to reentrant machine code whose state lives entirely in
// its arguments. The engine's internal `Rc` clones are all owned by this struct.
unsafe impl Send for Jit {}
unsafe impl Sync for Jit {}

/// A compiled kernel, ready to launch.
pub struct HostKernel {
    kernel: Kernel,
    jit: Jit,
    ir_text: String,
    shared_bytes: u64,
}

/// Compiles kernels for the host and caches them by kernel (IR equality). `Send + Sync`.
pub struct HostRuntime {
    cache: Mutex<HashMap<Kernel, Arc<HostKernel>>>,
    /// The order `par` iterations and workgroups run in (every kernel of this runtime).
    order: HostOrder,
}

/// LLVM's JIT set-up is not documented as thread-safe; compiles are serialised.
static COMPILE_LOCK: Mutex<()> = Mutex::new(());

impl HostRuntime {
    /// A runtime in the order `BARO_HOST_ORDER` asks for (`CompileOptions::from_env`).
    pub fn new() -> Result<HostRuntime, RuntimeError> {
        let order = CompileOptions::from_env().map_err(|e| RuntimeError(e.to_string()))?.host_order;
        Self::with_order(order)
    }

    /// A runtime that runs `par` iterations and workgroups in `order`.
    pub fn with_order(order: HostOrder) -> Result<HostRuntime, RuntimeError> {
        Target::initialize_native(&InitializationConfig::default()).map_err(RuntimeError)?;
        Ok(HostRuntime { cache: Mutex::new(HashMap::new()), order })
    }

    pub fn order(&self) -> HostOrder {
        self.order
    }

    /// Checks, expands and compiles `k` (or returns the cached compile of an equal kernel).
    pub fn compile(&self, k: &Kernel) -> Result<Arc<HostKernel>, CompileError> {
        if let Some(hit) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(k) {
            return Ok(hit.clone());
        }
        let compiled = Arc::new(compile_uncached(k, self.order)?);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        Ok(cache.entry(k.clone()).or_insert(compiled).clone())
    }
}

fn compile_uncached(k: &Kernel, order: HostOrder) -> Result<HostKernel, CompileError> {
    crate::verify::check_wellformed(k)
        .map_err(|errs| CompileError::Verify { kernel: k.name.clone(), errors: errs.iter().map(|e| e.to_string()).collect() })?;
    let expanded = crate::mathlib::expand_calls(&crate::lanes::expand(k)?);
    let llvm = |message: String| CompileError::Llvm { kernel: k.name.clone(), message };
    let _guard = COMPILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let ctx: *mut Context = Box::into_raw(Box::new(Context::create()));
    // SAFETY: `ctx` stays allocated until `Jit::drop` (or the error path below), after every
    // value borrowing it is dropped.
    let cx: &'static Context = unsafe { &*ctx };
    let built = (|| {
        let module = lower::lower_host(cx, &expanded, order)?;
        optimize(&module).map_err(llvm)?;
        let ir_text = module.print_to_string().to_string();
        let engine = module.create_jit_execution_engine(OptimizationLevel::Default).map_err(|e| llvm(e.to_string()))?;
        // SAFETY: the entry has exactly the `EntryFn` signature (see `lower::host`).
        let entry = unsafe { engine.get_function::<EntryFn>(lower::ENTRY_NAME).map_err(|e| llvm(e.to_string()))?.as_raw() };
        Ok((module, engine, entry, ir_text))
    })();
    match built {
        Ok((module, engine, entry, ir_text)) => Ok(HostKernel {
            kernel: expanded.clone(),
            jit: Jit { ctx, module: ManuallyDrop::new(module), engine: ManuallyDrop::new(engine), entry },
            ir_text,
            shared_bytes: lower::shared_layout(&expanded).1,
        }),
        Err(e) => {
            // SAFETY: nothing borrowing the context survived the closure.
            drop(unsafe { Box::from_raw(ctx) });
            Err(e)
        }
    }
}

/// The standard O2 pipeline: it only applies transformations that are exact under IEEE
/// semantics without fast-math flags (no reassociation, no contraction).
fn optimize(module: &Module<'_>) -> Result<(), String> {
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    let tm = target
        .create_target_machine(&triple, "generic", "", OptimizationLevel::Default, RelocMode::Default, CodeModel::JITDefault)
        .ok_or("no target machine for the host triple")?;
    module.set_triple(&triple);
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    module.run_passes("default<O2>", &tm, PassBuilderOptions::create()).map_err(|e| e.to_string())
}

/// What a parameter slot holds during a launch.
enum Slot {
    Borrowed,
    /// A private copy of a writable buffer: (argument index, words).
    Copy(usize, Vec<u64>),
}

impl HostKernel {
    /// The optimized LLVM IR this kernel runs.
    pub fn llvm_ir(&self) -> &str {
        &self.ir_text
    }

    /// The kernel as compiled (after reduction and math expansion).
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Runs every workgroup of the grid. On error no argument is modified.
    pub fn launch(&self, args: &mut [Arg<'_>]) -> Result<(), LaunchError> {
        let k = &self.kernel;
        check_args(k, args.iter().map(Arg::shape))?;
        let n = args.len();
        let (mut ptrs, mut lens, mut scalars) = (vec![std::ptr::null_mut::<u8>(); n], vec![0u64; n], vec![0u64; n]);
        let mut slots = Vec::with_capacity(n);
        for (i, (p, a)) in k.params.iter().zip(args.iter()).enumerate() {
            let write = matches!(p.kind, ParamKind::Buffer { access: Access::ReadWrite, .. });
            match a {
                Arg::Scalar(c) => {
                    scalars[i] = c.bits;
                    slots.push(Slot::Borrowed);
                }
                // `check_args` rejected a read-only view of a buffer the kernel writes.
                Arg::Buf { elem, bytes } => {
                    ptrs[i] = bytes.as_ptr().cast_mut();
                    lens[i] = (bytes.len() / elem.size_bytes()) as u64;
                    slots.push(Slot::Borrowed);
                }
                Arg::BufMut { elem, bytes } if !write => {
                    ptrs[i] = bytes.as_ptr().cast_mut();
                    lens[i] = (bytes.len() / elem.size_bytes()) as u64;
                    slots.push(Slot::Borrowed);
                }
                Arg::BufMut { elem, bytes } => {
                    lens[i] = (bytes.len() / elem.size_bytes()) as u64;
                    let mut words = vec![0u64; bytes.len().div_ceil(8)];
                    copy_bytes(bytes, &mut words);
                    slots.push(Slot::Copy(i, words));
                }
            }
        }
        for (i, s) in slots.iter_mut().enumerate() {
            if let Slot::Copy(_, words) = s {
                ptrs[i] = words.as_mut_ptr().cast::<u8>();
            }
        }
        let grid = self.grid(&scalars)?;
        let shared_words = usize::try_from(self.shared_bytes.div_ceil(8)).map_err(|_| LaunchError::Shared { kernel: k.name.clone(), bytes: self.shared_bytes })?;
        let mut scratch = vec![0u64; shared_words.max(1)];
        let mut err = ErrorRecord::default();
        // SAFETY: every buffer pointer is valid for `lens[i]` elements of its type (read-only
        // buffers are never stored to: lowering rejects stores to them; writable ones point
        // to our private copies), the kernel checks every index against `lens`, `scratch`
        // holds `shared_layout`'s bytes, and `err` outlives the call.
        unsafe { (self.jit.entry)(ptrs.as_ptr(), lens.as_ptr(), scalars.as_ptr(), grid.as_ptr(), scratch.as_mut_ptr().cast(), &mut err) };
        if err.kind != 0 {
            return Err(self.describe(err, &lens));
        }
        for s in slots {
            if let Slot::Copy(i, words) = s {
                if let Arg::BufMut { bytes, .. } = &mut args[i] {
                    copy_back(&words, bytes);
                }
            }
        }
        Ok(())
    }

    fn grid(&self, scalars: &[u64]) -> Result<[u64; 3], LaunchError> {
        grid_size(&self.kernel, scalars)
    }

    fn describe(&self, e: ErrorRecord, lens: &[u64]) -> LaunchError {
        describe_record(&self.kernel, e, lens)
    }
}

fn copy_bytes(src: &[u8], dst: &mut [u64]) {
    super::buffer::words_as_bytes_mut(dst)[..src.len()].copy_from_slice(src);
}

fn copy_back(src: &[u64], dst: &mut [u8]) {
    let n = dst.len();
    dst.copy_from_slice(&super::buffer::words_as_bytes(src)[..n]);
}
