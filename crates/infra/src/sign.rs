//! Ed25519 signatures in minisign's format, so anyone can check rocforge's artifacts with the
//! `minisign` tool (`minisign -Vm FILE -P KEY`) and rocforge checks signatures made by it.
//!
//! Keys: the public key is minisign's base64 line (`RW…`); the secret key file is minisign's
//! format too, unencrypted or, when a password is given, encrypted with scrypt. Signatures are
//! prehashed (BLAKE2b-512, minisign's default since 0.8), and their trusted comment names the
//! file, so a signature cannot be moved to another file name unnoticed by a careful reader.

use std::io::{Cursor, Read, Seek};
use std::path::{Path, PathBuf};

pub use minisign::PublicKey;

/// Public keys built into the binary. Empty until the release pipeline adds the project key:
/// the line it adds is the `RW…` string `rocforge key generate` printed for the project.
pub const BUILT_IN_KEYS: &[&str] = &[];

/// File names `rocforge key generate` writes.
pub const SECRET_KEY_FILE: &str = "rocforge.key";
pub const PUBLIC_KEY_FILE: &str = "rocforge.pub";
/// The environment variable holding the secret key's password, if it has one.
pub const PASSWORD_ENV: &str = "ROCFORGE_KEY_PASSWORD";

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} is not a minisign key: {message}")]
    BadKey { what: String, message: String },
    #[error("the secret key {} is encrypted and {PASSWORD_ENV} is not set", path.display())]
    NeedPassword { path: PathBuf },
    #[error("{what}: the signature is malformed: {message}")]
    BadSignature { what: String, message: String },
    #[error("{what}: signed by key {key_id}, which is not trusted")]
    Untrusted { what: String, key_id: String },
    #[error(
        "{what}: the signature does not verify with key {key_id} (the file was changed after signing)"
    )]
    Mismatch { what: String, key_id: String },
    #[error("{what}: no trusted keys to check the signature against")]
    NoKeys { what: String },
    #[error("{} exists; refusing to overwrite a key", path.display())]
    Exists { path: PathBuf },
    #[error("cannot generate a key: {0}")]
    Generate(String),
}

impl crate::diag::Hint for SignError {
    fn hint(&self) -> String {
        match self {
            SignError::Io { .. } => "check the path and its permissions".into(),
            SignError::BadKey { .. } => {
                "a public key is the `RW…` line of a minisign .pub file, or that file".into()
            }
            SignError::NeedPassword { .. } => {
                format!("set {PASSWORD_ENV} to the key's password (CI: from a secret)")
            }
            SignError::BadSignature { .. } => {
                "re-download the .minisig file; it must be minisign's four-line format".into()
            }
            SignError::Untrusted { .. } | SignError::NoKeys { .. } => {
                "add the publisher's public key to [trust] keys in ~/.config/rocforge/config.toml, \
                 or pass --key, after checking it through a channel you trust"
                    .into()
            }
            SignError::Mismatch { .. } => {
                "do not use this file: it is not what the key's owner signed".into()
            }
            SignError::Exists { .. } => {
                "choose another --out directory, or move the old key away first".into()
            }
            SignError::Generate(_) => "the system random number generator failed".into(),
        }
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SignError + '_ {
    move |source| SignError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// minisign's key ID notation: the 8-byte key number as a little-endian u64, in hex.
pub fn key_id(keynum: &[u8]) -> String {
    let mut b = [0u8; 8];
    b.copy_from_slice(&keynum[..8.min(keynum.len())]);
    format!("{:016X}", u64::from_le_bytes(b))
}

/// A public key from its `RW…` base64 line or from the text of a .pub file.
pub fn parse_public(text: &str) -> Result<PublicKey, SignError> {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
        .unwrap_or("");
    PublicKey::from_base64(line).map_err(|e| SignError::BadKey {
        what: format!("{:?}", shorten(line)),
        message: e.to_string(),
    })
}

/// A public key given on the command line: a base64 key, or a path to a .pub file.
pub fn public_from_arg(arg: &str) -> Result<PublicKey, SignError> {
    let p = Path::new(arg);
    if p.is_file() {
        let text = std::fs::read_to_string(p).map_err(io(p))?;
        return parse_public(&text);
    }
    parse_public(arg)
}

pub fn public_base64(pk: &PublicKey) -> String {
    pk.to_base64()
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

pub struct SecretKey {
    sk: minisign::SecretKey,
    pk: PublicKey,
}

impl SecretKey {
    pub fn public(&self) -> &PublicKey {
        &self.pk
    }

    pub fn key_id(&self) -> String {
        key_id(self.pk.keynum())
    }
}

/// Where keys live by default: `$XDG_CONFIG_HOME/rocforge/keys` (or ~/.config/rocforge/keys).
pub fn default_key_dir() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("rocforge/keys")
}

/// The generated pair's files and the public key line.
pub struct Generated {
    pub secret: PathBuf,
    pub public: PathBuf,
    pub public_key: String,
    pub key_id: String,
}

/// Writes a new key pair into `dir` (mode 0600 for the secret key). Encrypted when `password`
/// is given. Never overwrites a key.
pub fn generate(dir: &Path, password: Option<String>) -> Result<Generated, SignError> {
    let secret = dir.join(SECRET_KEY_FILE);
    let public = dir.join(PUBLIC_KEY_FILE);
    for p in [&secret, &public] {
        if p.exists() {
            return Err(SignError::Exists { path: p.clone() });
        }
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let kp = match password {
        Some(pw) => minisign::KeyPair::generate_encrypted_keypair(Some(pw)),
        None => minisign::KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(|e| SignError::Generate(e.to_string()))?;
    let id = key_id(kp.pk.keynum());
    let sk_text = kp
        .sk
        .to_box(Some(&format!("rocforge secret key {id}")))
        .map_err(|e| SignError::Generate(e.to_string()))?
        .into_string();
    let pk_text = format!(
        "untrusted comment: rocforge public key {id}\n{}\n",
        kp.pk.to_base64()
    );
    write_private(&secret, sk_text.as_bytes())?;
    crate::fsutil::write_atomic(&public, pk_text.as_bytes()).map_err(io(&public))?;
    Ok(Generated {
        secret,
        public,
        public_key: kp.pk.to_base64(),
        key_id: id,
    })
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), SignError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

/// Reads a secret key file; an encrypted one needs `password`.
/// The key's text when `arg` holds the key itself rather than a path to it: what a CI secret
/// named ROCFORGE_SIGNING_KEY or ROCFORGE_CACHE_KEY holds (the key file's text, or its base64
/// line alone).
fn key_text(arg: &str) -> Option<String> {
    let t = arg.trim();
    if t.contains('\n') || t.starts_with("untrusted comment:") {
        return Some(arg.to_string());
    }
    let base64 = t.len() >= 64
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    (base64 && !Path::new(t).exists())
        .then(|| format!("untrusted comment: rocforge secret key\n{t}\n"))
}

/// How a secret key argument is named in messages: its path, unless it may be a key itself
/// (long, without a path's look), which is never shown.
fn describe_key_arg(arg: &str) -> String {
    let long_run = arg
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '=')))
        .any(|w| w.len() >= 40);
    if long_run || arg.len() > 512 || arg.chars().any(char::is_control) {
        format!(
            "the secret key argument ({} characters, not shown)",
            arg.len()
        )
    } else {
        arg.to_string()
    }
}

/// Loads a secret key from `path`, or from the key's text when `path` holds that instead (see
/// [`key_text`]). Neither the text nor anything that may be a key is ever put in an error.
pub fn load_secret(path: &Path, password: Option<String>) -> Result<SecretKey, SignError> {
    let arg = path.as_os_str().to_string_lossy();
    let (text, what) = match key_text(&arg) {
        Some(t) => (t, "the secret key given as text".to_string()),
        None => {
            let what = describe_key_arg(&arg);
            let text = std::fs::read_to_string(path).map_err(|source| SignError::Io {
                path: PathBuf::from(&what),
                source,
            })?;
            (text, what)
        }
    };
    let path = Path::new(&what);
    let bad = |e: minisign::PError| SignError::BadKey {
        what: what.clone(),
        message: e.to_string(),
    };
    let sbox = minisign::SecretKeyBox::from_string(&text).map_err(bad)?;
    let raw = sbox.clone().into_unencrypted_secret_key();
    let sk = match raw {
        Ok(sk) if !sk.is_encrypted() => sk,
        _ => match password {
            Some(pw) => sbox.into_secret_key(Some(pw)).map_err(bad)?,
            None => {
                return Err(SignError::NeedPassword {
                    path: path.to_path_buf(),
                });
            }
        },
    };
    let pk = PublicKey::from_secret_key(&sk).map_err(bad)?;
    Ok(SecretKey { sk, pk })
}

/// Signs `data` and returns the .minisig text. `file_name` goes into the trusted comment.
pub fn sign_reader(key: &SecretKey, data: impl Read, file_name: &str) -> Result<String, SignError> {
    let trusted = format!("file:{file_name}\tprehashed");
    let sig = minisign::sign(
        Some(&key.pk),
        &key.sk,
        data,
        Some(&trusted),
        Some(&format!(
            "signature from rocforge secret key {}",
            key.key_id()
        )),
    )
    .map_err(|e| SignError::Generate(e.to_string()))?;
    Ok(sig.into_string())
}

/// Signs `path`, writing `<path>.minisig` beside it. Returns the signature's path.
pub fn sign_file(key: &SecretKey, path: &Path) -> Result<PathBuf, SignError> {
    let f = std::fs::File::open(path).map_err(io(path))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = sign_reader(key, std::io::BufReader::with_capacity(1 << 20, f), &name)?;
    let sig = signature_path(path);
    crate::fsutil::write_atomic(&sig, text.as_bytes()).map_err(io(&sig))?;
    readable(&sig).map_err(io(&sig))?;
    Ok(sig)
}

/// Mode 0644: signatures, sums and indexes are published as they are.
pub fn readable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
}

pub fn signature_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".minisig");
    PathBuf::from(s)
}

/// Who signed, once a signature verified.
#[derive(Debug, Clone)]
pub struct Verified {
    pub key_id: String,
    pub trusted_comment: String,
}

/// Checks `sig_text` over `data` against `keys`. `what` names the file in errors.
pub fn verify(
    keys: &[PublicKey],
    data: impl Read + Seek,
    sig_text: &str,
    what: &str,
) -> Result<Verified, SignError> {
    let bad = |message: String| SignError::BadSignature {
        what: what.into(),
        message,
    };
    let sbox = minisign::SignatureBox::from_string(sig_text).map_err(|e| bad(e.to_string()))?;
    global_signature_is_whole(sig_text).map_err(bad)?;
    let signer = key_id(sbox.keynum());
    if keys.is_empty() {
        return Err(SignError::NoKeys { what: what.into() });
    }
    let Some(pk) = keys.iter().find(|k| k.keynum() == sbox.keynum()) else {
        return Err(SignError::Untrusted {
            what: what.into(),
            key_id: signer,
        });
    };
    let trusted_comment = sbox.trusted_comment().unwrap_or_default();
    minisign::verify(pk, &sbox, data, true, false, false).map_err(|_| SignError::Mismatch {
        what: what.into(),
        key_id: signer.clone(),
    })?;
    Ok(Verified {
        key_id: signer,
        trusted_comment,
    })
}

/// minisign 0.10 reads the global signature (the fourth line) without checking its length and
/// slices it as 64 bytes: a shorter one, which anyone can write beside a genuine first
/// signature, would panic there instead of failing. Refused here first.
fn global_signature_is_whole(sig_text: &str) -> Result<(), String> {
    use ct_codecs::{Base64, Decoder};
    let line = sig_text.lines().nth(3).unwrap_or_default().trim();
    let bytes = Base64::decode_to_vec(line.as_bytes(), None)
        .map_err(|e| format!("the global signature (line 4) is not base64: {e}"))?;
    if bytes.len() != 64 {
        return Err(format!(
            "the global signature (line 4) is {} bytes, not 64",
            bytes.len()
        ));
    }
    Ok(())
}

pub fn verify_bytes(
    keys: &[PublicKey],
    data: &[u8],
    sig_text: &str,
    what: &str,
) -> Result<Verified, SignError> {
    verify(keys, Cursor::new(data), sig_text, what)
}

pub fn verify_file(
    keys: &[PublicKey],
    path: &Path,
    sig_path: &Path,
) -> Result<Verified, SignError> {
    // Both come from outside (a release directory, a download): regular files only, the
    // signature small.
    let sig = crate::fsutil::read_regular(sig_path, 64 << 10)
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(io(sig_path))?;
    let f = crate::fsutil::open_regular(path).map_err(io(path))?;
    verify(
        keys,
        std::io::BufReader::with_capacity(1 << 20, f),
        &sig,
        &path.display().to_string(),
    )
}

/// The built-in keys plus `extra` (config `[trust] keys`, `--key`). Unparsable entries are
/// returned as errors so a typo in the config is not silently ignored.
pub fn trusted_keys(extra: &[String]) -> Result<Vec<PublicKey>, SignError> {
    BUILT_IN_KEYS
        .iter()
        .map(|s| parse_public(s))
        .chain(extra.iter().map(|s| parse_public(s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_and_verify_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let g = generate(dir.path(), None).unwrap();
        let sk = load_secret(&g.secret, None).unwrap();
        let sig = sign_reader(&sk, &b"hello"[..], "x").unwrap();
        let pk = parse_public(&g.public_key).unwrap();
        let v = verify_bytes(std::slice::from_ref(&pk), b"hello", &sig, "x").unwrap();
        assert_eq!(v.key_id, g.key_id);
        assert!(matches!(
            verify_bytes(&[pk], b"hellO", &sig, "x"),
            Err(SignError::Mismatch { .. })
        ));
        assert!(matches!(
            generate(dir.path(), None),
            Err(SignError::Exists { .. })
        ));
    }

    /// A genuine signature line with a global signature too short (or too long, or not base64)
    /// beside it is a bad signature, not a panic inside minisign.
    #[test]
    fn a_cut_global_signature_is_refused_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let g = generate(dir.path(), None).unwrap();
        let sk = load_secret(&g.secret, None).unwrap();
        let pk = parse_public(&g.public_key).unwrap();
        let sig = sign_reader(&sk, &b"hello"[..], "x").unwrap();
        let lines: Vec<&str> = sig.lines().collect();
        assert_eq!(lines.len(), 4, "{sig}");
        for global in ["AAAA", "", "not base64!", &format!("{}AAAA", lines[3])] {
            let forged = format!("{}\n{}\n{}\n{global}\n", lines[0], lines[1], lines[2]);
            let e = verify_bytes(std::slice::from_ref(&pk), b"hello", &forged, "x").unwrap_err();
            assert!(
                matches!(&e, SignError::BadSignature { .. }),
                "{global:?}: {e}"
            );
        }
        assert!(verify_bytes(&[pk], b"hello", &sig, "x").is_ok());
    }
}
