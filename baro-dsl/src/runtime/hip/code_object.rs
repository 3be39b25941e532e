//! Checks that bytes are a loadable AMDGPU code object before `hipModuleLoadData` sees them.
//!
//! `hipModuleLoadData` takes a bare pointer and learns the image's size from the ELF headers
//! it finds there, so handing it anything else (PTX text, a truncated file) would let the
//! runtime read past the end of our buffer. This module proves, from the bytes alone, that
//! every header, program segment and section the runtime may read lies inside the image.
//! It only reads; it never repairs or rewrites an image.

/// `e_machine` of an AMDGPU ELF.
const EM_AMDGPU: u16 = 224;
/// `e_type` of a shared object (what `ld.lld -shared` links a code object into).
const ET_DYN: u16 = 3;
/// `sh_type` of a section that occupies no file space (`.bss`).
const SHT_NOBITS: u32 = 8;
const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const SHDR_SIZE: usize = 64;

/// Why `image` is not a code object HIP can load, or `Ok` if every part of it is in bounds.
pub(crate) fn check(image: &[u8]) -> Result<(), String> {
    if image.len() < EHDR_SIZE || &image[..4] != b"\x7fELF" {
        let head: Vec<String> = image.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(format!(
            "expected an ELF code object (7f 45 4c 46...), found {} bytes starting {}",
            image.len(),
            head.join(" ")
        ));
    }
    if image[4] != 2 || image[5] != 1 {
        return Err(format!("expected a 64-bit little-endian ELF, found class {} data {}", image[4], image[5]));
    }
    let e_type = u16_at(image, 16)?;
    let machine = u16_at(image, 18)?;
    if machine != EM_AMDGPU {
        return Err(format!("expected an AMDGPU ELF (machine {EM_AMDGPU}), found machine {machine}"));
    }
    if e_type != ET_DYN {
        return Err(format!(
            "expected a linked code object (ELF type {ET_DYN}, shared object), found ELF type {e_type}"
        ));
    }
    let (phoff, shoff) = (u64_at(image, 32)?, u64_at(image, 40)?);
    let (phentsize, phnum) = (u16_at(image, 54)? as usize, u16_at(image, 56)? as u64);
    let (shentsize, shnum) = (u16_at(image, 58)? as usize, u16_at(image, 60)? as u64);
    if phnum > 0 && phentsize != PHDR_SIZE {
        return Err(format!("expected program headers of {PHDR_SIZE} bytes, found {phentsize}"));
    }
    if shnum > 0 && shentsize != SHDR_SIZE {
        return Err(format!("expected section headers of {SHDR_SIZE} bytes, found {shentsize}"));
    }
    in_bounds(image, "program header table", phoff, phnum * PHDR_SIZE as u64)?;
    in_bounds(image, "section header table", shoff, shnum * SHDR_SIZE as u64)?;
    for i in 0..phnum {
        let h = offset(phoff + i * PHDR_SIZE as u64)?;
        in_bounds(image, &format!("program segment {i}"), u64_at(image, h + 8)?, u64_at(image, h + 32)?)?;
    }
    for i in 0..shnum {
        let h = offset(shoff + i * SHDR_SIZE as u64)?;
        if u32_at(image, h + 4)? != SHT_NOBITS {
            in_bounds(image, &format!("section {i}"), u64_at(image, h + 24)?, u64_at(image, h + 32)?)?;
        }
    }
    Ok(())
}

fn in_bounds(image: &[u8], what: &str, start: u64, len: u64) -> Result<(), String> {
    match start.checked_add(len) {
        Some(end) if end <= image.len() as u64 => Ok(()),
        _ => Err(format!(
            "expected the {what} (offset {start}, {len} bytes) inside the {}-byte image, found it past the end",
            image.len()
        )),
    }
}

fn offset(v: u64) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("ELF offset {v} does not fit in memory"))
}

fn bytes_at<const N: usize>(image: &[u8], at: usize) -> Result<[u8; N], String> {
    at.checked_add(N)
        .and_then(|end| image.get(at..end))
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| format!("expected {N} bytes at offset {at}, found a {}-byte image", image.len()))
}

fn u16_at(image: &[u8], at: usize) -> Result<u16, String> {
    bytes_at(image, at).map(u16::from_le_bytes)
}
fn u32_at(image: &[u8], at: usize) -> Result<u32, String> {
    bytes_at(image, at).map(u32::from_le_bytes)
}
fn u64_at(image: &[u8], at: usize) -> Result<u64, String> {
    bytes_at(image, at).map(u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal AMDGPU shared-object header with one section of `sec_len` bytes at 128.
    fn image(sec_len: u64) -> Vec<u8> {
        let mut b = vec![0u8; 256];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[16..18].copy_from_slice(&ET_DYN.to_le_bytes());
        b[18..20].copy_from_slice(&EM_AMDGPU.to_le_bytes());
        b[40..48].copy_from_slice(&64u64.to_le_bytes()); // shoff
        b[58..60].copy_from_slice(&(SHDR_SIZE as u16).to_le_bytes());
        b[60..62].copy_from_slice(&1u16.to_le_bytes());
        let h = 64;
        b[h + 4..h + 8].copy_from_slice(&1u32.to_le_bytes()); // PROGBITS
        b[h + 24..h + 32].copy_from_slice(&128u64.to_le_bytes());
        b[h + 32..h + 40].copy_from_slice(&sec_len.to_le_bytes());
        b
    }

    #[test]
    fn a_well_formed_header_passes() {
        assert_eq!(check(&image(128)), Ok(()));
    }

    #[test]
    fn a_section_past_the_end_is_rejected() {
        let e = check(&image(129)).unwrap_err();
        assert!(e.contains("section 0 (offset 128, 129 bytes) inside the 256-byte image"), "{e}");
        let e = check(&image(u64::MAX)).unwrap_err();
        assert!(e.contains("past the end"), "{e}");
    }

    #[test]
    fn ptx_text_and_short_images_are_rejected() {
        let e = check(b"//\n// Generated by LLVM NVPTX Back-End\n.version 8.0\n.target sm_90\n").unwrap_err();
        assert!(e.starts_with("expected an ELF code object"), "{e}");
        assert!(check(b"\x7fELF").unwrap_err().contains("found 4 bytes"));
        assert!(check(&[]).is_err());
    }

    #[test]
    fn other_machines_and_unlinked_objects_are_rejected() {
        let mut x86 = image(0);
        x86[18..20].copy_from_slice(&62u16.to_le_bytes());
        assert!(check(&x86).unwrap_err().contains("found machine 62"));
        let mut rel = image(0);
        rel[16..18].copy_from_slice(&1u16.to_le_bytes());
        assert!(check(&rel).unwrap_err().contains("found ELF type 1"));
    }
}
