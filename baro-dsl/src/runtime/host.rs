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
use crate::ir::{Access, BinOp, Expr, Kernel, ParamKind, ScalarType};
use crate::lower::{self, ErrorRecord};

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

/// A launch failed; no user buffer was modified. Every variant is the caller's (or the
/// kernel author's) to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("kernel `{kernel}` takes {expected} arguments, found {found}")]
    ArgCount { kernel: String, expected: usize, found: usize },
    #[error("argument `{name}` (#{position}): expected {expected}, found {found}")]
    ArgType { name: String, position: usize, expected: String, found: String },
    #[error("argument `{name}` (#{position}): the kernel writes it, expected &mut [{elem}], found &[{elem}]")]
    ReadOnly { name: String, position: usize, elem: ScalarType },
    #[error("kernel `{kernel}` grid axis {axis}: {message}")]
    Grid { kernel: String, axis: usize, message: String },
    #[error("kernel `{kernel}` {verb} {place}`{buffer}[{index}]` but `{buffer}` has {len} elements")]
    OutOfBounds { kernel: String, verb: &'static str, place: &'static str, buffer: String, index: String, len: u64 },
    #[error("kernel `{kernel}`: a `for` loop has step {step}, expected a positive step")]
    ForStep { kernel: String, step: String },
    #[error("kernel `{kernel}`: shared memory of {bytes} bytes does not fit in this process")]
    Shared { kernel: String, bytes: u64 },
}

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
}

/// LLVM's JIT set-up is not documented as thread-safe; compiles are serialised.
static COMPILE_LOCK: Mutex<()> = Mutex::new(());

impl HostRuntime {
    pub fn new() -> Result<HostRuntime, RuntimeError> {
        Target::initialize_native(&InitializationConfig::default()).map_err(RuntimeError)?;
        Ok(HostRuntime { cache: Mutex::new(HashMap::new()) })
    }

    /// Checks, expands and compiles `k` (or returns the cached compile of an equal kernel).
    pub fn compile(&self, k: &Kernel) -> Result<Arc<HostKernel>, CompileError> {
        if let Some(hit) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(k) {
            return Ok(hit.clone());
        }
        let compiled = Arc::new(compile_uncached(k)?);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        Ok(cache.entry(k.clone()).or_insert(compiled).clone())
    }
}

fn compile_uncached(k: &Kernel) -> Result<HostKernel, CompileError> {
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
        let module = lower::lower_host(cx, &expanded)?;
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
        if args.len() != k.params.len() {
            return Err(LaunchError::ArgCount { kernel: k.name.clone(), expected: k.params.len(), found: args.len() });
        }
        let n = args.len();
        let (mut ptrs, mut lens, mut scalars) = (vec![std::ptr::null_mut::<u8>(); n], vec![0u64; n], vec![0u64; n]);
        let mut slots = Vec::with_capacity(n);
        for (i, (p, a)) in k.params.iter().zip(args.iter()).enumerate() {
            let mismatch = |expected: String| LaunchError::ArgType { name: p.name.clone(), position: i, expected, found: a.describe() };
            match (&p.kind, a) {
                (ParamKind::Scalar(t), Arg::Scalar(c)) if c.ty == *t => {
                    scalars[i] = c.bits;
                    slots.push(Slot::Borrowed);
                }
                (ParamKind::Scalar(t), _) => return Err(mismatch(t.to_string())),
                (ParamKind::Buffer { elem, access }, Arg::Buf { elem: e, bytes }) if e == elem => {
                    if *access == Access::ReadWrite {
                        return Err(LaunchError::ReadOnly { name: p.name.clone(), position: i, elem: *elem });
                    }
                    ptrs[i] = bytes.as_ptr().cast_mut();
                    lens[i] = (bytes.len() / elem.size_bytes()) as u64;
                    slots.push(Slot::Borrowed);
                }
                (ParamKind::Buffer { elem, access }, Arg::BufMut { elem: e, bytes }) if e == elem => {
                    lens[i] = (bytes.len() / elem.size_bytes()) as u64;
                    if *access == Access::ReadWrite {
                        let mut words = vec![0u64; bytes.len().div_ceil(8)];
                        copy_bytes(bytes, &mut words);
                        slots.push(Slot::Copy(i, words));
                    } else {
                        ptrs[i] = bytes.as_ptr().cast_mut();
                        slots.push(Slot::Borrowed);
                    }
                }
                (ParamKind::Buffer { elem, access }, _) => {
                    let m = if *access == Access::ReadWrite { "mut " } else { "" };
                    return Err(mismatch(format!("&{m}[{elem}]")));
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

    /// Grid sizes (x, y, z), each at least 1 and their product within u64.
    fn grid(&self, scalars: &[u64]) -> Result<[u64; 3], LaunchError> {
        let k = &self.kernel;
        let mut g = [1u64; 3];
        for (axis, e) in k.grid.iter().enumerate().take(3) {
            let err = |message: String| LaunchError::Grid { kernel: k.name.clone(), axis, message };
            let v = eval_grid(k, e, scalars).map_err(err)?;
            if v <= 0 {
                return Err(err(format!("expected at least 1 workgroup, found {v}")));
            }
            g[axis] = u64::try_from(v).map_err(|_| err(format!("{v} workgroups overflow u64")))?;
        }
        if g[0].checked_mul(g[1]).and_then(|p| p.checked_mul(g[2])).is_none() {
            return Err(LaunchError::Grid { kernel: k.name.clone(), axis: 2, message: format!("{} x {} x {} workgroups overflow u64", g[0], g[1], g[2]) });
        }
        Ok(g)
    }

    fn describe(&self, e: ErrorRecord, lens: &[u64]) -> LaunchError {
        let k = &self.kernel;
        let index = if e.signed != 0 { (e.index as i64).to_string() } else { e.index.to_string() };
        let (verb, shared) = match e.kind {
            lower::ERR_READ => ("read", false),
            lower::ERR_WRITE => ("wrote", false),
            lower::ERR_READ_SHARED => ("read", true),
            lower::ERR_WRITE_SHARED => ("wrote", true),
            _ => return LaunchError::ForStep { kernel: k.name.clone(), step: index },
        };
        let (buffer, len) = if shared {
            k.shared.get(e.id as usize).map_or(("?".to_string(), 0), |s| (s.name.clone(), s.len as u64))
        } else {
            (k.params.get(e.id as usize).map_or("?".to_string(), |p| p.name.clone()), 0)
        };
        let len = if shared { len } else { lens.get(e.id as usize).copied().unwrap_or(0) };
        LaunchError::OutOfBounds { kernel: k.name.clone(), verb, place: if shared { "shared " } else { "" }, buffer, index, len }
    }
}

fn copy_bytes(src: &[u8], dst: &mut [u64]) {
    for (w, chunk) in dst.iter_mut().zip(src.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_ne_bytes(b);
    }
}

fn copy_back(src: &[u64], dst: &mut [u8]) {
    for (chunk, w) in dst.chunks_mut(8).zip(src) {
        let b = w.to_ne_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// Evaluates a grid expression over scalar parameters, in exact integer arithmetic.
fn eval_grid(k: &Kernel, e: &Expr, scalars: &[u64]) -> Result<i128, String> {
    let ovf = || "the grid size overflows".to_string();
    Ok(match e {
        Expr::Const(c) if c.ty.is_int() => {
            if c.ty.is_signed() {
                c.bits as i64 as i128
            } else {
                c.bits as i128
            }
        }
        Expr::Param(p) => match k.params.get(p.index()).map(|x| &x.kind) {
            Some(ParamKind::Scalar(t)) if t.is_int() => {
                let b = scalars.get(p.index()).copied().unwrap_or(0);
                if t.is_signed() {
                    b as i64 as i128
                } else {
                    b as i128
                }
            }
            _ => return Err(format!("parameter {p} is not an integer scalar")),
        },
        Expr::Cast { to, arg } if to.is_int() => eval_grid(k, arg, scalars)?,
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (eval_grid(k, lhs, scalars)?, eval_grid(k, rhs, scalars)?);
            match op {
                BinOp::Add => a.checked_add(b).ok_or_else(ovf)?,
                BinOp::Sub => a.checked_sub(b).ok_or_else(ovf)?,
                BinOp::Mul => a.checked_mul(b).ok_or_else(ovf)?,
                BinOp::Div => a.checked_div(b).ok_or("division by zero in the grid size")?,
                BinOp::Rem => a.checked_rem(b).ok_or("remainder by zero in the grid size")?,
                BinOp::Min => a.min(b),
                BinOp::Max => a.max(b),
                _ => return Err(format!("`{}` is not supported in a grid size", op.name())),
            }
        }
        other => return Err(format!("expected an integer expression over scalar parameters, found {other:?}")),
    })
}
