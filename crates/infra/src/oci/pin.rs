//! Pinning an image tag to its manifest digest.

use reqwest::blocking::Client;
use reqwest::header::{ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};

use super::auth::anonymous_token;
use super::{ImageName, MANIFEST_TYPES, OciError};

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
        message: e.without_url().to_string(),
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
