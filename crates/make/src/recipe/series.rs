//! `[[series]]`: patch series taken from archives other projects publish.

use serde::Serialize;

use crate::diag::reader::TableReader;
use crate::diag::{Diagnostic, Diagnostics};

use super::checks::{check_url, hex_problem, is_hex, path_problem};

/// A patch series taken by reference from an archive another project publishes (e.g. Debian's
/// `<pkg>_<version>.debian.tar.xz`): the archive is pinned by sha256, its `series` file is read
/// and the patches it lists are applied in order, so no such patch file is copied into the
/// catalog.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Series {
    pub url: String,
    pub sha256: String,
    /// The directory inside the archive that holds `series` and the patches.
    pub dir: String,
    /// When not empty: apply only these entries of `series`, in the series' order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    /// Entries of `series` not to apply.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
}

pub(super) fn read_series(tables: Vec<TableReader<'_, '_>>, d: &mut Diagnostics) -> Vec<Series> {
    let mut out = Vec::new();
    for mut t in tables {
        let file = t.file().clone();
        let before = d.len();
        let url = t.str(
            "url",
            d,
            "url = \"https://…/pkg_1.0-1.debian.tar.xz\": the archive that holds the series",
        );
        let sha256 = t.str(
            "sha256",
            d,
            "add sha256 = \"<64 hex digits>\" of the archive (a Debian .dsc or Sources index lists it)",
        );
        let dir = t.opt_str("dir", d);
        let only = t.opt_str_list("only", d).unwrap_or_default();
        let skip = t.opt_str_list("skip", d).unwrap_or_default();
        t.finish(d);
        if let Some(u) = &url {
            check_url(&file, u, d);
        }
        if let Some(sha) = &sha256
            && !is_hex(sha, 64)
        {
            d.push(
                Diagnostic::new(format!("malformed sha256 \"{}\"", sha.value))
                    .at(&file, sha.span.clone(), hex_problem(sha, 64))
                    .hint("copy the digest as `sha256sum FILE` prints it: 64 lowercase hex digits"),
            );
        }
        if let Some(dir) = &dir
            && let Some(problem) = path_problem(dir)
        {
            d.push(
                Diagnostic::new(format!(
                    "series dir \"{}\" must be a path inside the archive",
                    dir.value
                ))
                .at(&file, dir.span.clone(), problem)
                .hint("e.g. dir = \"debian/patches\""),
            );
        }
        if let (Some(o), Some(s)) = (only.first(), skip.first()) {
            d.push(
                Diagnostic::new("a series takes only or skip, not both")
                    .at(&file, s.span.clone(), "skip beside only")
                    .related(&file, o.span.clone(), "only given here")
                    .hint("list the entries to apply in only, or the ones to leave out in skip"),
            );
        }
        for n in only.iter().chain(&skip) {
            if n.is_empty() || n.contains("..") || n.starts_with('/') {
                d.push(
                    Diagnostic::new(format!("series entry \"{}\" is not a patch name", n.value))
                        .at(&file, n.span.clone(), "not an entry of a series file")
                        .hint("write the entry as the series file lists it, e.g. \"fix-hiprtc-link.patch\""),
                );
            }
        }
        if d.len() > before {
            continue;
        }
        if let (Some(url), Some(sha256)) = (url, sha256) {
            out.push(Series {
                url: url.value,
                sha256: sha256.value,
                dir: dir.map_or_else(|| "debian/patches".to_string(), |d| d.value),
                only: only.into_iter().map(|s| s.value).collect(),
                skip: skip.into_iter().map(|s| s.value).collect(),
            });
        }
    }
    out
}
