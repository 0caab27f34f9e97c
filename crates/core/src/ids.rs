//! The vocabulary every saved format shares: content keys, sha256 digests, component names,
//! and the artifact identity that a store entry, a tarball's manifest, a release index, an
//! install receipt and a test run's results all carry.
//!
//! Each type checks its text when it is read (JSON from a server, a cache or an old file), so a
//! malformed key or digest is refused where it enters, naming the value, rather than deep in
//! an install. The serialized text is exactly the string the untyped fields held, so files
//! written before these types existed read back byte for byte.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};

use crate::arch::TargetId;
// Refused values are shown cut short with control characters escaped: a server's reply must
// not move the terminal's cursor.
use crate::redact::shown;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("\"{value}\" is not a {what}: {why}")]
    Malformed {
        what: &'static str,
        value: String,
        why: &'static str,
    },
}

fn lower_hex(what: &'static str, s: &str, len: usize) -> Result<(), IdError> {
    let bad = |why| IdError::Malformed {
        what,
        value: shown(s),
        why,
    };
    if s.len() != len {
        return Err(bad(if len == 64 {
            "it must be 64 hex digits"
        } else {
            "wrong length"
        }));
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(bad("it must be lowercase hex digits"));
    }
    Ok(())
}

/// Implements the string-like surface the id types share: reading them checks, writing them
/// is the plain string, and they compare and borrow as `str`.
macro_rules! string_id {
    ($ty:ident, $check:expr, $schema_pattern:expr, $description:expr) => {
        impl $ty {
            /// Checks `s` and takes it.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                let check: fn(&str) -> Result<(), IdError> = $check;
                check(s)?;
                Ok(Self(s.to_string()))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl Deref for $ty {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl AsRef<std::path::Path> for $ty {
            fn as_ref(&self) -> &std::path::Path {
                std::path::Path::new(&self.0)
            }
        }
        impl std::borrow::Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Display for $ty {
            // `pad`, so tables can align it as they align a `String` (`{:<20}`).
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }
        impl PartialEq<str> for $ty {
            fn eq(&self, o: &str) -> bool {
                self.0 == o
            }
        }
        impl PartialEq<&str> for $ty {
            fn eq(&self, o: &&str) -> bool {
                self.0 == *o
            }
        }
        impl PartialEq<String> for $ty {
            fn eq(&self, o: &String) -> bool {
                &self.0 == o
            }
        }
        impl PartialEq<$ty> for String {
            fn eq(&self, o: &$ty) -> bool {
                *self == o.0
            }
        }
        impl PartialEq<$ty> for &str {
            fn eq(&self, o: &$ty) -> bool {
                *self == o.0
            }
        }
        impl From<$ty> for String {
            fn from(v: $ty) -> String {
                v.0
            }
        }
        impl std::str::FromStr for $ty {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }
        impl TryFrom<String> for $ty {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                let check: fn(&str) -> Result<(), IdError> = $check;
                check(&s)?;
                Ok(Self(s))
            }
        }
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::try_from(s).map_err(serde::de::Error::custom)
            }
        }
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": $schema_pattern,
                    "description": $description,
                })
            }
        }
    };
}

/// A build's content key: the sha256 (64 lowercase hex digits) of its canonical hash input.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentKey(String);

string_id!(
    ContentKey,
    |s| lower_hex("content key", s, 64),
    "^[0-9a-f]{64}$",
    "A build's content key: the sha256 of its canonical hash input (`rocforge plan --explain`)."
);

impl ContentKey {
    /// The key of a digest computed here (always well formed).
    pub fn from_digest(digest: &[u8]) -> Self {
        Self(hex::encode(digest))
    }

    /// The short form shown in plans and tables.
    pub fn short(&self) -> &str {
        &self.0[..12.min(self.0.len())]
    }
}

/// A sha256 digest of some bytes (a tarball, a source archive): 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest(String);

string_id!(
    Sha256Digest,
    |s| lower_hex("sha256 digest", s, 64),
    "^[0-9a-f]{64}$",
    "A sha256 digest, 64 lowercase hex digits."
);

impl Sha256Digest {
    pub fn from_digest(digest: &[u8]) -> Self {
        Self(hex::encode(digest))
    }
}

/// An OCI content digest as registries name manifests: `sha256:` and 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OciDigest(String);

fn check_oci_digest(s: &str) -> Result<(), IdError> {
    match s.strip_prefix("sha256:") {
        Some(hex) => lower_hex("sha256 OCI digest", hex, 64).map_err(|_| IdError::Malformed {
            what: "sha256 OCI digest",
            value: shown(s),
            why: "it must be sha256: and 64 lowercase hex digits",
        }),
        None => Err(IdError::Malformed {
            what: "sha256 OCI digest",
            value: shown(s),
            why: "it must start with sha256:",
        }),
    }
}

string_id!(
    OciDigest,
    check_oci_digest,
    "^sha256:[0-9a-f]{64}$",
    "An OCI content digest: sha256: and 64 lowercase hex digits."
);

/// A component's name as recipes spell it: at most 64 lowercase ASCII letters, digits, `-`,
/// `_` and `.`, starting with a letter or digit. It names store paths, tarballs and receipts,
/// so nothing else may pass (no `/`, no `..`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComponentName(String);

/// The rule recipes, manifests and receipts share.
pub fn is_component_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && s.len() <= 64
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
}

fn check_component(s: &str) -> Result<(), IdError> {
    if is_component_name(s) {
        return Ok(());
    }
    Err(IdError::Malformed {
        what: "component name",
        value: shown(s),
        why: "at most 64 lowercase letters, digits, '-', '_' and '.', starting with a letter or digit",
    })
}

impl ComponentName {
    /// A name the recipe reader already checked (every plan step's, every recipe's): taken as
    /// is, since it was refused, with its file and line, where it was read.
    pub fn checked(s: &str) -> Self {
        debug_assert!(is_component_name(s), "{s}");
        Self(s.to_string())
    }
}

string_id!(
    ComponentName,
    check_component,
    "^[a-z0-9][a-z0-9._-]{0,63}$",
    "A component's name as its recipe spells it, e.g. rocblas."
);

/// Serde for target IDs as their canonical text (`gfx90c`, `gfx90c:xnack-`); the syntax is
/// checked, not the processor table (an index may name a target this build does not know).
impl<'de> Deserialize<'de> for TargetId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for TargetId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TargetId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^gfx([0-9a-f]+|[0-9]+(-[0-9]+)*-generic)(:(sramecc|xnack)[+-]){0,2}$",
            "description": "An LLVM AMDGPU target ID: a processor or generic target with optional features, e.g. gfx90c, gfx90c:xnack- or gfx9-generic.",
        })
    }
}

/// What one built artifact is: the fields a store entry, a tarball's manifest, a release
/// index entry, an install receipt and a test run's results share, in this order, flattened
/// into each (so their JSON is unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactId {
    /// The component's name.
    pub name: ComponentName,
    pub version: String,
    /// The release line it was built in ("" in files written before lines were recorded).
    #[serde(default)]
    pub release: String,
    /// The GPU targets it was built for, canonical and sorted.
    pub targets: Vec<TargetId>,
    /// The content key of its build.
    pub key: ContentKey,
}

impl ArtifactId {
    /// The targets as `--arch` takes them.
    pub fn target_list(&self) -> String {
        crate::arch::comma_list(&self.targets)
    }
}

/// Lets a format that carries an [`ArtifactId`] (flattened) be read as one: `manifest.name`,
/// `receipt.key`.
#[macro_export]
macro_rules! carries_artifact_id {
    ($ty:ty) => {
        impl std::ops::Deref for $ty {
            type Target = $crate::ids::ArtifactId;
            fn deref(&self) -> &$crate::ids::ArtifactId {
                &self.id
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "c0219fbf00918e90e71ed69fcc858745f99c210c34e9a2c97ab8b46c85ebd0f4";

    #[test]
    fn ids_read_what_they_write_and_refuse_the_rest() {
        let k: ContentKey = serde_json::from_str(&format!("\"{K}\"")).unwrap();
        assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{K}\""));
        assert_eq!(k.short(), "c0219fbf0091");
        assert_eq!(
            format!("[{:<9}]", ComponentName::parse("rocblas").unwrap()),
            "[rocblas  ]"
        );
        for bad in [
            "ab",
            &K.to_uppercase(),
            &format!("{K}0"),
            "../../etc/passwd",
        ] {
            let e = serde_json::from_str::<ContentKey>(&format!("\"{bad}\"")).unwrap_err();
            assert!(e.to_string().contains("is not a content key"), "{e}");
        }
        assert!(ComponentName::parse("rocblas").is_ok());
        assert!(ComponentName::parse("hipblas-common").is_ok());
        for bad in ["", "../x", "a/b", "Rocblas", ".hidden", "a b"] {
            assert!(ComponentName::parse(bad).is_err(), "{bad}");
        }
        let t: Vec<TargetId> = serde_json::from_str(r#"["gfx90c","gfx90c:xnack-"]"#).unwrap();
        assert_eq!(crate::arch::comma_list(&t), "gfx90c,gfx90c:xnack-");
        assert!(serde_json::from_str::<TargetId>("\"gfx90c:xnack\"").is_err());
    }

    #[test]
    fn the_identity_is_flattened_field_for_field() {
        #[derive(Serialize, Deserialize)]
        struct Holder {
            schema: String,
            #[serde(flatten)]
            id: ArtifactId,
            url: String,
        }
        let text = format!(
            r#"{{"schema":"s","name":"rocblas","version":"4.4.1","release":"debian-6.4","targets":["gfx902","gfx90c"],"key":"{K}","url":"u"}}"#
        );
        let h: Holder = serde_json::from_str(&text).unwrap();
        assert_eq!(h.id.target_list(), "gfx902,gfx90c");
        assert_eq!(serde_json::to_string(&h).unwrap(), text);
    }
}
