//! A recipe's extra inputs fetched by their pins, and unpacked once into the source cache when
//! the recipe asks for it.

use std::path::PathBuf;

use super::fetch::fetch_file;
use super::unpack::unpack_tar;
use super::{SourceError, Sources};
use crate::catalog::lock::InputPin;
use crate::download;
use crate::recipe::ExtraInput;
use crate::source::resolved::Resolved;

pub(super) fn fetch_inputs(
    s: &Sources<'_>,
    component: &str,
    inputs: &[ExtraInput],
    resolved: &Resolved,
) -> Result<Vec<(String, PathBuf)>, SourceError> {
    let mut out = Vec::new();
    for input in inputs {
        // An md5-only input is fetched by the sha256 `rocforge lock` recorded, never by its md5.
        let pin = resolved
            .input(&input.name)
            .cloned()
            .or_else(|| input.sha256.clone().map(InputPin::Sha256))
            .unwrap_or(InputPin::Unlocked);
        let sha256 = match pin {
            InputPin::Sha256(sha) => sha,
            // As with an unlocked tag: without --locked the md5 is checked afresh (the sha256
            // of what passed is remembered in the cache); `rocforge lock` makes it a pin.
            InputPin::Unlocked | InputPin::Stale { .. } if !s.locked && !s.offline => {
                md5_checked(s, component, input)?
            }
            InputPin::Unlocked => {
                return Err(SourceError::InputUnlocked {
                    component: component.to_string(),
                    input: input.name.clone(),
                    url: input.url.clone(),
                });
            }
            InputPin::Stale { locked, recipe } => {
                return Err(SourceError::InputStale {
                    component: component.to_string(),
                    input: input.name.clone(),
                    locked,
                    recipe,
                });
            }
        };
        let sha256 = &sha256;
        let file = fetch_file(s, component, &input.url, sha256)?;
        if !input.unpack {
            out.push((input.name.clone(), file));
            continue;
        }
        let dir = s.cache.root().join("inputs").join(sha256);
        if !dir.is_dir() {
            // Unpacking left half-done by a killed run.
            crate::fsutil::reap_temp(&s.cache.root().join("inputs"), &format!(".{}.tmp-", sha256));
            let staged =
                crate::fsutil::Staged::dir_beside(&dir).map_err(|source| SourceError::Io {
                    component: component.to_string(),
                    path: dir.display().to_string(),
                    source,
                })?;
            unpack_tar(component, &file, staged.path(), false)?;
            crate::source::tree::sanitize(staged.path()).map_err(|source| SourceError::Io {
                component: component.to_string(),
                path: dir.display().to_string(),
                source,
            })?;
            // Another process may have won the race (the commit fails, ours is removed); its
            // copy is identical.
            let _ = staged.commit();
        }
        out.push((input.name.clone(), dir));
    }
    Ok(out)
}

/// An input pinned by md5 only and not by rocforge.lock: downloaded and checked against the
/// md5 once, then found again through `downloads/md5-<md5>` (the sha256 of the verified file,
/// which is stored under that sha256 like any download). Returns the sha256.
fn md5_checked(
    s: &Sources<'_>,
    component: &str,
    input: &ExtraInput,
) -> Result<String, SourceError> {
    let md5 = input
        .md5
        .as_deref()
        .expect("only md5 inputs lack a sha256")
        .to_ascii_lowercase();
    let memo = s.cache.root().join("downloads").join(format!("md5-{md5}"));
    if let Ok(sha) = std::fs::read_to_string(&memo)
        && s.cache.download_path(sha.trim()).is_file()
    {
        return Ok(sha.trim().to_string());
    }
    let fetch_url = s.config.resolve(&input.url);
    let client = download::client_with(&s.download);
    let (_, sha) = download::download_md5(
        &client,
        &fetch_url,
        &md5,
        &s.cache.root().join("downloads"),
        &s.download,
        s.reporter,
    )
    .map_err(|source| SourceError::Download {
        component: component.to_string(),
        source,
    })?;
    crate::fsutil::write_atomic(&memo, sha.as_bytes()).map_err(|source| SourceError::Io {
        component: component.to_string(),
        path: memo.display().to_string(),
        source,
    })?;
    s.reporter.note(&format!(
        "{component}: input {} is pinned by md5 only ({}): checked; run `rocforge lock` to pin its sha256 {sha}",
        input.name, input.url
    ));
    Ok(sha)
}
