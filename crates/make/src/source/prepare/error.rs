//! Why a source could not be prepared, and what the user can do about it.

use crate::download::DownloadError;
use crate::source::derive::DeriveError;
use crate::source::git::GitError;
use crate::source::patch::PatchError;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{component}: {source}")]
    Git { component: String, source: GitError },
    #[error("{component}: {source}")]
    Download {
        component: String,
        source: DownloadError,
    },
    #[error("{component}: {source}")]
    Patch {
        component: String,
        source: Box<PatchError>,
    },
    #[error("{component}: {source}")]
    Derive {
        component: String,
        source: DeriveError,
    },
    #[error("{component}: {source}")]
    Logic {
        component: String,
        source: Box<crate::catalog::logic::LogicError>,
    },
    #[error(
        "{component}: tag {tag} of {url} is not pinned in rocforge.lock, and --locked refuses unpinned inputs"
    )]
    Unlocked {
        component: String,
        url: String,
        tag: String,
    },
    #[error(
        "{component}: input {input} ({url}) is pinned by md5 only and rocforge.lock has no sha256 for it"
    )]
    InputUnlocked {
        component: String,
        input: String,
        url: String,
    },
    #[error(
        "{component}: input {input}: rocforge.lock has {locked}, but the recipe now says {recipe}"
    )]
    InputStale {
        component: String,
        input: String,
        locked: String,
        recipe: String,
    },
    #[error("{component}: rocforge.lock pins {locked}, but the recipe now says {recipe}")]
    Stale {
        component: String,
        locked: String,
        recipe: String,
    },
    #[error("{component}: path source {path}: {why}")]
    Path {
        component: String,
        path: String,
        why: String,
    },
    #[error("{component}: cannot unpack {what}: {why}")]
    Unpack {
        component: String,
        what: String,
        why: String,
    },
    #[error(
        "{component}: {} says version {}, but the source declares {} ({})",
        .diff.recipe_at, .diff.recipe, .diff.declared, .diff.cmake_at
    )]
    Version {
        component: String,
        diff: Box<VersionDiff>,
    },
    #[error("{component}: {path}: {source}")]
    Io {
        component: String,
        path: String,
        source: std::io::Error,
    },
    #[error("{component}: [[series]] {source}")]
    Series {
        component: String,
        source: Box<crate::source::series::SeriesError>,
    },
}

impl crate::diag::Hint for SourceError {
    fn hint(&self) -> String {
        match self {
            SourceError::Git { source, .. } => source.hint(),
            SourceError::Download { source, .. } => source.hint(),
            SourceError::Patch { source, .. } => source.hint(),
            SourceError::Derive { source, .. } => source.hint(),
            SourceError::Logic { source, .. } => source.hint(),
            SourceError::Unlocked { .. } => "run `rocforge lock` and commit rocforge.lock".into(),
            SourceError::InputUnlocked { .. } | SourceError::InputStale { .. } => "run `rocforge lock`: it downloads the file, checks the md5 and records its sha256 in rocforge.lock (the built-in catalog's lock is fixed: `rocforge catalog export DIR`, then `rocforge --recipes DIR/recipes lock`); without --locked the md5 is checked at each fetch instead".into(),
            SourceError::Stale { .. } => "the recipe changed since the lock was written: run `rocforge lock` (or `rocforge lock --check` in CI)".into(),
            SourceError::Path { .. } => "path sources are relative to the recipe's release directory and need a catalog on disk (--recipes)".into(),
            SourceError::Unpack { .. } => "the archive is damaged or not a tar archive (.tar, .tar.gz, .tgz, .tar.xz, .tar.zst)".into(),
            SourceError::Version { diff, .. } => format!("a package is named by the version of the source it holds: write version = \"{}\" at {}, or pin the tag or commit whose source declares {}", diff.declared, diff.recipe_at, diff.recipe),
            SourceError::Io { .. } => "check free disk space and permissions of the cache directory (ROCFORGE_CACHE)".into(),
            SourceError::Series { source, .. } => source.hint(),
        }
    }
}

/// A recipe's version against the one its source declares, each with where it is written.
#[derive(Debug)]
pub struct VersionDiff {
    /// `recipes/<release>/<component>.toml:<line>`
    pub recipe_at: String,
    pub recipe: String,
    pub declared: String,
    /// `[<subdir>/]CMakeLists.txt:<line>`
    pub cmake_at: String,
}
