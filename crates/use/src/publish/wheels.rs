//! A PEP 503 "simple" index per GPU target for the wheels of a release directory, so
//! `pip install --index-url https://…/gfx90c/ torch` finds the right build:
//! `<dir>/<target>/index.html` lists the projects, `<dir>/<target>/<project>/index.html` links
//! each wheel (`../../<file>#sha256=…`, the wheels staying beside the tarballs).
//!
//! A wheel's targets come from its local version label (`torch-2.6.0+rocm6.4.4.gfx90c-…`:
//! the `gfx…` segments); a wheel that names none (a pure-Python dependency) is listed in every
//! target's index. The targets are those the wheels name, and those of the release index.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::PublishError;

/// The `.whl` files directly in `dir`, sorted.
pub fn wheel_files(dir: &Path) -> Result<Vec<PathBuf>, PublishError> {
    let rd = std::fs::read_dir(dir).map_err(|source| PublishError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let is_wheel = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".whl") && !n.starts_with('.'));
        if !is_wheel {
            continue;
        }
        // Not followed: a link's target would be hashed, listed and uploaded in its place.
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_file() => out.push(p),
            Ok(m) => {
                let what = if m.file_type().is_symlink() {
                    format!(
                        "a symlink (to {})",
                        std::fs::read_link(&p).map_or("?".into(), |t| t.display().to_string())
                    )
                } else {
                    "not a regular file".into()
                };
                return Err(PublishError::Invalid {
                    path: p.display().to_string(),
                    message: format!("{what}: a wheel must be a regular file of the directory"),
                });
            }
            Err(source) => return Err(PublishError::Io { path: p, source }),
        }
    }
    out.sort();
    Ok(out)
}

/// A wheel file name's parts: normalized project name, version, and the GPU targets its local
/// version label names.
pub fn parse_wheel_name(file: &str) -> Option<(String, String, Vec<String>)> {
    let stem = file.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() != 5 && parts.len() != 6 {
        return None;
    }
    let (name, version) = (parts[0], parts[1]);
    if name.is_empty() || version.is_empty() {
        return None;
    }
    let targets = version
        .split_once('+')
        .map(|(_, local)| {
            local
                .split(['.', '_'])
                .filter(|s| s.starts_with("gfx") && s.len() > 3)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Some((normalize(name), version.to_string(), targets))
}

/// PEP 503 name normalization: runs of `-_.` become `-`, lower case.
pub fn normalize(name: &str) -> String {
    let mut out = String::new();
    let mut sep = false;
    for c in name.chars() {
        if "-_.".contains(c) {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// What a wheel file name keeps unencoded in a link: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the per-target indexes into `dir` for its wheels; returns the index files written
/// (none without wheels). `extra_targets`: the release's targets (from its index.json).
pub fn write_index(dir: &Path, extra_targets: &[String]) -> Result<Vec<PathBuf>, PublishError> {
    write_pages(&pages(dir, extra_targets)?)
}

/// Writes `pages` (what [`pages`] made); returns their paths.
pub fn write_pages(pages: &[(PathBuf, String)]) -> Result<Vec<PathBuf>, PublishError> {
    for (path, text) in pages {
        write(path, text)?;
    }
    Ok(pages.iter().map(|(p, _)| p.clone()).collect())
}

/// The per-target index pages for the wheels in `dir` (path, HTML), none without wheels;
/// nothing is written.
pub fn pages(dir: &Path, extra_targets: &[String]) -> Result<Vec<(PathBuf, String)>, PublishError> {
    let wheels = wheel_files(dir)?;
    if wheels.is_empty() {
        return Ok(Vec::new());
    }
    let mut parsed = Vec::new();
    let mut targets: BTreeSet<String> = extra_targets.iter().cloned().collect();
    for w in &wheels {
        let file = w
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let (project, _, wt) = parse_wheel_name(&file).ok_or_else(|| PublishError::Invalid {
            path: w.display().to_string(),
            message: "not a wheel file name (name-version[-build]-python-abi-platform.whl)".into(),
        })?;
        let (sha, _) = super::sha256_file(w)?;
        targets.extend(wt.iter().cloned());
        parsed.push((file, project, wt, sha));
    }
    if targets.is_empty() {
        targets.insert("any".into());
    }
    let mut out = Vec::new();
    for t in &targets {
        // project → [(file, sha)]
        let mut projects: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
        for (file, project, wt, sha) in &parsed {
            if wt.is_empty() || wt.contains(t) {
                projects
                    .entry(project.as_str())
                    .or_default()
                    .push((file.as_str(), sha.as_str()));
            }
        }
        let tdir = dir.join(t);
        let mut root = String::from(
            "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>rocforge wheels</title></head><body>\n",
        );
        for (project, files) in &projects {
            let p = html_escape(project);
            root += &format!("<a href=\"{p}/\">{p}</a><br>\n");
            let mut page = format!(
                "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>Links for {p}</title></head><body>\n<h1>Links for {p}</h1>\n"
            );
            for (file, sha) in files {
                let f = html_escape(file);
                // `+` (a local version label) and anything else outside a path segment's safe
                // set is percent-encoded, as PEP 503 links are read as URLs.
                let href = percent_encoding::utf8_percent_encode(file, SEGMENT).to_string();
                page += &format!("<a href=\"../../{href}#sha256={sha}\">{f}</a><br>\n");
            }
            page += "</body></html>\n";
            out.push((tdir.join(project).join("index.html"), page));
        }
        root += "</body></html>\n";
        out.push((tdir.join("index.html"), root));
    }
    Ok(out)
}

fn write(path: &Path, text: &str) -> Result<(), PublishError> {
    let io = |source| PublishError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).map_err(io)?;
    crate::fsutil::write_atomic(path, text.as_bytes()).map_err(io)?;
    crate::sign::readable(path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_percent_encoded_and_a_symlinked_wheel_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let name = "torch-2.6.0+rocm6.4.gfx90c-cp313-cp313-linux_x86_64.whl";
        std::fs::write(d.path().join(name), b"wheel").unwrap();
        let pages = pages(d.path(), &[]).unwrap();
        let (_, page) = pages
            .iter()
            .find(|(p, _)| p.ends_with("gfx90c/torch/index.html"))
            .unwrap();
        assert!(
            page.contains(
                "href=\"../../torch-2.6.0%2Brocm6.4.gfx90c-cp313-cp313-linux_x86_64.whl#sha256="
            ),
            "{page}"
        );
        assert!(page.contains(&format!(">{name}</a>")), "{page}");
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("evil-1.0-py3-none-any.whl"))
            .unwrap();
        let e = wheel_files(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("evil-1.0-py3-none-any.whl") && e.contains("a symlink (to /etc/passwd)"),
            "{e}"
        );
    }

    #[test]
    fn wheel_names() {
        assert_eq!(
            parse_wheel_name("torch-2.6.0+rocm6.4.4.gfx90c-cp311-cp311-linux_x86_64.whl"),
            Some((
                "torch".into(),
                "2.6.0+rocm6.4.4.gfx90c".into(),
                vec!["gfx90c".into()]
            ))
        );
        assert_eq!(
            parse_wheel_name("Typing_Extensions-4.0-py3-none-any.whl")
                .unwrap()
                .0,
            "typing-extensions"
        );
        assert!(parse_wheel_name("x.whl").is_none());
        assert_eq!(normalize("Foo.Bar__baz"), "foo-bar-baz");
    }
}
