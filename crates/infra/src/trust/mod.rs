//! Key lists: how a publisher rotates its signing key without breaking installers.
//!
//! A key list (`keys.json`, schema `rocforge.keys/1`, docs/security.md) names public keys to
//! trust and keys to revoke, carries a sequence number and an issue date, and is signed
//! (minisign, detached: `keys.json.minisig`) by a key already trusted: the old key of a
//! rotation. Each list also links to the one before it (`keys-<N>.json`, pinned by sha256), so
//! an installer that trusts only the first key follows the chain back to it and forward again,
//! at most [`MAX_CHAIN`] lists.
//!
//! An installer keeps, in its state directory, the newest sequence it accepted for each
//! anchoring key and every revocation it saw: an older list served later is refused as a replay,
//! and a revoked key stays revoked even where no list is published.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::sign::{self, PublicKey, SignError};

mod follow;
mod rotate;

pub use follow::resolve;
pub use rotate::{Rotated, rotate};

pub const KEY_LIST_SCHEMA: &str = "rocforge.keys/1";
/// The newest key list of a release directory, beside `index.json`.
pub const KEY_LIST_NAME: &str = "keys.json";
/// The longest chain of key lists followed back to a trusted key.
pub const MAX_CHAIN: usize = 16;
/// The largest key list read.
pub const MAX_KEY_LIST_BYTES: u64 = 1 << 20;
/// The directory holding the trust state [default: `$XDG_STATE_HOME/rocforge`, else
/// `~/.local/state/rocforge`].
pub const STATE_ENV: &str = "ROCFORGE_STATE";
pub const STATE_FILE: &str = "trust.json";
pub const STATE_SCHEMA: &str = "rocforge.trust-state/1";

/// `keys.json` or `keys-<N>.json`.
pub fn is_key_list_name(name: &str) -> bool {
    name == KEY_LIST_NAME || numbered_sequence(name).is_some()
}

/// N of `keys-<N>.json`.
pub fn numbered_sequence(name: &str) -> Option<u64> {
    let n = name.strip_prefix("keys-")?.strip_suffix(".json")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

pub fn numbered_name(sequence: u64) -> String {
    format!("keys-{sequence}.json")
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KeyList {
    pub schema: String,
    /// Starts at 1; each rotation adds one.
    pub sequence: u64,
    /// RFC 3339 UTC.
    pub issued: String,
    /// Public keys (minisign `RW…` lines) trusted from this list on.
    pub keys: Vec<String>,
    /// Public keys no longer trusted from this list on (the old key, when it is retired).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoke: Vec<String>,
    /// The list this one follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Previous>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Previous {
    /// `keys-<N>.json`, in the same directory.
    pub url: String,
    pub sequence: u64,
    /// Of the previous list's exact bytes.
    pub sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{what}: not a key list: {message}")]
    BadList { what: String, message: String },
    #[error("{what} is not signed (no {what}.minisig)")]
    Unsigned { what: String },
    #[error(
        "{what}: the signature does not verify with key {key_id} (the key list was changed after signing)"
    )]
    Tampered { what: String, key_id: String },
    #[error("{what}: signed by key {key_id}, which {reason}")]
    NotAllowed {
        what: String,
        key_id: String,
        reason: String,
    },
    #[error(
        "{what}: its sequence {sequence} is {relation} the key list {seen} already accepted from key {anchor}: an old key list is being replayed"
    )]
    Replay {
        what: String,
        sequence: u64,
        seen: u64,
        relation: String,
        anchor: String,
    },
    #[error("{what}: the chain of key lists is longer than {MAX_CHAIN}")]
    TooLong { what: String },
    #[error("{what}: its sha256 is not the one the newer key list pins for it")]
    PreviousChanged { what: String },
    #[error("{what}: signed by key {key_id}, which key list {sequence} (signed by {by}) revoked")]
    Revoked {
        what: String,
        key_id: String,
        sequence: u64,
        by: String,
    },
    #[error("{what}: cannot fetch it: {message}")]
    Fetch { what: String, message: String },
    #[error("the trust state {} is unreadable: {message}", path.display())]
    BadState { path: PathBuf, message: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Sign(#[from] SignError),
}

impl crate::diag::Hint for TrustError {
    fn hint(&self) -> String {
        match self {
            TrustError::BadList { .. } => "a key list is the keys.json `rocforge key rotate` writes (docs/security.md); ask the publisher for an intact one".into(),
            TrustError::Unsigned { .. } => "a key list counts only with its .minisig signature by an already trusted key; ask the publisher to publish it".into(),
            TrustError::Tampered { .. } | TrustError::PreviousChanged { .. } => {
                "do not trust this release directory: its key lists are not what their signers signed".into()
            }
            TrustError::NotAllowed { .. } | TrustError::Revoked { .. } => {
                "a revoked key may have leaked; do not trust what it signed. Fetch the publisher's current release and key list".into()
            }
            TrustError::Replay { .. } => {
                "the server (or a mirror) serves an older key list than one seen before; fetch from the publisher directly".into()
            }
            TrustError::TooLong { .. } => {
                "the release's key lists chain back further than rocforge follows; add the publisher's current key to [trust] keys after checking it".into()
            }
            TrustError::Fetch { .. } => "check the connection and the release directory".into(),
            TrustError::BadState { .. } => format!(
                "it records revoked keys and the newest key list seen; restore it, or remove it (losing that record); {STATE_ENV} names another directory"
            ),
            TrustError::Io { .. } => format!("check the path and its permissions ({STATE_ENV} names another state directory)"),
            TrustError::Sign(e) => e.hint(),
        }
    }
}

/// A revoked key: by which list (sequence) and signer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Revocation {
    /// The public key (`RW…`).
    pub key: String,
    pub sequence: u64,
    /// The key ID that signed the revoking list.
    pub by: String,
}

/// The newest key list accepted through one anchoring key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Seen {
    pub sequence: u64,
    pub sha256: String,
}

/// What an installer remembers (`<state dir>/trust.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct State {
    #[serde(default)]
    pub schema: String,
    /// By the key ID that anchors a chain (a key trusted without a list).
    #[serde(default)]
    pub seen: BTreeMap<String, Seen>,
    /// By key ID.
    #[serde(default)]
    pub revoked: BTreeMap<String, Revocation>,
}

/// `$ROCFORGE_STATE`, else `$XDG_STATE_HOME/rocforge`, else `~/.local/state/rocforge`.
pub fn default_state_dir() -> PathBuf {
    if let Some(p) = std::env::var_os(STATE_ENV) {
        return PathBuf::from(p);
    }
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("rocforge")
}

/// The state and where it is kept.
#[derive(Debug)]
pub struct StateFile {
    pub path: PathBuf,
    pub state: State,
    /// Whether [`StateFile::save`] writes (false for a dry run, which must change nothing).
    persist: bool,
}

impl StateFile {
    /// Reads `path`; a missing file is an empty state.
    pub fn load(path: &Path) -> Result<StateFile, TrustError> {
        let state = match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| TrustError::BadState {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(source) => {
                return Err(TrustError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Ok(StateFile {
            path: path.to_path_buf(),
            state,
            persist: true,
        })
    }

    /// The default state file ([`default_state_dir`]/trust.json).
    pub fn load_default() -> Result<StateFile, TrustError> {
        StateFile::load(&default_state_dir().join(STATE_FILE))
    }

    /// The same state, never saved: what a dry run checks against.
    pub fn read_only(self) -> StateFile {
        StateFile {
            persist: false,
            ..self
        }
    }

    pub fn save(&self) -> Result<(), TrustError> {
        if !self.persist {
            return Ok(());
        }
        let mut s = self.state.clone();
        s.schema = STATE_SCHEMA.into();
        let mut bytes = serde_json::to_vec_pretty(&s).expect("plain data");
        bytes.push(b'\n');
        let io = |source| TrustError::Io {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        crate::fsutil::write_atomic(&self.path, &bytes).map_err(io)
    }
}

/// A key list file's bytes and its signature's text (None when it has none).
#[derive(Debug, Clone)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub signature: Option<String>,
}

/// Where key lists come from: a release directory, local or remote.
pub trait ListSource {
    /// `name` (keys.json, keys-N.json) and `name.minisig`; None when `name` is absent.
    fn fetch(&mut self, name: &str) -> Result<Option<Fetched>, String>;
    /// `name` as messages show it (its URL or path).
    fn describe(&self, name: &str) -> String;
}

/// A minisign signature is a few hundred bytes.
const MAX_SIG_BYTES: u64 = 64 << 10;

/// Key lists in a local directory.
pub struct DirSource {
    pub dir: PathBuf,
}

impl ListSource for DirSource {
    fn fetch(&mut self, name: &str) -> Result<Option<Fetched>, String> {
        use std::io::Read;
        let p = self.dir.join(name);
        let f = match crate::fsutil::open_regular(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        let mut bytes = Vec::new();
        f.take(MAX_KEY_LIST_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        let signature = crate::fsutil::read_regular(&sign::signature_path(&p), MAX_SIG_BYTES)
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        Ok(Some(Fetched { bytes, signature }))
    }

    fn describe(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

/// The keys to check signatures against, after the key lists.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub keys: Vec<PublicKey>,
    /// Every revocation known (the state's and the lists'), by key ID.
    pub revoked: BTreeMap<String, Revocation>,
    /// The chain applied, if a key list was found and anchored.
    pub chain: Option<Chain>,
    /// Lists that were found but not used, and why (for the caller to report).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Chain {
    /// The newest list's sequence.
    pub sequence: u64,
    /// How many lists were applied.
    pub lists: usize,
    /// The key ID trusted without a list that the chain starts from.
    pub anchor: String,
    /// Key IDs trusted through the lists.
    pub added: Vec<String>,
}

impl Resolved {
    /// The roots alone (no key list), minus the keys `state` records as revoked.
    pub fn from_roots(roots: &[PublicKey], state: &State) -> Resolved {
        Resolved::roots(roots, state, Vec::new())
    }

    fn roots(roots: &[PublicKey], state: &State, notes: Vec<String>) -> Resolved {
        Resolved {
            keys: roots
                .iter()
                .filter(|k| !state.revoked.contains_key(&id(k)))
                .cloned()
                .collect(),
            revoked: state.revoked.clone(),
            chain: None,
            notes,
        }
    }

    /// Checks a signature against the resolved keys; a signature by a revoked key says so.
    pub fn verify_bytes(
        &self,
        data: &[u8],
        sig_text: &str,
        what: &str,
    ) -> Result<sign::Verified, TrustError> {
        self.explain(
            sign::verify_bytes(&self.keys, data, sig_text, what),
            sig_text,
            what,
        )
    }

    pub fn verify_file(&self, path: &Path, sig_path: &Path) -> Result<sign::Verified, TrustError> {
        let r = sign::verify_file(&self.keys, path, sig_path);
        let sig = crate::fsutil::read_regular(sig_path, MAX_SIG_BYTES)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default();
        self.explain(r, &sig, &path.display().to_string())
    }

    fn explain(
        &self,
        r: Result<sign::Verified, SignError>,
        sig_text: &str,
        what: &str,
    ) -> Result<sign::Verified, TrustError> {
        if let Err(SignError::Untrusted { .. } | SignError::NoKeys { .. }) = &r
            && let Ok(sbox) = minisign::SignatureBox::from_string(sig_text)
        {
            let key_id = sign::key_id(sbox.keynum());
            if let Some(rv) = self.revoked.get(&key_id) {
                return Err(TrustError::Revoked {
                    what: what.into(),
                    key_id,
                    sequence: rv.sequence,
                    by: rv.by.clone(),
                });
            }
        }
        r.map_err(TrustError::Sign)
    }
}

fn id(k: &PublicKey) -> String {
    sign::key_id(k.keynum())
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn parse_list(what: &str, bytes: &[u8]) -> Result<KeyList, TrustError> {
    let bad = |message: String| TrustError::BadList {
        what: what.into(),
        message,
    };
    if bytes.len() as u64 > MAX_KEY_LIST_BYTES {
        return Err(bad(format!("larger than {MAX_KEY_LIST_BYTES} bytes")));
    }
    let list: KeyList = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    if !list.schema.starts_with("rocforge.keys/1") {
        return Err(bad(format!(
            "schema {:?}, expected {KEY_LIST_SCHEMA}",
            list.schema
        )));
    }
    if list.sequence == 0 {
        return Err(bad("sequence 0; sequences start at 1".into()));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign::SecretKey;

    struct Keys {
        sk: SecretKey,
        pk: PublicKey,
    }

    fn key(dir: &Path, name: &str) -> Keys {
        let g = sign::generate(&dir.join(name), None).unwrap();
        let sk = sign::load_secret(&g.secret, None).unwrap();
        let pk = sign::parse_public(&g.public_key).unwrap();
        Keys { sk, pk }
    }

    fn resolve_dir(roots: &[PublicKey], dir: &Path, state: &Path) -> Result<Resolved, TrustError> {
        let mut st = StateFile::load(state).unwrap();
        resolve(
            roots,
            &mut DirSource {
                dir: dir.to_path_buf(),
            },
            KEY_LIST_NAME,
            &mut st,
        )
    }

    fn ids(r: &Resolved) -> Vec<String> {
        let mut v: Vec<String> = r.keys.iter().map(id).collect();
        v.sort();
        v
    }

    #[test]
    fn a_chain_of_rotations_is_followed_from_the_first_key() {
        let t = tempfile::tempdir().unwrap();
        let (a, b, c) = (key(t.path(), "a"), key(t.path(), "b"), key(t.path(), "c"));
        let rel = t.path().join("rel");
        std::fs::create_dir_all(&rel).unwrap();
        let out = rel.join(KEY_LIST_NAME);
        let r1 = rotate(&a.sk, std::slice::from_ref(&b.pk), &[], &out).unwrap();
        assert_eq!(r1.list.sequence, 1);
        let r2 = rotate(
            &b.sk,
            std::slice::from_ref(&c.pk),
            std::slice::from_ref(&a.pk),
            &out,
        )
        .unwrap();
        assert_eq!(r2.list.sequence, 2);
        assert!(rel.join("keys-1.json").is_file() && rel.join("keys-2.json").is_file());
        let state = t.path().join("state/trust.json");
        // Trusting only A: B and C through the chain; A revoked by list 2.
        let r = resolve_dir(std::slice::from_ref(&a.pk), &rel, &state).unwrap();
        let mut want = vec![id(&b.pk), id(&c.pk)];
        want.sort();
        assert_eq!(ids(&r), want);
        let chain = r.chain.unwrap();
        assert_eq!((chain.sequence, chain.lists), (2, 2));
        assert_eq!(chain.anchor, id(&a.pk));
        // The revocation is remembered where no list is published.
        let empty = t.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let r = resolve_dir(std::slice::from_ref(&a.pk), &empty, &state).unwrap();
        assert!(r.keys.is_empty());
        let sig = sign::sign_reader(&a.sk, &b"x"[..], "x").unwrap();
        assert!(matches!(
            r.verify_bytes(b"x", &sig, "x"),
            Err(TrustError::Revoked { sequence: 2, .. })
        ));
        // A third rotation by the revoked A is refused.
        assert!(matches!(
            rotate(&a.sk, std::slice::from_ref(&c.pk), &[], &out),
            Err(TrustError::NotAllowed { .. })
        ));
        // The same chain again is fine (idempotent); a replayed older head is not.
        resolve_dir(std::slice::from_ref(&a.pk), &rel, &state).unwrap();
        let old = t.path().join("old");
        std::fs::create_dir_all(&old).unwrap();
        for f in ["keys-1.json", "keys-1.json.minisig"] {
            std::fs::copy(rel.join(f), old.join(f.replace("keys-1", "keys"))).unwrap();
        }
        let err = resolve_dir(std::slice::from_ref(&a.pk), &old, &state).unwrap_err();
        assert!(
            matches!(
                err,
                TrustError::Replay {
                    sequence: 1,
                    seen: 2,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn tampered_untrusted_and_broken_lists() {
        let t = tempfile::tempdir().unwrap();
        let (a, b, u) = (key(t.path(), "a"), key(t.path(), "b"), key(t.path(), "u"));
        let rel = t.path().join("rel");
        std::fs::create_dir_all(&rel).unwrap();
        let out = rel.join(KEY_LIST_NAME);
        rotate(&a.sk, std::slice::from_ref(&b.pk), &[], &out).unwrap();
        let state = t.path().join("trust.json");
        // Tampered: another key slipped in after signing.
        let text = std::fs::read_to_string(&out).unwrap();
        let evil = text.replace(&sign::public_base64(&b.pk), &sign::public_base64(&u.pk));
        std::fs::write(&out, &evil).unwrap();
        let err = resolve_dir(std::slice::from_ref(&a.pk), &rel, &state).unwrap_err();
        assert!(matches!(err, TrustError::Tampered { .. }), "{err}");
        // Signed by an untrusted key: not used, with a note.
        let other = t.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        rotate(
            &u.sk,
            std::slice::from_ref(&u.pk),
            &[],
            &other.join(KEY_LIST_NAME),
        )
        .unwrap();
        let r = resolve_dir(std::slice::from_ref(&a.pk), &other, &state).unwrap();
        assert_eq!(ids(&r), vec![id(&a.pk)]);
        assert!(
            r.chain.is_none() && r.notes[0].contains("not trusted"),
            "{:?}",
            r.notes
        );
        // A previous list that is not the one the newer list pins.
        let chain = t.path().join("chain");
        std::fs::create_dir_all(&chain).unwrap();
        let out = chain.join(KEY_LIST_NAME);
        rotate(&a.sk, std::slice::from_ref(&b.pk), &[], &out).unwrap();
        rotate(&b.sk, std::slice::from_ref(&u.pk), &[], &out).unwrap();
        let p = chain.join("keys-1.json");
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.push(b' ');
        std::fs::write(&p, bytes).unwrap();
        let err = resolve_dir(std::slice::from_ref(&a.pk), &chain, &state).unwrap_err();
        assert!(matches!(err, TrustError::PreviousChanged { .. }), "{err}");
        // Unsigned.
        std::fs::remove_file(chain.join("keys.json.minisig")).unwrap();
        let err = resolve_dir(std::slice::from_ref(&a.pk), &chain, &state).unwrap_err();
        assert!(matches!(err, TrustError::Unsigned { .. }), "{err}");
    }

    #[test]
    fn names() {
        assert!(is_key_list_name("keys.json") && is_key_list_name("keys-12.json"));
        assert!(!is_key_list_name("keys-.json") && !is_key_list_name("keys-1a.json"));
        assert_eq!(numbered_sequence("keys-3.json"), Some(3));
    }
}
