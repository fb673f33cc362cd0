//! What a library file is, read from its ELF section headers without
//! loading it: whether rustc built it, and whether as a Rust `dylib`. Used
//! only to make refusals and warnings say what to do; a file this cannot
//! read (not ELF: macOS, Windows) is simply "unknown".

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LibraryFacts {
    /// rustc built it (its `.comment` names rustc, or it has `.rustc` metadata).
    pub rust: bool,
    /// A Rust `dylib` (it carries a `.rustc` metadata section; a `cdylib` does not).
    pub rust_dylib: bool,
}

pub fn inspect(path: &Path) -> LibraryFacts {
    read_elf(path).unwrap_or_default()
}

/// Reads `n` bytes at `offset`, refusing absurd sizes from a corrupt header.
fn read_at(f: &mut File, offset: u64, n: u64) -> Option<Vec<u8>> {
    if n > 16 << 20 {
        return None;
    }
    f.seek(SeekFrom::Start(offset)).ok()?;
    let mut buf = vec![0; n as usize];
    f.read_exact(&mut buf).ok()?;
    Some(buf)
}

struct Elf {
    wide: bool,
    little: bool,
}

impl Elf {
    fn uint(&self, b: &[u8], at: usize, size: usize) -> Option<u64> {
        let bytes = b.get(at..at + size)?;
        let mut v = 0u64;
        for i in 0..size {
            let byte = if self.little {
                bytes[size - 1 - i]
            } else {
                bytes[i]
            };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    }
    fn word(&self, b: &[u8], at32: usize, at64: usize) -> Option<u64> {
        if self.wide {
            self.uint(b, at64, 8)
        } else {
            self.uint(b, at32, 4)
        }
    }
}

fn read_elf(path: &Path) -> Option<LibraryFacts> {
    let mut f = File::open(path).ok()?;
    let header = read_at(&mut f, 0, 64)?;
    if header.get(..4)? != b"\x7fELF" {
        return None;
    }
    let elf = Elf {
        wide: header[4] == 2,
        little: header[5] == 1,
    };
    let shoff = elf.word(&header, 0x20, 0x28)?;
    let (entsize_at, num_at, strndx_at) = if elf.wide {
        (0x3a, 0x3c, 0x3e)
    } else {
        (0x2e, 0x30, 0x32)
    };
    let entsize = elf.uint(&header, entsize_at, 2)?;
    let count = elf.uint(&header, num_at, 2)?;
    let strndx = elf.uint(&header, strndx_at, 2)?;
    let table = read_at(&mut f, shoff, entsize.checked_mul(count)?)?;
    // (name offset, file offset, size) of section `i`.
    let section = |i: u64| -> Option<(u64, u64, u64)> {
        let base = usize::try_from(i.checked_mul(entsize)?).ok()?;
        Some((
            elf.uint(&table, base, 4)?,
            elf.word(&table, base + 0x10, base + 0x18)?,
            elf.word(&table, base + 0x14, base + 0x20)?,
        ))
    };
    let (_, names_at, names_len) = section(strndx)?;
    let names = read_at(&mut f, names_at, names_len)?;
    let name_of = |off: u64| -> &[u8] {
        let rest = names.get(off as usize..).unwrap_or_default();
        &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())]
    };
    let mut facts = LibraryFacts::default();
    for i in 0..count {
        let Some((name, offset, size)) = section(i) else {
            continue;
        };
        match name_of(name) {
            b".rustc" => {
                facts.rust = true;
                facts.rust_dylib = true;
            }
            b".comment" => {
                if let Some(text) = read_at(&mut f, offset, size.min(64 << 10)) {
                    facts.rust |= text.windows(5).any(|w| w == b"rustc");
                }
            }
            _ => {}
        }
    }
    Some(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_and_missing_files_are_unknown() {
        let dir = std::env::temp_dir().join(format!("wf-inspect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let garbage = dir.join("garbage.so");
        std::fs::write(&garbage, b"\x7fELF not really").unwrap();
        assert_eq!(inspect(&garbage), LibraryFacts::default());
        assert_eq!(inspect(&dir.join("missing.so")), LibraryFacts::default());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_wf_binary_is_rust_and_not_a_dylib() {
        let exe = std::env::current_exe().unwrap();
        let facts = inspect(&exe);
        assert!(facts.rust, "{facts:?}");
        assert!(!facts.rust_dylib, "{facts:?}");
    }
}
