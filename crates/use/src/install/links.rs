//! Every library an install's ELF files link (DT_NEEDED) must be found once it is in place: in
//! what this install brings, in the prefix, or on this system. A tarball built against a library
//! its builder image had and no dependency of it carries (rocBLAS of the debian-6.4 line links
//! Debian's libroctx64) would otherwise install into a prefix where it cannot load; this names
//! the library, and who needs it, before anything in the prefix changes.
//!
//! The HIP runtime's libraries are left to the runtime check (runtime.rs), which knows where a
//! runtime may come from and what the index offers; glibc's own to the glibc check, which
//! compares versions, not names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::runtime::HOST_LIBS_ENV;
use crate::package::manifest::is_hip_runtime_lib;
use crate::package::tarball::file_dynamic_names;

/// The libraries glibc itself is made of: the glibc check (the host's version against each
/// artifact's floor) answers for them.
const GLIBC_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libmvec.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libresolv.so.2",
    "libanl.so.1",
    "libBrokenLocale.so.1",
    "libc_malloc_debug.so.0",
    "libthread_db.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
];

/// An ELF file an artifact of the install brings: its artifact's file name, and its path
/// relative to the staging directory.
pub(super) struct Staged<'a> {
    pub artifact: &'a str,
    pub path: &'a str,
}

/// A library nothing provides, with the first file (by artifact and path) that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub soname: String,
    pub artifact: String,
    pub path: String,
}

/// Where the libraries of this system were looked for, and the names found there.
pub struct HostLibraries {
    pub names: BTreeSet<String>,
    pub searched: Vec<String>,
}

/// The libraries the files of `staged` (under `staging`) need that neither the staging, the
/// prefix's library directories nor `host` provide, sorted by name. Files that cannot be read
/// are skipped: unpacking already checked each one.
pub(super) fn unresolved(
    staging: &Path,
    staged: &[Staged<'_>],
    prefix: &Path,
    host: &HostLibraries,
) -> Vec<Missing> {
    let mut provided: BTreeSet<String> = BTreeSet::new();
    for root in [staging, prefix] {
        for dir in ["lib", "lib64"] {
            provided.extend(file_names(&root.join(dir)));
        }
    }
    let mut needs: BTreeMap<String, (String, String)> = BTreeMap::new();
    for f in staged {
        let Ok(Some((soname, needed))) = file_dynamic_names(&staging.join(f.path)) else {
            continue;
        };
        provided.extend(soname);
        for n in needed {
            needs
                .entry(n)
                .or_insert_with(|| (f.artifact.to_string(), f.path.to_string()));
        }
    }
    needs
        .into_iter()
        .filter(|(n, _)| {
            !is_hip_runtime_lib(n)
                && !GLIBC_LIBS.contains(&n.as_str())
                && !provided.contains(n)
                && !host.names.contains(n)
        })
        .map(|(soname, (artifact, path))| Missing {
            soname,
            artifact,
            path,
        })
        .collect()
}

/// The file names in `dir` (none when it cannot be read).
fn file_names(dir: &Path) -> impl Iterator<Item = String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
}

/// The ld.so cache's entries (name, path), from the first `ldconfig -p` that runs; None when
/// none does.
pub(super) fn ld_cache() -> Option<Vec<(String, PathBuf)>> {
    for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
        let Ok(text) = crate::process::Cmd::new(ldconfig).arg("-p").run() else {
            continue;
        };
        // Lines look like "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1".
        return Some(
            text.lines()
                .filter_map(|l| {
                    let (name, rest) = l.trim_start().split_once(' ')?;
                    let (_, path) = rest.rsplit_once("=> ")?;
                    Some((name.to_string(), PathBuf::from(path.trim())))
                })
                .collect(),
        );
    }
    None
}

/// Where ROCm's libraries are besides the ld.so cache: `$ROCM_PATH/lib`, `/opt/rocm/lib` and
/// `$LD_LIBRARY_PATH`'s absolute directories.
pub(super) fn rocm_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(r) = std::env::var_os("ROCM_PATH") {
        dirs.push(PathBuf::from(r).join("lib"));
    }
    dirs.push(PathBuf::from("/opt/rocm/lib"));
    if let Some(l) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&l).filter(|p| p.is_absolute()));
    }
    dirs
}

/// The libraries of this system: the directories of `$ROCFORGE_HOST_LIBS` when it is set, else
/// the ld.so cache, the dynamic loader's default directories, and [`rocm_dirs`].
pub fn host_libraries() -> HostLibraries {
    let mut out = HostLibraries {
        names: BTreeSet::new(),
        searched: Vec::new(),
    };
    let dirs: Vec<PathBuf> = if let Some(v) = std::env::var_os(HOST_LIBS_ENV) {
        std::env::split_paths(&v).collect()
    } else {
        if let Some(cached) = ld_cache() {
            out.searched
                .push("the ld.so cache (ldconfig -p)".to_string());
            out.names.extend(cached.into_iter().map(|(n, _)| n));
        }
        let mut dirs: Vec<PathBuf> = [
            "/lib",
            "/usr/lib",
            "/lib64",
            "/usr/lib64",
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        dirs.extend(rocm_dirs());
        dirs
    };
    let mut seen = BTreeSet::new();
    for d in dirs {
        if d.is_dir() && seen.insert(d.clone()) {
            out.names.extend(file_names(&d));
            out.searched.push(d.display().to_string());
        }
    }
    out
}
