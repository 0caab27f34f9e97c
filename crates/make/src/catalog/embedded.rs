//! The catalog compiled into the binary, and `catalog export`, which writes it out.

use std::io;
use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};

use super::display_path;

pub(super) static EMBEDDED_RECIPES: Dir<'static> =
    include_dir!("$CARGO_MANIFEST_DIR/../../recipes");
pub(super) static EMBEDDED_PATCHES: Dir<'static> =
    include_dir!("$CARGO_MANIFEST_DIR/../../patches");
/// The shipped catalog's lockfile, embedded with it.
pub static EMBEDDED_LOCK: &str = include_str!("../../../../rocforge.lock");

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{path} already exists and is not empty")]
    NotEmpty { path: String },
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Writes the built-in catalog to `dest` (recipes/ and patches/), atomically: a crash leaves
/// either nothing or the whole tree.
pub fn export_embedded(dest: &Path) -> Result<Vec<PathBuf>, ExportError> {
    let io_err = |path: &Path| {
        let path = display_path(path);
        move |source| ExportError::Io { path, source }
    };
    if dest.exists()
        && std::fs::read_dir(dest)
            .map_err(io_err(dest))?
            .next()
            .is_some()
    {
        return Err(ExportError::NotEmpty {
            path: display_path(dest),
        });
    }
    let staged = crate::fsutil::Staged::dir_beside(dest).map_err(io_err(dest))?;
    let tmp = staged.path().to_path_buf();
    let mut written = Vec::new();
    for (sub, dir) in [
        ("recipes", &EMBEDDED_RECIPES),
        ("patches", &EMBEDDED_PATCHES),
    ] {
        write_dir(dir, &tmp.join(sub), &mut written).map_err(io_err(&tmp))?;
    }
    staged.commit_over_empty().map_err(io_err(dest))?;
    Ok(written
        .into_iter()
        .map(|p| dest.join(p.strip_prefix(&tmp).unwrap_or(&p)))
        .collect())
}

/// A `path` source of the built-in catalog: the directory `recipes/<release>/<path>` compiled
/// into the binary, so a line's own programs build from any directory as its recipes do.
/// `..` steps out of the line's directory as on disk (a based line's recipe names its base
/// line's directory so); nothing leaves `recipes/`.
pub fn embedded_path_source(release: &str, path: &str) -> Option<&'static Dir<'static>> {
    let mut rel = PathBuf::new();
    for c in Path::new(release).join(path).components() {
        match c {
            std::path::Component::Normal(n) => rel.push(n),
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if rel.pop() => {}
            _ => return None,
        }
    }
    EMBEDDED_RECIPES.get_dir(rel)
}

/// Writes a directory of the built-in catalog to `dest` (files mode 0644, as `catalog export`).
pub fn write_embedded(dir: &Dir<'_>, dest: &Path) -> io::Result<()> {
    write_dir(dir, dest, &mut Vec::new())
}

fn write_dir(dir: &Dir<'_>, dest: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for f in dir.files() {
        let name = f.path().file_name().unwrap_or_default();
        let p = dest.join(name);
        std::fs::write(&p, f.contents())?;
        written.push(p);
    }
    for sub in dir.dirs() {
        let name = sub.path().file_name().unwrap_or_default();
        write_dir(sub, &dest.join(name), written)?;
    }
    Ok(())
}
