//! Just enough of the OCI distribution API to pin an image tag to its manifest digest.

use reqwest::blocking::Client;
use reqwest::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    pub registry: String,
    pub repository: String,
    pub tag: String,
}

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("malformed image reference \"{0}\" (expected registry/name:tag)")]
    Malformed(String),
    #[error("cannot reach registry {registry} for {reference}: {message}")]
    Unreachable {
        registry: String,
        reference: String,
        message: String,
    },
    #[error("registry {registry} answered {status} for {reference}")]
    Status {
        registry: String,
        reference: String,
        status: u16,
    },
    #[error("registry {registry} gave no digest for {reference}")]
    NoDigest { registry: String, reference: String },
}

impl OciError {
    pub fn hint(&self) -> String {
        match self {
            OciError::Malformed(_) => "write e.g. ghcr.io/rocforge/builder:rocm-6.4.4".into(),
            OciError::Unreachable { .. } => {
                "check the network; without registry access run `rocforge lock --skip-images` to pin sources only".into()
            }
            OciError::Status { status: 404, .. } => "the image or tag does not exist (yet): publish it, or build it locally with `rocforge image build`".into(),
            OciError::Status { .. } | OciError::NoDigest { .. } => "check the image reference and your registry credentials".into(),
        }
    }
}

impl ImageName {
    pub fn parse(reference: &str) -> Result<ImageName, OciError> {
        let bad = || OciError::Malformed(reference.to_string());
        let (registry, rest) = reference.split_once('/').ok_or_else(bad)?;
        if !registry.contains('.') && !registry.contains(':') && registry != "localhost" {
            return Err(bad());
        }
        let (repository, tag) = rest.rsplit_once(':').ok_or_else(bad)?;
        if repository.is_empty() || tag.is_empty() || tag.contains('/') {
            return Err(bad());
        }
        Ok(ImageName {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.to_string(),
        })
    }

    /// Loopback registries speak plain HTTP (as test and local registries do); others HTTPS.
    pub fn base_url(&self) -> String {
        let host = self.registry.split(':').next().unwrap_or("");
        let scheme = if host == "localhost" || host.starts_with("127.") {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.registry)
    }
}

const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// The digest a tag points at, asking the registry (anonymous bearer tokens are fetched when
/// the registry asks for them, as ghcr.io does for public images).
pub fn resolve_digest(client: &Client, reference: &str) -> Result<String, OciError> {
    let name = ImageName::parse(reference)?;
    let url = format!(
        "{}/v2/{}/manifests/{}",
        name.base_url(),
        name.repository,
        name.tag
    );
    let unreachable = |e: reqwest::Error| OciError::Unreachable {
        registry: name.registry.clone(),
        reference: reference.to_string(),
        message: e.to_string(),
    };
    let mut resp = client
        .head(&url)
        .header(ACCEPT, MANIFEST_TYPES)
        .send()
        .map_err(unreachable)?;
    if resp.status().as_u16() == 401
        && let Some(challenge) = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
        && let Some(token) = anonymous_token(client, challenge)
    {
        resp = client
            .head(&url)
            .header(ACCEPT, MANIFEST_TYPES)
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .send()
            .map_err(unreachable)?;
    }
    if !resp.status().is_success() {
        return Err(OciError::Status {
            registry: name.registry.clone(),
            reference: reference.to_string(),
            status: resp.status().as_u16(),
        });
    }
    resp.headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .filter(|d| d.starts_with("sha256:"))
        .map(str::to_string)
        .ok_or(OciError::NoDigest {
            registry: name.registry.clone(),
            reference: reference.to_string(),
        })
}

/// Follows a `Bearer realm="…",service="…",scope="…"` challenge for an anonymous token.
fn anonymous_token(client: &Client, challenge: &str) -> Option<String> {
    let params = challenge.strip_prefix("Bearer ")?;
    let mut realm = None;
    let mut query = Vec::new();
    for part in params.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        let v = v.trim_matches('"').to_string();
        if k == "realm" {
            realm = Some(v);
        } else {
            query.push((k.to_string(), v));
        }
    }
    let url = reqwest::Url::parse_with_params(&realm?, &query).ok()?;
    let resp = client.get(url).send().ok()?;
    let v: serde_json::Value = serde_json::from_reader(resp).ok()?;
    v.get("token")
        .or_else(|| v.get("access_token"))?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_references() {
        let n = ImageName::parse("ghcr.io/rocforge/builder:rocm-6.4.4").unwrap();
        assert_eq!(
            (n.registry.as_str(), n.repository.as_str(), n.tag.as_str()),
            ("ghcr.io", "rocforge/builder", "rocm-6.4.4")
        );
        assert_eq!(
            ImageName::parse("localhost:5000/x:1").unwrap().base_url(),
            "http://localhost:5000"
        );
        assert!(ImageName::parse("builder:latest").is_err());
        assert!(ImageName::parse("ghcr.io/x").is_err());
    }
}
