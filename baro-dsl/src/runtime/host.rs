//! The host runtime: compiles kernels with LLVM into in-process machine code (cached per
//! kernel in memory, and as object files in the disk cache: `host_jit.rs`) and launches them
//! on the calling thread.
//!
//! A launch never corrupts user data: writable buffers are copied, the kernel runs on the
//! copies, and the copies are written back only if the whole launch succeeded. An
//! out-of-bounds access, a bad loop step, a wrong argument or a bad grid is an error that
//! says what was expected and what was found; it never panics and never writes through a
//! user slice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{InitializationConfig, Target, TargetMachine};

use super::args::Arg;
use super::check::check_args;
use super::error::describe_record;
use super::grid::grid_size;
use super::host_jit::{self, LinkedObject};
use crate::cache::{CacheHit, CacheKey, CompileCache};
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

/// A compiled kernel, ready to launch.
pub struct HostKernel {
    kernel: Kernel,
    /// Keeps the machine code `entry` points into mapped.
    _object: LinkedObject,
    entry: EntryFn,
    ir_text: String,
    shared_bytes: u64,
    /// Whether the machine code came from the disk cache (`Disk`) or was compiled.
    origin: CacheHit,
}

/// Compiles kernels for the host and caches them by kernel (IR equality) in memory, and as
/// object files on disk when the runtime has a cache folder. `Send + Sync`.
pub struct HostRuntime {
    cache: Mutex<HashMap<Kernel, Arc<HostKernel>>>,
    /// The order `par` iterations and workgroups run in (every kernel of this runtime).
    order: HostOrder,
    /// Object files and LLVM IR by cache key (`CompileCache`: checksummed, atomic writes).
    disk: CompileCache,
}

/// LLVM's JIT set-up is not documented as thread-safe; compiles are serialised.
static COMPILE_LOCK: Mutex<()> = Mutex::new(());

impl HostRuntime {
    /// A runtime in the order `BARO_HOST_ORDER` asks for, caching machine code in
    /// `BARO_CACHE_DIR` unless `BARO_CACHE=off` (`CompileOptions::from_env`).
    pub fn new() -> Result<HostRuntime, RuntimeError> {
        let options = CompileOptions::from_env().map_err(|e| RuntimeError(e.to_string()))?;
        let mut rt = Self::with_order(options.host_order)?;
        rt.disk = CompileCache::new(options.cache_dir);
        Ok(rt)
    }

    /// A runtime that runs `par` iterations and workgroups in `order`, with no disk cache.
    pub fn with_order(order: HostOrder) -> Result<HostRuntime, RuntimeError> {
        Target::initialize_native(&InitializationConfig::default()).map_err(RuntimeError)?;
        Ok(HostRuntime { cache: Mutex::new(HashMap::new()), order, disk: CompileCache::new(None) })
    }

    /// A runtime in `order` that keeps machine code in `dir` (`None`: memory only).
    pub fn with_cache(order: HostOrder, dir: Option<std::path::PathBuf>) -> Result<HostRuntime, RuntimeError> {
        let mut rt = Self::with_order(order)?;
        rt.disk = CompileCache::new(dir);
        Ok(rt)
    }

    pub fn order(&self) -> HostOrder {
        self.order
    }

    /// Checks, expands and compiles `k` (or returns the cached compile of an equal kernel).
    pub fn compile(&self, k: &Kernel) -> Result<Arc<HostKernel>, CompileError> {
        if let Some(hit) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(k) {
            return Ok(hit.clone());
        }
        let compiled = Arc::new(compile_uncached(k, self.order, &self.disk)?);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        Ok(cache.entry(k.clone()).or_insert(compiled).clone())
    }
}

/// A kernel lowered, optimised and emitted: the object and its LLVM IR text.
struct Emitted {
    object: Vec<u8>,
    llvm_ir: String,
}

fn compile_uncached(k: &Kernel, order: HostOrder, disk: &CompileCache) -> Result<HostKernel, CompileError> {
    crate::verify::check_wellformed(k).map_err(|errs| CompileError::Verify {
        kernel: k.name.clone(),
        errors: errs.iter().map(|e| e.to_string()).collect(),
    })?;
    let expanded = crate::mathlib::expand_calls(&crate::lanes::expand(k)?);
    let llvm = |message: String| CompileError::Llvm { kernel: k.name.clone(), message };
    // Everything the machine code depends on: the expanded IR, the order (the only option
    // the host lowering reads), the host lowering's source and the target machine.
    let ir_text = expanded.to_string();
    let options = CompileOptions { host_order: order, ..CompileOptions::default() };
    let codegen = format!("{}+{}", crate::compile::host_codegen_version(), host_jit::target_identity());
    let key = |stage: &str| CacheKey::new(&ir_text, &crate::target::Target::Host, &options, stage, &codegen);
    let mut fresh: Option<Emitted> = None;
    let mut run = |pick: fn(&Emitted) -> Vec<u8>| -> Result<Vec<u8>, CompileError> {
        if fresh.is_none() {
            fresh = Some(emit(&expanded, order).map_err(|e| e.into_compile_error(k))?);
        }
        Ok(fresh.as_ref().map(pick).unwrap_or_default())
    };
    let (object, hit) = disk.get_or_compile(key("host.o"), "host.o", || run(|e| e.object.clone()))?;
    let (ll, _) = disk.get_or_compile(key("host.ll"), "host.ll", || run(|e| e.llvm_ir.as_bytes().to_vec()))?;
    let (linked, ir_text, origin) = match (link(&object), String::from_utf8(ll.to_vec())) {
        (Ok(linked), Ok(ir)) => (linked, ir, hit),
        // A cached entry that passed its checksum but does not link (or is not text) is
        // compiled afresh and replaced; a fresh object that does not link is a bug in baro.
        (first, _) => {
            if hit == CacheHit::Compiled {
                return Err(llvm(first.err().unwrap_or_else(|| "the emitted LLVM IR is not utf-8".into())));
            }
            let e = emit(&expanded, order).map_err(|e| e.into_compile_error(k))?;
            let linked = link(&e.object).map_err(llvm)?;
            disk.replace(key("host.o"), "host.o", e.object);
            disk.replace(key("host.ll"), "host.ll", e.llvm_ir.as_bytes().to_vec());
            (linked, e.llvm_ir, CacheHit::Compiled)
        }
    };
    // SAFETY: the entry has exactly the `EntryFn` signature (see `lower::host`) and lives as
    // long as `linked`, which the kernel owns.
    let entry: EntryFn = unsafe { std::mem::transmute::<usize, EntryFn>(linked.entry as usize) };
    Ok(HostKernel {
        kernel: expanded.clone(),
        _object: linked,
        entry,
        ir_text,
        shared_bytes: lower::shared_layout(&expanded).1,
        origin,
    })
}

/// Links an object under `COMPILE_LOCK` (JIT set-up, like compiling, is serialised).
fn link(object: &[u8]) -> Result<LinkedObject, String> {
    let _guard = COMPILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    host_jit::link(object, lower::ENTRY_NAME)
}

enum EmitError {
    Lower(lower::LowerError),
    Llvm(String),
}

impl EmitError {
    fn into_compile_error(self, k: &Kernel) -> CompileError {
        match self {
            EmitError::Lower(e) => CompileError::Lower(e),
            EmitError::Llvm(message) => CompileError::Llvm { kernel: k.name.clone(), message },
        }
    }
}

/// Lowers, optimises and emits `expanded` in a context of its own (dropped on return).
fn emit(expanded: &Kernel, order: HostOrder) -> Result<Emitted, EmitError> {
    let _guard = COMPILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let cx = Context::create();
    let module = lower::lower_host(&cx, expanded, order).map_err(EmitError::Lower)?;
    let tm = host_jit::target_machine().map_err(EmitError::Llvm)?;
    optimize(&module, &tm).map_err(EmitError::Llvm)?;
    let llvm_ir = module.print_to_string().to_string();
    let object = host_jit::emit_object(&module, &tm).map_err(EmitError::Llvm)?;
    Ok(Emitted { object, llvm_ir })
}

/// The standard O2 pipeline: it only applies transformations that are exact under IEEE
/// semantics without fast-math flags (no reassociation, no contraction).
fn optimize(module: &Module<'_>, tm: &TargetMachine) -> Result<(), String> {
    module.set_triple(&TargetMachine::get_default_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    module.run_passes("default<O2>", tm, PassBuilderOptions::create()).map_err(|e| e.to_string())
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

    /// Whether the machine code was loaded from the disk cache (`CacheHit::Disk`) or
    /// compiled (`CacheHit::Compiled`).
    pub fn origin(&self) -> CacheHit {
        self.origin
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
        let shared_words = usize::try_from(self.shared_bytes.div_ceil(8))
            .map_err(|_| LaunchError::Shared { kernel: k.name.clone(), bytes: self.shared_bytes })?;
        let mut scratch = vec![0u64; shared_words.max(1)];
        let mut err = ErrorRecord::default();
        // SAFETY: every buffer pointer is valid for `lens[i]` elements of its type (read-only
        // buffers are never stored to: lowering rejects stores to them; writable ones point
        // to our private copies), the kernel checks every index against `lens`, `scratch`
        // holds `shared_layout`'s bytes, and `err` outlives the call.
        unsafe {
            (self.entry)(
                ptrs.as_ptr(),
                lens.as_ptr(),
                scalars.as_ptr(),
                grid.as_ptr(),
                scratch.as_mut_ptr().cast(),
                &mut err,
            )
        };
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
