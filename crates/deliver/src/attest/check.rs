//! `rocforge verify`'s checks of the documents: each is signed by a trusted key, names this
//! very tarball or image (its sha256) as its subject, and describes this component (name and
//! content key, from the tarball's manifest). The signature is checked first, over the exact
//! bytes, so a changed byte is reported as such before anything is parsed.

use std::path::Path;

use serde::Serialize;

use super::provenance::{PREDICATE_TYPE, STATEMENT_TYPE, Statement};
use super::{AttestError, Kind, SubjectKind, sbom};

/// One document that passed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Checked {
    pub kind: Kind,
    /// Its path, or `REGISTRY/REPO@DIGEST` of its referrer manifest.
    pub document: String,
    pub key_id: String,
    /// `sha256:…` of the subject it names (checked equal to the subject's).
    pub subject: String,
    /// The components it describes, as `NAME@KEY`.
    pub components: Vec<String>,
}

pub fn parse_sbom(bytes: &[u8], what: &str) -> Result<sbom::Document, AttestError> {
    let d: sbom::Document = serde_json::from_slice(bytes).map_err(|e| AttestError::Malformed {
        what: what.into(),
        kind: "SPDX 2.3 document",
        reason: e.to_string(),
    })?;
    if d.spdx_version != sbom::SPDX_VERSION {
        return Err(AttestError::Malformed {
            what: what.into(),
            kind: "SPDX 2.3 document",
            reason: format!("spdxVersion is {:?}", d.spdx_version),
        });
    }
    Ok(d)
}

pub fn parse_provenance(bytes: &[u8], what: &str) -> Result<Statement, AttestError> {
    let kind = "in-toto statement with SLSA provenance";
    let s: Statement = serde_json::from_slice(bytes).map_err(|e| AttestError::Malformed {
        what: what.into(),
        kind,
        reason: e.to_string(),
    })?;
    if s.type_ != STATEMENT_TYPE || s.predicate_type != PREDICATE_TYPE {
        return Err(AttestError::Malformed {
            what: what.into(),
            kind,
            reason: format!(
                "_type {:?}, predicateType {:?} (expected {STATEMENT_TYPE}, {PREDICATE_TYPE})",
                s.type_, s.predicate_type
            ),
        });
    }
    Ok(s)
}

/// What a document must match.
pub struct Expected<'a> {
    pub kind: SubjectKind,
    /// The tarball's path or the image's reference, for messages.
    pub name: &'a str,
    /// sha256 hex (or `sha256:` digest).
    pub sha256: &'a str,
    /// A tarball's component: (name, content key).
    pub component: Option<(&'a str, &'a str)>,
}

/// Checks one document's signature, subject and component.
pub fn check_document(
    kind: Kind,
    bytes: &[u8],
    signature: Option<&str>,
    what: &str,
    trust: &crate::trust::Resolved,
    expected: &Expected<'_>,
) -> Result<Checked, AttestError> {
    let Some(sig) = signature else {
        return Err(AttestError::Unsigned {
            document: what.into(),
        });
    };
    let v = trust.verify_bytes(bytes, sig, what)?;
    let actual = expected.sha256.trim_start_matches("sha256:");
    let (claimed, components) = match kind {
        Kind::Sbom => {
            let d = parse_sbom(bytes, what)?;
            let claimed = d.subject_sha256().unwrap_or_default().to_string();
            let comps = d.contained();
            (claimed, comps)
        }
        Kind::Provenance => {
            let s = parse_provenance(bytes, what)?;
            let claimed = s.subject_sha256().unwrap_or_default().to_string();
            let ext = &s.predicate.build_definition.external_parameters;
            let comps = match &ext.component {
                Some(c) => vec![(
                    c.clone(),
                    s.predicate.run_details.metadata.invocation_id.clone(),
                )],
                None => ext
                    .components
                    .iter()
                    .map(|c| (c.name.clone(), c.key.clone()))
                    .collect(),
            };
            (claimed, comps)
        }
    };
    if !claimed.eq_ignore_ascii_case(actual) {
        return Err(AttestError::OtherSubject(Box::new(super::OtherSubject {
            document: what.into(),
            kind: kind.with_article(),
            subject_kind: expected.kind.label(),
            subject: expected.name.into(),
            claimed: if claimed.is_empty() {
                "(none)".into()
            } else {
                claimed
            },
            actual: actual.into(),
        })));
    }
    if let Some((name, key)) = expected.component
        && !components.iter().any(|(n, k)| n == name && k == key)
    {
        return Err(AttestError::OtherComponent {
            document: what.into(),
            subject: expected.name.into(),
            claimed: describe(&components),
            actual: format!("{name}@{key}"),
        });
    }
    Ok(Checked {
        kind,
        document: what.into(),
        key_id: v.key_id,
        subject: format!("sha256:{actual}"),
        components: components.iter().map(|(n, k)| format!("{n}@{k}")).collect(),
    })
}

fn describe(components: &[(String, String)]) -> String {
    if components.is_empty() {
        return "no component".into();
    }
    components
        .iter()
        .map(|(n, k)| format!("{n}@{k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks the SBOM and provenance beside `tarball` against it and its manifest.
pub fn verify_tarball(
    tarball: &Path,
    trust: &crate::trust::Resolved,
) -> Result<Vec<Checked>, AttestError> {
    let manifest =
        crate::package::tarball::read_manifest(tarball).map_err(|e| AttestError::Malformed {
            what: tarball.display().to_string(),
            kind: "rocforge tarball",
            reason: e.to_string(),
        })?;
    let (sha, _) = crate::fsutil::sha256_file(tarball).map_err(|e| AttestError::Malformed {
        what: tarball.display().to_string(),
        kind: "readable file",
        reason: e.to_string(),
    })?;
    let (name, key) = (manifest.id.name.to_string(), manifest.id.key.to_string());
    let shown = tarball.display().to_string();
    let expected = Expected {
        kind: SubjectKind::Tarball,
        name: &shown,
        sha256: &sha,
        component: Some((&name, &key)),
    };
    let mut out = Vec::new();
    for kind in [Kind::Sbom, Kind::Provenance] {
        let path = super::document_path(tarball, kind);
        let what = path.display().to_string();
        let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => AttestError::Missing {
                what: shown.clone(),
                kind: kind.label(),
                expected: what.clone(),
            },
            _ => AttestError::Io {
                path: path.clone(),
                source: e,
            },
        })?;
        let sig = std::fs::read_to_string(crate::sign::signature_path(&path)).ok();
        out.push(check_document(
            kind,
            &bytes,
            sig.as_deref(),
            &what,
            trust,
            &expected,
        )?);
    }
    Ok(out)
}

/// An image named as `verify` takes it: `oci://REGISTRY/REPO:TAG` or `…@sha256:…`.
pub fn parse_image_ref(arg: &str) -> Result<(crate::oci::Repository, String), AttestError> {
    let bad = || crate::oci::OciError::Malformed(arg.to_string());
    let rest = arg.strip_prefix("oci://").unwrap_or(arg);
    let (name, reference) = match rest.split_once('@') {
        Some((n, d)) => (n, d),
        None => {
            let slash = rest.rfind('/').ok_or_else(bad)?;
            let colon = rest[slash..].rfind(':').ok_or_else(bad)? + slash;
            (&rest[..colon], &rest[colon + 1..])
        }
    };
    if reference.is_empty() {
        return Err(bad().into());
    }
    Ok((
        crate::oci::Repository::parse(name).map_err(|_| bad())?,
        reference.to_string(),
    ))
}

/// Checks the documents attached to the image `reference` names in `remote`'s repository:
/// both are there, each referrer's `subject` is this image, each document is signed by a
/// trusted key and names this image's digest. Returns the image digest and what passed.
pub fn verify_image(
    remote: &crate::oci::Remote,
    reference: &str,
    trust: &crate::trust::Resolved,
) -> Result<(String, Vec<Checked>), AttestError> {
    let shown = remote.repo.reference(reference);
    let shown = if reference.starts_with("sha256:") {
        shown.replacen(&format!(":{reference}"), &format!("@{reference}"), 1)
    } else {
        shown
    };
    let (digest, _) =
        remote
            .get_manifest(reference)?
            .ok_or_else(|| crate::oci::OciError::Status {
                registry: remote.repo.registry.clone(),
                reference: shown.clone(),
                status: 404,
            })?;
    let fetched = super::referrers::read_from_image(remote, &digest)?;
    let expected = Expected {
        kind: SubjectKind::Image,
        name: &shown,
        sha256: &digest,
        component: None,
    };
    let mut out = Vec::new();
    for f in &fetched {
        let what = format!(
            "{}/{}@{}",
            remote.repo.registry, remote.repo.repository, f.manifest
        );
        if f.subject.as_deref() != Some(digest.as_str()) {
            return Err(AttestError::OtherSubject(Box::new(super::OtherSubject {
                document: what,
                kind: f.kind.with_article(),
                subject_kind: "image",
                subject: shown.clone(),
                claimed: f
                    .subject
                    .as_deref()
                    .map_or("(none)".into(), |s| s.trim_start_matches("sha256:").into()),
                actual: digest.trim_start_matches("sha256:").into(),
            })));
        }
        out.push(check_document(
            f.kind,
            &f.document,
            f.signature.as_deref(),
            &what,
            trust,
            &expected,
        )?);
    }
    for kind in [Kind::Sbom, Kind::Provenance] {
        if !out.iter().any(|c| c.kind == kind) {
            return Err(AttestError::Missing {
                what: format!("{shown} ({digest})"),
                kind: kind.label(),
                expected: format!(
                    "a referrer of type {} (referrers API or tag {})",
                    kind.media_type(),
                    super::referrers::fallback_tag(&digest)
                ),
            });
        }
    }
    Ok((digest, out))
}
