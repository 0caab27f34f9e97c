//! Tar archives unpacked into a tree, and the source dates read from an archive or a directory.

use std::path::Path;

use super::SourceError;

/// The newest mtime of a tar archive's entries (0 for an empty one): read from the headers,
/// as unpacking sets directories' times as it goes.
pub(super) fn newest_entry(component: &str, file: &Path) -> Result<i64, SourceError> {
    let err = |why: String| SourceError::Unpack {
        component: component.to_string(),
        what: file.display().to_string(),
        why,
    };
    let reader = crate::source::series::open_archive(file).map_err(|e| err(e.to_string()))?;
    let mut archive = tar::Archive::new(reader);
    let mut newest = 0u64;
    for entry in archive.entries().map_err(|e| err(e.to_string()))? {
        let entry = entry.map_err(|e| err(e.to_string()))?;
        newest = newest.max(entry.header().mtime().unwrap_or(0));
    }
    Ok(i64::try_from(newest).unwrap_or(i64::MAX))
}

/// The newest mtime of the files and symlinks under `dir` (0 when it holds none); times before
/// 1970 count as 0.
pub(super) fn newest_file(dir: &Path) -> std::io::Result<i64> {
    let mut newest = 0i64;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = std::fs::symlink_metadata(e.path())?;
        let t = if meta.is_dir() {
            newest_file(&e.path())?
        } else {
            use std::os::unix::fs::MetadataExt;
            meta.mtime()
        };
        newest = newest.max(t);
    }
    Ok(newest)
}

/// Unpacks a tar archive (plain, gzip or zstd, told apart by magic bytes). With `strip_top`, a
/// single top-level directory is removed, as source tarballs wrap everything in one.
/// The tar crate refuses absolute paths and `..` components while unpacking.
pub(super) fn unpack_tar(
    component: &str,
    file: &Path,
    dest: &Path,
    strip_top: bool,
) -> Result<(), SourceError> {
    let err = |why: String| SourceError::Unpack {
        component: component.to_string(),
        what: file.display().to_string(),
        why,
    };
    let reader = crate::source::series::open_archive(file).map_err(|e| err(e.to_string()))?;
    let unpacked = dest.join(".unpack");
    std::fs::create_dir_all(&unpacked).map_err(|e| err(e.to_string()))?;
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_overwrite(false);
    archive.unpack(&unpacked).map_err(|e| err(e.to_string()))?;
    let entries: Vec<_> = std::fs::read_dir(&unpacked)
        .map_err(|e| err(e.to_string()))?
        .flatten()
        .collect();
    // A Debian package's files sit at their installed paths (usr/…): nothing to strip.
    let strip_top = strip_top && !crate::source::series::is_deb(file);
    let root =
        if strip_top && entries.len() == 1 && entries[0].file_type().is_ok_and(|t| t.is_dir()) {
            entries[0].path()
        } else {
            unpacked.clone()
        };
    for e in std::fs::read_dir(&root)
        .map_err(|e| err(e.to_string()))?
        .flatten()
    {
        std::fs::rename(e.path(), dest.join(e.file_name())).map_err(|e| err(e.to_string()))?;
    }
    crate::fsutil::remove_tree(&unpacked).map_err(|e| err(e.to_string()))
}
