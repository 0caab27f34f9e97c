//! The static release index (`index.json`): every artifact of a release directory with its
//! URL (relative to the index), size, sha256 and dependencies, an issue date and an expiry.
//! Signed as a whole (`index.json.minisig`); an installer trusts an artifact because the signed
//! index pins its sha256. Schema: docs/index-schema.md.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PackageError;
use super::manifest::Dependency;
use super::tarball::{Compression, read_manifest};

pub const INDEX_SCHEMA: &str = "rocforge.index/1";
pub const INDEX_NAME: &str = "index.json";
/// The largest index an installer reads.
pub const MAX_INDEX_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Index {
    pub schema: String,
    /// RFC 3339 UTC, e.g. 2025-06-01T12:00:00Z.
    pub issued: String,
    /// After this instant installers refuse the index (an old index cannot be replayed).
    pub expires: String,
    pub artifacts: Vec<Artifact>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Artifact {
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub release: String,
    pub targets: Vec<String>,
    pub key: String,
    /// Relative to the index's URL (or absolute; installers refuse other hosts by default).
    pub url: String,
    pub size: u64,
    pub sha256: String,
    /// Sum of the files' sizes once extracted.
    pub installed_size: u64,
    #[serde(default)]
    pub depends: Vec<Dependency>,
    #[serde(default)]
    pub glibc_floor: Option<String>,
    /// Run-time capabilities it needs from the host or another artifact (`hip-runtime`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Capabilities it provides (`hip-runtime` for the rocm-runtime component).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provides: Vec<String>,
    /// The exact runtime libraries behind `needs` (e.g. libamdhip64.so.6); see the manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_libs: Vec<String>,
    /// The artifact's detached signature, relative like `url`.
    #[serde(default)]
    pub signature: Option<String>,
}

/// The index of every tarball in `dir` (their manifests are read), issued now and expiring
/// after `valid_days`. Tarballs are listed by name.
pub fn build(dir: &Path, valid_days: u64) -> Result<Index, PackageError> {
    let mut tarballs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| PackageError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && Compression::of(n).is_some())
        })
        .collect();
    tarballs.sort();
    let mut artifacts = Vec::new();
    for p in tarballs {
        let m = read_manifest(&p)?;
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let sig = crate::sign::signature_path(&p);
        let meta = std::fs::metadata(&p).map_err(|source| PackageError::Io {
            path: p.clone(),
            source,
        })?;
        artifacts.push(Artifact {
            name: m.name,
            version: m.version,
            release: m.release,
            targets: m.targets,
            key: m.key,
            url: name.clone(),
            size: meta.len(),
            sha256: sha256_file(&p)?,
            installed_size: m.installed_size,
            depends: m.depends,
            glibc_floor: m.glibc_floor,
            needs: m.needs,
            runtime_libs: m.runtime_libs,
            provides: m.provides,
            signature: sig.is_file().then(|| format!("{name}.minisig")),
        });
    }
    let now = now_unix();
    Ok(Index {
        schema: INDEX_SCHEMA.into(),
        issued: rfc3339(now),
        expires: rfc3339(now + valid_days * 86_400),
        artifacts,
    })
}

/// `dir/index.json` issued anew: the same artifacts, issued now and expiring after
/// `valid_days`. For re-signing a published release before it expires, without its tarballs;
/// the caller checks the old signature first, since whatever is read here gets signed.
pub fn renew(dir: &Path, valid_days: u64) -> Result<Index, PackageError> {
    let path = dir.join(INDEX_NAME);
    let bad = |reason: String| PackageError::BadEntry {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read(&path).map_err(|source| PackageError::Io {
        path: path.clone(),
        source,
    })?;
    if text.len() as u64 > MAX_INDEX_BYTES {
        return Err(bad(format!("larger than {MAX_INDEX_BYTES} bytes")));
    }
    let mut index: Index =
        serde_json::from_slice(&text).map_err(|e| bad(format!("not a release index: {e}")))?;
    if index.schema != INDEX_SCHEMA {
        return Err(bad(format!(
            "schema {:?}, this rocforge writes {INDEX_SCHEMA}",
            index.schema
        )));
    }
    let now = now_unix();
    index.issued = rfc3339(now);
    index.expires = rfc3339(now + valid_days * 86_400);
    Ok(index)
}

fn sha256_file(p: &Path) -> Result<String, PackageError> {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(p).map_err(|source| PackageError::Io {
        path: p.to_path_buf(),
        source,
    })?;
    let mut h = super::tarball::HashingWriter {
        inner: std::io::sink(),
        hasher: Sha256::new(),
        bytes: 0,
    };
    std::io::copy(&mut f, &mut h).map_err(|source| PackageError::Io {
        path: p.to_path_buf(),
        source,
    })?;
    Ok(hex::encode(h.hasher.finalize()))
}

/// Writes `dir/index.json` and, with a key, `dir/index.json.minisig`. Returns the paths.
pub fn write(
    dir: &Path,
    index: &Index,
    key: Option<&crate::sign::SecretKey>,
) -> Result<Vec<PathBuf>, PackageError> {
    let path = dir.join(INDEX_NAME);
    let mut text = serde_json::to_vec_pretty(index).expect("plain data");
    text.push(b'\n');
    crate::fsutil::write_atomic(&path, &text)
        .and_then(|()| crate::sign::readable(&path))
        .map_err(|source| PackageError::Io {
            path: path.clone(),
            source,
        })?;
    let mut out = vec![path.clone()];
    crate::fault::point("package");
    let sig = crate::sign::signature_path(&path);
    match key {
        Some(k) => out.push(crate::sign::sign_file(k, &path)?),
        None => {
            // A stale signature would be worse than none.
            let _ = std::fs::remove_file(&sig);
        }
    }
    Ok(out)
}

/// Every file of a release directory a publisher uploads: tarballs and their signatures,
/// SHA256SUMS (and its signature), the index (and its signature) and the key lists
/// (`keys.json`, `keys-N.json` and their signatures), sorted by name. The seam for publishing
/// to GitHub Releases, OCI registries or any HTTP directory.
pub fn release_files(dir: &Path) -> Result<Vec<PathBuf>, PackageError> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| PackageError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let base = n.strip_suffix(".minisig").unwrap_or(n);
            !n.starts_with('.')
                && (Compression::of(base).is_some()
                    || base == "SHA256SUMS"
                    || base == INDEX_NAME
                    || crate::trust::is_key_list_name(base))
        })
        .collect();
    out.sort();
    Ok(out)
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `secs` since the epoch as RFC 3339 UTC (`YYYY-MM-DDTHH:MM:SSZ`).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses what [`rfc3339`] writes (also accepting `+00:00` for `Z` and fractional seconds).
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let s = s.trim();
    let (date, time) = s.split_once(['T', 't', ' '])?;
    let time = time
        .strip_suffix('Z')
        .or_else(|| time.strip_suffix('z'))
        .or_else(|| time.strip_suffix("+00:00"))?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: u32 = d.next()?.parse().ok()?;
    let dd: u32 = d.next()?.parse().ok()?;
    let mut t = time.split(':');
    let hh: u64 = t.next()?.parse().ok()?;
    let mm: u64 = t.next()?.parse().ok()?;
    let ss: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&dd) || hh > 23 || mm > 59 {
        return None;
    }
    let days = days_from_civil(y, m, dd);
    if days < 0 {
        return None;
    }
    Some(days as u64 * 86_400 + hh * 3600 + mm * 60 + ss as u64)
}

// Howard Hinnant's civil-date algorithms.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        for t in [0u64, 951_782_400, 1_700_000_000, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t), "{}", rfc3339(t));
        }
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(parse_rfc3339("2024-13-01T00:00:00Z"), None);
    }

    #[test]
    fn renew_keeps_the_artifacts_and_moves_the_dates() {
        let dir = tempfile::tempdir().unwrap();
        let old = Index {
            schema: INDEX_SCHEMA.into(),
            issued: rfc3339(1_000),
            expires: rfc3339(2_000),
            artifacts: Vec::new(),
        };
        write(dir.path(), &old, None).unwrap();
        let new = renew(dir.path(), 30).unwrap();
        assert_eq!(new.artifacts, old.artifacts);
        let issued = parse_rfc3339(&new.issued).unwrap();
        assert!(issued + 5 >= now_unix());
        assert_eq!(parse_rfc3339(&new.expires).unwrap(), issued + 30 * 86_400);
        std::fs::write(dir.path().join(INDEX_NAME), "{\"schema\": \"x\"}").unwrap();
        assert!(renew(dir.path(), 30).is_err());
    }
}
