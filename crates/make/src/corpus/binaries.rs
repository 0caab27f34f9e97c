//! The binaries of an `each-binary` corpus: every executable a pattern names in a tree.

use std::path::{Path, PathBuf};

/// The executables an each-binary corpus names: every executable file (symlinks followed) in
/// `prefix/pattern`, or, when the last component of `pattern` holds `*` or `?`, in its
/// directory matching that component. Sorted by name; named by their path in the prefix.
pub fn find_binaries(prefix: &Path, pattern: &str) -> std::io::Result<Vec<(String, PathBuf)>> {
    use std::os::unix::fs::PermissionsExt;
    let (dir, glob) = match pattern.rsplit_once('/') {
        Some((d, last)) if last.contains(['*', '?']) => (d, Some(last)),
        None if pattern.contains(['*', '?']) => ("", Some(pattern)),
        _ => (pattern, None),
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(prefix.join(dir))? {
        let e = e?;
        let file = e.file_name().to_string_lossy().into_owned();
        if glob.is_some_and(|g| !wildcard(g.as_bytes(), file.as_bytes())) {
            continue;
        }
        // Following symlinks: a corpus directory may link to binaries installed elsewhere.
        let Ok(meta) = std::fs::metadata(e.path()) else {
            continue;
        };
        if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
            let name = if dir.is_empty() {
                file
            } else {
                format!("{dir}/{file}")
            };
            out.push((name, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// `*` (any run of characters) and `?` (one character) against a file name.
fn wildcard(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => wildcard(&p[1..], s) || (!s.is_empty() && wildcard(p, &s[1..])),
        (Some(b'?'), Some(_)) => wildcard(&p[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => wildcard(&p[1..], &s[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::wildcard;

    #[test]
    fn wildcards() {
        for (p, s, ok) in [
            ("hip_*", "hip_saxpy", true),
            ("hip_*", "rocblas_gemm", false),
            ("*", "", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*_test", "x_test", true),
            ("*_test", "x_test2", false),
        ] {
            assert_eq!(wildcard(p.as_bytes(), s.as_bytes()), ok, "{p} {s}");
        }
    }
}
