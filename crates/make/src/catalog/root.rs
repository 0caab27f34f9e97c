//! Where a catalog's files come from, the built-in tree or a `recipes/` directory, and which
//! release lines it holds.

use std::io;
use std::path::{Path, PathBuf};

use super::embedded::{EMBEDDED_LOCK, EMBEDDED_PATCHES, EMBEDDED_RECIPES};
use super::lock;
use crate::recipe::release::RELEASE_FILE;

/// Where recipe and patch files come from.
#[derive(Debug, Clone)]
pub enum CatalogRoot {
    Embedded,
    /// A `recipes/` directory; patches resolve from its sibling `patches/`.
    Dir(PathBuf),
}

impl CatalogRoot {
    fn patches_dir(recipes: &Path) -> PathBuf {
        recipes.parent().unwrap_or(Path::new(".")).join("patches")
    }

    /// The path a user sees for a file under `recipes/`.
    pub fn display(&self, rel: &str) -> String {
        match self {
            CatalogRoot::Embedded => format!("<built-in>/recipes/{rel}"),
            CatalogRoot::Dir(dir) => display_path(&dir.join(rel)),
        }
    }

    /// The directory holding recipes/, patches/, rocforge.toml and rocforge.lock; None for
    /// the built-in catalog.
    pub fn base_dir(&self) -> Option<PathBuf> {
        match self {
            CatalogRoot::Embedded => None,
            CatalogRoot::Dir(dir) => Some(
                dir.canonicalize()
                    .unwrap_or_else(|_| dir.clone())
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from(".")),
            ),
        }
    }

    /// The catalog's lockfile: rocforge.lock beside recipes/, or the embedded one.
    pub fn lockfile(&self) -> Result<lock::Lockfile, lock::LockError> {
        use lock::{LOCK_FILE, Lockfile};
        match self.base_dir() {
            None => Lockfile::parse("<built-in>/rocforge.lock", EMBEDDED_LOCK),
            Some(base) => Lockfile::read(&base.join(LOCK_FILE)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            CatalogRoot::Embedded => "the built-in catalog".into(),
            CatalogRoot::Dir(dir) => display_path(dir),
        }
    }

    pub fn read(&self, rel: &str) -> io::Result<String> {
        match self {
            CatalogRoot::Embedded => EMBEDDED_RECIPES
                .get_file(rel)
                .and_then(|f| f.contents_utf8())
                .map(str::to_owned)
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "not in the built-in catalog")
                }),
            CatalogRoot::Dir(dir) => std::fs::read_to_string(dir.join(rel)),
        }
    }

    /// Release lines: directories with a release.toml, sorted by name.
    pub fn releases(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        match self {
            CatalogRoot::Embedded => {
                for d in EMBEDDED_RECIPES.dirs() {
                    if d.get_file(d.path().join(RELEASE_FILE)).is_some() {
                        out.push(d.path().to_string_lossy().into_owned());
                    }
                }
            }
            CatalogRoot::Dir(dir) => {
                for entry in std::fs::read_dir(dir)? {
                    let entry = entry?;
                    if entry.path().join(RELEASE_FILE).is_file() {
                        out.push(entry.file_name().to_string_lossy().into_owned());
                    }
                }
            }
        }
        out.sort_by(|a, b| version_order(a, b));
        Ok(out)
    }

    /// The line used when none is named: the newest one that is no preview (its release.toml
    /// records what was built from it, `built = [...]`, and does not say `preview = true`), or
    /// the newest of all when every line is a preview. A release.toml that does not parse
    /// counts as no preview; loading that line reports its problems.
    pub fn default_release(&self) -> io::Result<Option<String>> {
        let releases = self.releases()?;
        let is_preview = |name: &str| {
            self.read(&format!("{name}/{RELEASE_FILE}"))
                .ok()
                .and_then(|text| text.parse::<toml::Table>().ok())
                .is_some_and(|t| {
                    let built = t
                        .get("built")
                        .and_then(toml::Value::as_array)
                        .is_some_and(|b| !b.is_empty());
                    t.get("preview")
                        .and_then(toml::Value::as_bool)
                        .unwrap_or(!built)
                })
        };
        Ok(releases
            .iter()
            .rev()
            .find(|r| !is_preview(r))
            .or(releases.last())
            .cloned())
    }

    /// Recipe files of a release line (every `.toml` beside release.toml), sorted.
    pub fn recipe_files(&self, release: &str) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        match self {
            CatalogRoot::Embedded => {
                if let Some(d) = EMBEDDED_RECIPES.get_dir(release) {
                    for f in d.files() {
                        out.push(
                            f.path()
                                .file_name()
                                .unwrap_or_default()
                                .to_string_lossy()
                                .into_owned(),
                        );
                    }
                }
            }
            CatalogRoot::Dir(dir) => {
                for entry in std::fs::read_dir(dir.join(release))? {
                    out.push(entry?.file_name().to_string_lossy().into_owned());
                }
            }
        }
        out.retain(|f| f.ends_with(".toml") && f != RELEASE_FILE);
        out.sort();
        Ok(out)
    }

    pub fn patch_display(&self, release: &str, component: &str, name: &str) -> String {
        match self {
            CatalogRoot::Embedded => format!("<built-in>/patches/{release}/{component}/{name}"),
            CatalogRoot::Dir(dir) => display_path(
                &Self::patches_dir(dir)
                    .join(release)
                    .join(component)
                    .join(name),
            ),
        }
    }

    pub fn read_patch(&self, release: &str, component: &str, name: &str) -> io::Result<Vec<u8>> {
        let rel = format!("{release}/{component}/{name}");
        match self {
            CatalogRoot::Embedded => EMBEDDED_PATCHES
                .get_file(&rel)
                .map(|f| f.contents().to_vec())
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "not in the built-in catalog")
                }),
            CatalogRoot::Dir(dir) => std::fs::read(Self::patches_dir(dir).join(rel)),
        }
    }

    /// Patch files that exist for a component, for "did you mean" hints.
    pub fn patch_names(&self, release: &str, component: &str) -> Vec<String> {
        let rel = format!("{release}/{component}");
        let mut out: Vec<String> = match self {
            CatalogRoot::Embedded => EMBEDDED_PATCHES
                .get_dir(&rel)
                .map(|d| {
                    d.files()
                        .filter_map(|f| {
                            f.path()
                                .file_name()
                                .map(|n| n.to_string_lossy().into_owned())
                        })
                        .collect()
                })
                .unwrap_or_default(),
            CatalogRoot::Dir(dir) => std::fs::read_dir(Self::patches_dir(dir).join(rel))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
        };
        out.sort();
        out
    }
}

/// Orders release names so that `rocm-6.10` sorts after `rocm-6.9`.
fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(s: &str) -> Vec<(u64, String)> {
        s.split(['.', '-'])
            .map(|p| (p.parse().unwrap_or(0), p.to_string()))
            .collect()
    }
    key(a).cmp(&key(b))
}

/// Relative to the working directory when below it, so messages stay short and stable.
pub fn display_path(p: &Path) -> String {
    if let Ok(cwd) = std::env::current_dir()
        && let Ok(rel) = p.strip_prefix(&cwd)
    {
        return rel.display().to_string();
    }
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(recipes: &Path, name: &str, preview: &str) {
        let dir = recipes.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(RELEASE_FILE),
            format!("name = \"{name}\"\nversion = \"1\"\nimage = \"x\"\nprefix = \"/opt/rocm\"\n{preview}"),
        )
        .unwrap();
    }

    #[test]
    fn the_default_line_is_the_newest_that_has_been_built() {
        let dir = tempfile::tempdir().unwrap();
        let recipes = dir.path().join("recipes");
        line(&recipes, "rocm-6.9", "built = [\"a\"]\n");
        line(&recipes, "rocm-6.10", "preview = false\nbuilt = [\"a\"]\n");
        line(&recipes, "rocm-7.14.0", "preview = true\n");
        // Nothing recorded as built: a preview, though it does not say so.
        line(&recipes, "rocm-7.15", "");
        line(&recipes, "rocm-7.16", "built = []\n");
        let root = CatalogRoot::Dir(recipes.clone());
        assert_eq!(
            root.default_release().unwrap().as_deref(),
            Some("rocm-6.10")
        );
        // Every line a preview: the newest of them.
        line(&recipes, "rocm-6.9", "preview = true\nbuilt = [\"a\"]\n");
        line(&recipes, "rocm-6.10", "preview = true\n");
        assert_eq!(
            root.default_release().unwrap().as_deref(),
            Some("rocm-7.16")
        );
        // An unreadable release.toml is no preview; loading that line reports it.
        line(&recipes, "rocm-6.10", "preview = \n");
        assert_eq!(
            root.default_release().unwrap().as_deref(),
            Some("rocm-6.10")
        );
    }
}
