//! `[[inputs]]`: files fetched with the source so the build never downloads.

use serde::Serialize;

use crate::diag::reader::TableReader;
use crate::diag::{Diagnostic, Diagnostics};

use super::checks::{check_url, hex_problem, is_hex};

/// A file a build would otherwise download: a pip wheel, test data, a FetchContent archive.
/// Pinned by sha256 and mounted read-only at `/inputs/<name>` in the build.
///
/// Exactly one of `sha256` and `md5` is set. An `md5` (what some upstreams publish, e.g.
/// rocSPARSE's test matrices) is only a first-download check: `rocforge lock` downloads the
/// file, verifies the md5 and records its sha256 in rocforge.lock; fetches then verify that
/// sha256, and an md5 input without a lock entry is refused.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ExtraInput {
    pub name: String,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// Unpack a tar archive (.tar, .tar.gz, .tgz, .tar.zst) into a directory instead of
    /// keeping the file as it is.
    pub unpack: bool,
}

pub(super) fn read_inputs(
    tables: Vec<TableReader<'_, '_>>,
    d: &mut Diagnostics,
) -> Vec<ExtraInput> {
    let mut out: Vec<ExtraInput> = Vec::new();
    for mut t in tables {
        let file = t.file().clone();
        let before = d.len();
        let name = t.str(
            "name",
            d,
            "name the input; the build sees it at /inputs/<name>",
        );
        let url = t.str(
            "url",
            d,
            "url = \"https://…\" of the file the build would otherwise download",
        );
        let before_digest = d.len();
        let sha256 = t.opt_str("sha256", d);
        let md5 = t.opt_str("md5", d);
        if sha256.is_none() && md5.is_none() && d.len() == before_digest {
            t.missing(
                d,
                "sha256",
                "add sha256 = \"<64 hex digits>\" (`sha256sum FILE` prints it); when upstream publishes only an MD5, write md5 = \"<32 hex digits>\" and run `rocforge lock`, which records the sha256",
            );
        }
        let unpack = t.opt_bool("unpack", d).is_some_and(|b| b.value);
        t.finish(d);
        if let Some(n) = &name {
            if !is_input_name(n) {
                d.push(
                    Diagnostic::new(format!("invalid input name \"{}\"", n.value))
                        .at(&file, n.span.clone(), "not a plain file name")
                        .hint("input names are file names: letters, digits, '-', '_' and '.', not starting with '.'"),
                );
            } else if out.iter().any(|i| i.name == n.value) {
                d.push(
                    Diagnostic::new(format!("input \"{}\" is listed twice", n.value))
                        .at(&file, n.span.clone(), "second input of this name")
                        .hint("give each [[inputs]] entry its own name"),
                );
            }
        }
        if let Some(u) = &url {
            check_url(&file, u, d);
        }
        if let Some(sha) = &sha256
            && !is_hex(sha, 64)
        {
            d.push(
                Diagnostic::new(format!("malformed sha256 \"{}\"", sha.value))
                    .at(&file, sha.span.clone(), hex_problem(sha, 64))
                    .hint("copy the digest from `sha256sum FILE`"),
            );
        }
        if let Some(m) = &md5 {
            if sha256.is_some() {
                d.push(
                    Diagnostic::new("an input takes sha256 or md5, not both")
                        .at(&file, m.span.clone(), "md5 beside a sha256")
                        .hint("keep the sha256 and remove the md5: md5 is only for files whose upstream publishes nothing stronger"),
                );
            } else if !is_hex(m, 32) {
                d.push(
                    Diagnostic::new(format!("malformed md5 \"{}\"", m.value))
                        .at(&file, m.span.clone(), hex_problem(m, 32))
                        .hint("copy the digest upstream publishes, or `md5sum FILE` prints it"),
                );
            }
        }
        if d.len() > before {
            continue;
        }
        if let (Some(name), Some(url)) = (name, url) {
            out.push(ExtraInput {
                name: name.value,
                url: url.value,
                sha256: sha256.map(|s| s.value),
                md5: md5.map(|m| m.value),
                unpack,
            });
        }
    }
    out
}

/// An extra input's name: the file name the build sees under /inputs. Letters (either case:
/// upstream file names such as rocSPARSE's `Chebyshev4.tar.gz` keep theirs), digits, `-`, `_`
/// and `.`; not starting with `.`.
pub fn is_input_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
