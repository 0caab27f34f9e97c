//! `report`: results bundles from files, the directories `rocforge test` wrote, or an OCI
//! repository volunteers submitted to, compiled into one HTML page and one markdown summary.
//! A pulled bundle counts only when a trusted key signed it (or, with `allow_unsigned`, when
//! it carries no signature at all); one whose signature fails is always left out.

use std::path::{Path, PathBuf};

use super::{Error, Options, Result};
use crate::diag::Hint;
use crate::report;
use crate::testrun::bundle::Bundle;
use crate::testrun::share;

/// What `report` is asked for.
pub struct Request<'a> {
    /// results.json files, directories holding them, or `oci://REGISTRY/REPO`.
    pub results: &'a [PathBuf],
    pub out: &'a Path,
    /// Public keys trusted besides the configuration's (RW… or a .pub file).
    pub keys: &'a [String],
    pub allow_unsigned: bool,
    /// Where the configuration (its `[trust] keys`) is read from.
    pub options: &'a Options,
}

/// Each pulled artifact's reference with its verdict.
type Verdicts = Vec<(String, Verdict)>;

/// What became of one pulled results artifact.
#[derive(Debug, Clone)]
pub enum Verdict {
    Signed {
        key_id: String,
    },
    /// Its signature did not verify against a trusted key.
    Refused {
        why: String,
    },
    UnsignedIncluded,
    UnsignedLeftOut,
}

/// The results pulled from one repository, each with its verdict.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub from: String,
    pub artifacts: Verdicts,
}

impl Pulled {
    /// Signed by trusted keys, unsigned included, left out.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for (_, v) in &self.artifacts {
            match v {
                Verdict::Signed { .. } => c.0 += 1,
                Verdict::UnsignedIncluded => c.1 += 1,
                Verdict::Refused { .. } | Verdict::UnsignedLeftOut => c.2 += 1,
            }
        }
        c
    }
}

/// The report's two files.
pub struct Written {
    pub html: PathBuf,
    pub markdown: PathBuf,
}

/// Reads every bundle, pulls and checks the remote ones (`pulled` sees each repository's
/// verdicts before a repository that yields nothing fails the report), and writes the report.
pub fn report(req: &Request<'_>, pulled: &mut dyn FnMut(&Pulled)) -> Result<Written> {
    let mut bundles = Vec::new();
    let mut client = None;
    let mut trust: Option<crate::trust::Resolved> = None;
    for r in req.results {
        let text = r.to_string_lossy();
        if text.starts_with("oci://") {
            let repo = crate::oci::Repository::parse(&text)
                .map_err(|e| hinted(share::ShareError::Oci(e)))?;
            if client.is_none() {
                client = Some(crate::publish::client()?);
            }
            // Pulled bundles go to disk beside the report, not to memory (nor to a /tmp that
            // may be memory).
            let pulls = pull_dir(req.out)?;
            let artifacts =
                share::pull_all(client.as_ref().expect("just set"), &repo, pulls.path())
                    .map_err(hinted)?;
            if artifacts.is_empty() {
                return Err(Error::hinted(
                    format!(
                        "{text} holds no results artifacts (tags {}*)",
                        share::TAG_PREFIX
                    ),
                    "submit results there first: `rocforge test COMPONENT --arch T --submit oci://…`",
                ));
            }
            if trust.is_none() {
                let roots = super::install::trusted_keys(req.options, req.keys)?;
                let state = crate::trust::StateFile::load_default()?;
                trust = Some(crate::trust::Resolved::from_roots(&roots, &state.state));
            }
            let trust = trust.as_ref().expect("just set");
            let (found, verdicts) = trusted(artifacts, trust, req.allow_unsigned)?;
            let seen = Pulled {
                from: text.to_string(),
                artifacts: verdicts,
            };
            pulled(&seen);
            if found.is_empty() {
                return Err(Error::hinted(
                    format!("{text}: no results artifact is signed by a trusted key"),
                    "trust the submitters' public keys with --key RW… (or [trust] keys in rocforge.toml), or pass --allow-unsigned to read unsigned ones",
                ));
            }
            bundles.extend(found);
            continue;
        }
        if r.is_dir() {
            bundles.extend(report::load_dir(r)?);
            continue;
        }
        bundles.push(report::load(r)?);
    }
    write(&bundles, req.out)
}

fn hinted(e: share::ShareError) -> Error {
    Error::hinted(&e, e.hint())
}

/// A scratch directory beside `out` for the pulled results.
fn pull_dir(out: &Path) -> Result<tempfile::TempDir> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    tempfile::Builder::new()
        .prefix(".rocforge-pull-")
        .tempdir_in(&parent)
        .map_err(|e| {
            Error::hinted(
                format!("cannot write in {}: {e}", parent.display()),
                "check free disk space and permissions",
            )
        })
}

/// The pulled results a trusted key signed, and the unsigned ones when allowed, with a
/// verdict for each.
fn trusted(
    pulled: Vec<share::Pulled>,
    trust: &crate::trust::Resolved,
    allow_unsigned: bool,
) -> Result<(Vec<Bundle>, Verdicts)> {
    let mut bundles = Vec::new();
    let mut verdicts = Vec::new();
    for p in pulled {
        let results = crate::fsutil::read_regular(&p.results, share::MAX_RESULTS).map_err(|e| {
            Error::hinted(
                format!("cannot read {}: {e}", p.results.display()),
                "check free disk space and permissions",
            )
        })?;
        let verdict = match &p.signature {
            Some(sig) => match trust.verify_bytes(&results, sig, &p.reference) {
                Ok(v) => Verdict::Signed { key_id: v.key_id },
                Err(e) => Verdict::Refused { why: e.to_string() },
            },
            None if allow_unsigned => Verdict::UnsignedIncluded,
            None => Verdict::UnsignedLeftOut,
        };
        let include = matches!(verdict, Verdict::Signed { .. } | Verdict::UnsignedIncluded);
        verdicts.push((p.reference.clone(), verdict));
        if include {
            bundles.push(report::parse(&results, &p.reference)?);
        }
    }
    Ok((bundles, verdicts))
}

/// report.html and report.md of `bundles` in `out`, readable by others.
fn write(bundles: &[Bundle], out: &Path) -> Result<Written> {
    let rep = report::build(bundles);
    let rendered = |r: std::result::Result<String, report::view::RenderError>| {
        r.map_err(|e| {
            Error::hinted(
                e.to_string(),
                "a bug in rocforge's report templates: please report it",
            )
        })
    };
    let html = rendered(report::html::render(&rep))?;
    let md = rendered(report::markdown::render(&rep))?;
    let written = Written {
        html: out.join("report.html"),
        markdown: out.join("report.md"),
    };
    for (p, text) in [(&written.html, &html), (&written.markdown, &md)] {
        // A report is for others to read (a CI summary, a web page): 0644, not write_atomic's 0600.
        crate::fsutil::write_atomic(p, text.as_bytes())
            .and_then(|()| crate::sign::readable(p))
            .map_err(|e| Error::hinted(format!("{}: {e}", p.display()), "check --out"))?;
    }
    Ok(written)
}
