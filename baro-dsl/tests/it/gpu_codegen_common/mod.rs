//! Shared helpers of the offline GPU code-generation tests: the kernel set, the expected
//! kernel ABI, LLVM tool discovery (a missing tool fails with the package to install, never a
//! silent skip), and a reader for the `amdhsa.kernels` metadata `llvm-readelf --notes` prints.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use baro_dsl::ir::{Kernel, ParamKind};

/// Every well-formed test kernel: each m=1 kernel and its rows sibling.
pub fn kernels() -> Vec<Kernel> {
    let mut out = Vec::new();
    for (rows, m1) in baro_dsl::testkernels::pairs() {
        out.push(m1);
        out.push(rows);
    }
    out
}

/// One expected entry parameter: name, byte size, AMDGPU value kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbiArg {
    pub name: String,
    pub size: u64,
    pub value_kind: &'static str,
}

/// The launcher's ABI: a buffer is (pointer, i64 length), a scalar one i64, then the error record pointer.
pub fn expected_abi(k: &Kernel) -> Vec<AbiArg> {
    let mut v = Vec::new();
    for p in &k.params {
        match p.kind {
            ParamKind::Buffer { .. } => {
                v.push(AbiArg { name: p.name.clone(), size: 8, value_kind: "global_buffer" });
                v.push(AbiArg { name: format!("{}_len", p.name), size: 8, value_kind: "by_value" });
            }
            ParamKind::Scalar(_) => v.push(AbiArg { name: p.name.clone(), size: 8, value_kind: "by_value" }),
        }
    }
    v.push(AbiArg { name: "error_record".into(), size: 8, value_kind: "global_buffer" });
    v
}

/// An LLVM 19 tool, or a failure naming the Debian package that provides it.
pub fn tool(name: &str, package: &str) -> PathBuf {
    for cand in [format!("/usr/bin/{name}"), format!("/usr/lib/llvm-19/bin/{}", name.trim_end_matches("-19"))] {
        let p = PathBuf::from(&cand);
        if p.is_file() {
            return p;
        }
    }
    if let Ok(out) = Command::new("which").arg(name).output() {
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !s.is_empty() {
            return PathBuf::from(s);
        }
    }
    panic!(
        "`{name}` not found: install Debian's `{package}` (apt-get install {package}); these offline checks never skip"
    )
}

pub fn run_tool(tool: &PathBuf, args: &[&str], file: &std::path::Path) -> String {
    let out =
        Command::new(tool).args(args).arg(file).output().unwrap_or_else(|e| panic!("running {}: {e}", tool.display()));
    assert!(
        out.status.success(),
        "{} {:?} {} failed: {}",
        tool.display(),
        args,
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One kernel's `amdhsa.kernels` entry: its scalar fields and its `.args`.
#[derive(Debug, Default)]
pub struct KernelMeta {
    pub fields: Vec<(String, String)>,
    pub args: Vec<Vec<(String, String)>>,
}

impl KernelMeta {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
    pub fn num(&self, key: &str) -> u64 {
        let v = self.get(key).unwrap_or_else(|| panic!("metadata has no `{key}`: {self:?}"));
        v.parse().unwrap_or_else(|_| panic!("metadata `{key}` = {v}: expected a number"))
    }
}

fn arg_get<'m>(arg: &'m [(String, String)], key: &str) -> Option<&'m str> {
    arg.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Reads the kernels of `llvm-readelf --notes` output (a YAML subset: the layout LLVM 19 prints).
pub fn parse_kernels(notes: &str) -> Vec<KernelMeta> {
    let mut kernels: Vec<KernelMeta> = Vec::new();
    let mut in_kernels = false;
    let mut in_args = false;
    for line in notes.lines() {
        if line.starts_with("amdhsa.kernels:") {
            in_kernels = true;
            continue;
        }
        if !in_kernels {
            continue;
        }
        if !line.starts_with(' ') && !line.is_empty() {
            break; // the next top-level key
        }
        let indent = line.len() - line.trim_start().len();
        let t = line.trim_start();
        let (t, new_item) = match t.strip_prefix("- ") {
            Some(rest) => (rest, true),
            None => (t, false),
        };
        let Some((k, v)) = t.split_once(':') else { continue };
        let v = v.trim().trim_start_matches("!str ").trim_matches('\'').to_string();
        let k = k.trim().to_string();
        if new_item && indent == 2 {
            kernels.push(KernelMeta::default());
            in_args = false;
        }
        let Some(cur) = kernels.last_mut() else { continue };
        if indent <= 4 && !(new_item && indent > 2) {
            if k == ".args" {
                in_args = true;
                continue;
            }
            in_args = false;
            cur.fields.push((k, v));
        } else if in_args {
            if new_item {
                cur.args.push(Vec::new());
            }
            if let Some(a) = cur.args.last_mut() {
                a.push((k, v));
            }
        }
    }
    kernels
}

/// Checks the `.args` of one kernel against the launcher's ABI; returns the explicit size.
pub fn check_args(k: &Kernel, meta: &KernelMeta) -> u64 {
    let want = expected_abi(k);
    assert!(
        meta.args.len() >= want.len(),
        "{}: {} args in metadata, expected at least {}: {:?}",
        k.name,
        meta.args.len(),
        want.len(),
        meta.args
    );
    let mut offset = 0u64;
    for (i, w) in want.iter().enumerate() {
        let a = &meta.args[i];
        let at = |key: &str| {
            arg_get(a, key).unwrap_or_else(|| panic!("{}: arg {i} has no `{key}`: {a:?}", k.name)).to_string()
        };
        assert_eq!(at(".name"), w.name, "{}: arg {i} name", k.name);
        assert_eq!(at(".offset").parse::<u64>().unwrap(), offset, "{}: arg {i} (`{}`) offset", k.name, w.name);
        assert_eq!(at(".size").parse::<u64>().unwrap(), w.size, "{}: arg {i} (`{}`) size", k.name, w.name);
        assert_eq!(at(".value_kind"), w.value_kind, "{}: arg {i} (`{}`) value kind", k.name, w.name);
        offset += w.size;
    }
    for a in &meta.args[want.len()..] {
        let kind = arg_get(a, ".value_kind").unwrap_or("");
        assert!(kind.starts_with("hidden_"), "{}: unexpected extra argument {a:?}", k.name);
    }
    offset
}

/// Float multiply-add instructions outside LLVM's correctly rounded division and square root
/// sequences (`v_div_scale` … `v_div_fixup` and `v_sqrt` … `v_cmp_class`, whose internal fmas
/// compute residuals of one IEEE operation, not a contraction of the kernel's arithmetic).
/// Both halves of a gfx11 dual-issue line (`v_dual_x :: v_dual_y`) are read, `v_dual_fmac_f32`
/// being an fma like `v_fmac_f32`.
pub fn stray_fmas(disasm: &str) -> Vec<String> {
    let mut in_div = false;
    let mut in_sqrt = false;
    let mut out = Vec::new();
    for line in disasm.lines() {
        let t = line.trim_start();
        let op = t.split_whitespace().next().unwrap_or("");
        let second = t.split_once("::").and_then(|(_, rest)| rest.split_whitespace().next()).unwrap_or("");
        if [op, second].iter().any(|o| o.starts_with("v_dual_") && (o.contains("fma") || o.contains("fmac")))
            && !in_div
            && !in_sqrt
        {
            out.push(t.to_string());
            continue;
        }
        if op.starts_with("v_div_scale_f") {
            in_div = true;
        }
        let float_fma = (op.starts_with("v_fma")
            || op.starts_with("v_fmac")
            || op.starts_with("v_mad")
            || op.starts_with("v_mac")
            || op.starts_with("v_pk_fma")
            || op.starts_with("v_dot"))
            && !op.contains("_u32")
            && !op.contains("_i32")
            && !op.contains("_u64")
            && !op.contains("_i64")
            && !op.contains("_u16")
            && !op.contains("_i16");
        if op.starts_with("v_sqrt_f32") {
            in_sqrt = true;
        }
        if float_fma && !in_div && !in_sqrt {
            out.push(t.to_string());
        }
        if op.starts_with("v_div_fixup_f") {
            in_div = false;
        }
        if op.starts_with("v_cmp_class_f32") {
            in_sqrt = false;
        }
    }
    out
}
