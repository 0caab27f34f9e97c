//! Writing the next key list of a rotation.

use std::path::{Path, PathBuf};

use crate::sign::{self, PublicKey, SecretKey};

use super::{
    KEY_LIST_SCHEMA, KeyList, Previous, TrustError, numbered_name, parse_list, sha256_hex,
};

/// What [`rotate`] wrote.
#[derive(Debug)]
pub struct Rotated {
    pub list: KeyList,
    /// `keys.json` (the `out` path) and its numbered copy `keys-<N>.json`, each with a signature.
    pub files: Vec<PathBuf>,
}

/// Writes the key list after `out` (a `keys.json`, or none yet): sequence one more than its,
/// trusting `new` and revoking `revoke`, signed by `old`. The previous list is kept beside it as
/// `keys-<N>.json` (with its signature) and linked by sha256; the new one is written both as
/// `keys-<N+1>.json` and as `out`, with the same signature.
pub fn rotate(
    old: &SecretKey,
    new: &[PublicKey],
    revoke: &[PublicKey],
    out: &Path,
) -> Result<Rotated, TrustError> {
    let what = out.display().to_string();
    if new.is_empty() {
        return Err(TrustError::BadList {
            what,
            message: "a rotation needs at least one new key (--new)".into(),
        });
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TrustError::Io { path, source }
    };
    let mut files = Vec::new();
    let previous =
        match std::fs::read(out) {
            Ok(bytes) => {
                let list = parse_list(&what, &bytes)?;
                if list.revoke.iter().any(|k| {
                    sign::parse_public(k).is_ok_and(|pk| pk.keynum() == old.public().keynum())
                }) {
                    return Err(TrustError::NotAllowed {
                        what,
                        key_id: old.key_id(),
                        reason: format!("key list {} revoked", list.sequence),
                    });
                }
                let sig_path = sign::signature_path(out);
                let sig = std::fs::read_to_string(&sig_path)
                    .map_err(|_| TrustError::Unsigned { what: what.clone() })?;
                let numbered = dir.join(numbered_name(list.sequence));
                match std::fs::read(&numbered) {
                    Ok(b) if b == bytes => {}
                    Ok(_) => {
                        return Err(TrustError::BadList {
                            what: numbered.display().to_string(),
                            message: format!("it differs from {what}, which has the same sequence"),
                        });
                    }
                    Err(_) => {
                        crate::fsutil::write_atomic(&numbered, &bytes).map_err(io(&numbered))?;
                        let ns = sign::signature_path(&numbered);
                        crate::fsutil::write_atomic(&ns, sig.as_bytes()).map_err(io(&ns))?;
                        for p in [&numbered, &ns] {
                            sign::readable(p).map_err(io(p))?;
                        }
                        files.push(numbered.clone());
                        files.push(ns);
                    }
                }
                Some(Previous {
                    url: numbered_name(list.sequence),
                    sequence: list.sequence,
                    sha256: sha256_hex(&bytes),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(out)(e)),
        };
    let mut keys: Vec<String> = Vec::new();
    for k in new {
        let s = sign::public_base64(k);
        if !keys.contains(&s) {
            keys.push(s);
        }
    }
    let mut revoked: Vec<String> = Vec::new();
    for k in revoke {
        let s = sign::public_base64(k);
        if !revoked.contains(&s) {
            revoked.push(s);
        }
    }
    let list = KeyList {
        schema: KEY_LIST_SCHEMA.into(),
        sequence: previous.as_ref().map_or(1, |p| p.sequence + 1),
        issued: crate::units::rfc3339(crate::units::now_unix()),
        keys,
        revoke: revoked,
        previous,
    };
    let mut bytes = serde_json::to_vec_pretty(&list).expect("plain data");
    bytes.push(b'\n');
    let numbered_file = numbered_name(list.sequence);
    let numbered = dir.join(&numbered_file);
    if numbered.exists() {
        return Err(TrustError::BadList {
            what: numbered.display().to_string(),
            message: "it exists already; a published key list is never rewritten".into(),
        });
    }
    let sig = sign::sign_reader(old, &bytes[..], &numbered_file)?;
    for p in [&numbered, &out.to_path_buf()] {
        let s = sign::signature_path(p);
        crate::fsutil::write_atomic(p, &bytes).map_err(io(p))?;
        crate::fsutil::write_atomic(&s, sig.as_bytes()).map_err(io(&s))?;
        for f in [p, &s] {
            sign::readable(f).map_err(io(f))?;
        }
        files.push(p.clone());
        files.push(s);
    }
    Ok(Rotated { list, files })
}
