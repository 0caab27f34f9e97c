//! Git sources.
//!
//! Two paths, chosen per source:
//! - libgit2 (git2) for ordinary repositories: objects are fetched into a bare repository in the
//!   cache (shallow, depth 1), and the pinned commit's tree is written into the staging
//!   directory. libgit2 refuses shallow fetches from local mirrors (`file://` or a path), and a
//!   whole-history fetch fails on a mirror that lacks objects of old commits, so local mirrors
//!   are fetched shallow by the git CLI into the same bare repository.
//! - the git CLI for what libgit2 cannot do: monorepos (`subdir`/`paths`), fetched as a partial
//!   clone (`--filter=blob:none`) with a sparse checkout of just the needed paths, and
//!   repositories with submodules.
//!
//! Either way the commit a tag resolves to is compared with the locked one.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::net::Cause;
use crate::process::{Cmd, ProcessError};
use crate::recipe::GitRef;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot reach {url}: {}", unreachable(url, *cause, message))]
    Unreachable {
        url: String,
        cause: Cause,
        message: String,
    },
    #[error("{url} has no {what}")]
    MissingRef { url: String, what: String },
    #[error("tag {tag} of {url} now points at {found}, but the lock pins {locked}")]
    Moved {
        url: String,
        tag: String,
        locked: String,
        found: String,
    },
    #[error("git failed for {url}: {message}")]
    Other { url: String, message: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl crate::diag::Hint for GitError {
    fn hint(&self) -> String {
        match self {
            GitError::Unreachable { url, .. } => format!(
                "check the network and the URL; offline, {}",
                crate::net::mirror_hint(url)
            ),
            GitError::MissingRef { .. } => "check the tag or rev in the recipe (`git ls-remote URL` lists what the repository has)".into(),
            GitError::Moved { .. } => "the tag was moved upstream; if the new commit is intended, run `rocforge lock` to re-pin it and review the change".into(),
            GitError::Other { .. } => "run with ROCFORGE_LOG=debug to see every git command".into(),
            GitError::Io { .. } => "check free disk space and permissions of the cache directory".into(),
        }
    }
}

fn unreachable(url: &str, cause: Cause, message: &str) -> String {
    match cause {
        Cause::Other => message.to_string(),
        _ => format!("{} ({message})", cause.explain(url)),
    }
}

fn other(url: &str) -> impl Fn(git2::Error) -> GitError + '_ {
    move |e| classify(url, e.message().to_string())
}

fn classify(url: &str, message: String) -> GitError {
    let m = message.to_ascii_lowercase();
    let unreachable = [
        "could not resolve",
        "failed to resolve",
        "connection refused",
        "failed to connect",
        "could not read from remote",
        "unable to connect",
        "not found",
        "does not appear to be a git repository",
        "no such file or directory",
        "timed out",
        "could not find repository",
        "unsupported url protocol",
    ];
    let cause = Cause::of_text(&message.replace(url, ""));
    if cause != Cause::Other || unreachable.iter().any(|p| m.contains(p)) {
        GitError::Unreachable {
            url: url.to_string(),
            cause,
            message: message.trim().to_string(),
        }
    } else {
        GitError::Other {
            url: url.to_string(),
            message: message.trim().to_string(),
        }
    }
}

fn from_process(url: &str, e: ProcessError) -> GitError {
    match &e {
        ProcessError::Spawn { .. } => GitError::Other {
            url: url.to_string(),
            message: format!("{e}; is git installed?"),
        },
        ProcessError::Failed { stderr, .. } => classify(url, stderr.trim().to_string()),
    }
}

/// Resolves a tag to the commit it names (peeling annotated tags), asking the remote.
pub fn resolve_tag(url: &str, tag: &str) -> Result<String, GitError> {
    let out = git()
        .args(["ls-remote", "--tags", url])
        .arg(format!("refs/tags/{tag}"))
        .arg(format!("refs/tags/{tag}^{{}}"))
        .run()
        .map_err(|e| from_process(url, e))?;
    let mut plain = None;
    for line in out.lines() {
        let mut parts = line.split_whitespace();
        let (Some(id), Some(name)) = (parts.next(), parts.next()) else {
            continue;
        };
        if name.ends_with("^{}") {
            return Ok(id.to_string());
        }
        plain = Some(id.to_string());
    }
    plain.ok_or_else(|| GitError::MissingRef {
        url: url.to_string(),
        what: format!("tag \"{tag}\""),
    })
}

fn git() -> Cmd {
    Cmd::new("git")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ADVICE", "0")
        .arg("-c")
        .arg("advice.detachedHead=false")
}

/// The cache directory of a URL's object store.
pub fn store_dir(cache: &Path, url: &str) -> PathBuf {
    let digest = hex::encode(Sha256::digest(url.as_bytes()));
    cache.join("git").join(&digest[..24])
}

/// What a fetch produced.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub commit: String,
    /// Commit time, for SOURCE_DATE_EPOCH.
    pub time: i64,
}

/// The libgit2 path: fetches `reference` of `url` into the cached bare repository and checks
/// the commit's tree out into `dest` (which must exist and be empty). `locked` is the commit
/// the lock pins, if any; the fetched commit must equal it.
pub fn fetch_and_checkout(
    cache: &Path,
    url: &str,
    reference: &GitRef,
    locked: Option<&str>,
    dest: &Path,
) -> Result<Fetched, GitError> {
    let dir = store_dir(cache, url);
    let io = |source| GitError::Io {
        path: dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    // One rocforge process at a time in a URL's object store. Under this lock no lock file of
    // libgit2's in it is live: one left by a kill -9 during a ref update would fail every
    // later fetch ("failed to lock file"), so it is removed.
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    let _lock = crate::fsutil::lock(
        &cache.join("locks"),
        &format!("git-{}", name.unwrap_or_default()),
        std::time::Duration::from_secs(6 * 3600),
        &|| {},
    )
    .map_err(io)?;
    remove_stale_locks(&dir, true);
    let repo = match git2::Repository::open_bare(&dir) {
        Ok(r) => r,
        Err(_) => git2::Repository::init_bare(&dir).map_err(other(url))?,
    };
    let commit_id = match reference {
        GitRef::Rev(rev) => {
            if repo
                .find_commit(git2::Oid::from_str(rev).map_err(other(url))?)
                .is_err()
            {
                fetch(&dir, url, &[format!("+{rev}:refs/rocforge/{rev}")]).or_else(|_| {
                    fetch(
                        &dir,
                        url,
                        &[
                            "+refs/tags/*:refs/tags/*".into(),
                            "+refs/heads/*:refs/rocforge/heads/*".into(),
                        ],
                    )
                })?;
            }
            rev.clone()
        }
        GitRef::Tag(tag) => {
            let local = peel_tag(&repo, tag);
            // A cached tag is trusted only when it agrees with the lock; otherwise ask the remote.
            let known = match (&local, locked) {
                (Some(c), Some(l)) if c == l => Some(c.clone()),
                (Some(c), None) => Some(c.clone()),
                _ => None,
            };
            match known {
                Some(c) => c,
                None => {
                    fetch(&dir, url, &[format!("+refs/tags/{tag}:refs/tags/{tag}")])?;
                    peel_tag(&reopen(&dir, url)?, tag).ok_or_else(|| GitError::MissingRef {
                        url: url.to_string(),
                        what: format!("tag \"{tag}\""),
                    })?
                }
            }
        }
    };
    if let (Some(l), GitRef::Tag(tag)) = (locked, reference)
        && l != commit_id
    {
        return Err(GitError::Moved {
            url: url.to_string(),
            tag: tag.clone(),
            locked: l.to_string(),
            found: commit_id,
        });
    }
    crate::fault::point("fetch");
    // A fetch by another process (the git CLI for local mirrors) added packs this handle has
    // not seen.
    let repo = reopen(&dir, url)?;
    let oid = git2::Oid::from_str(&commit_id).map_err(other(url))?;
    let commit = repo.find_commit(oid).map_err(|_| GitError::MissingRef {
        url: url.to_string(),
        what: format!("commit {commit_id}"),
    })?;
    let tree = commit.tree().map_err(other(url))?;
    write_tree(&repo, &tree, dest, Path::new("")).map_err(|e| match e {
        WriteError::Git(e) => other(url)(e),
        WriteError::Io(path, source) => GitError::Io {
            path: path.display().to_string(),
            source,
        },
        WriteError::BadName(name) => GitError::Other {
            url: url.to_string(),
            message: format!(
                "commit {commit_id} holds a path rocforge will not write: {}",
                name.display()
            ),
        },
    })?;
    Ok(Fetched {
        commit: commit_id,
        time: commit.time().seconds(),
    })
}

/// Removes `*.lock` files at the top of a bare repository and anywhere under `refs/`.
fn remove_stale_locks(dir: &Path, top: bool) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && (!top || e.file_name() == "refs") {
            remove_stale_locks(&e.path(), false);
        } else if !is_dir && e.file_name().to_string_lossy().ends_with(".lock") {
            tracing::info!("removing {} left by a killed run", e.path().display());
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn peel_tag(repo: &git2::Repository, tag: &str) -> Option<String> {
    let r = repo.find_reference(&format!("refs/tags/{tag}")).ok()?;
    Some(r.peel_to_commit().ok()?.id().to_string())
}

fn reopen(dir: &Path, url: &str) -> Result<git2::Repository, GitError> {
    git2::Repository::open_bare(dir).map_err(other(url))
}

/// A mirror on this machine: a `file://` URL or a path.
fn is_local(url: &str) -> bool {
    url.starts_with("file://") || url.starts_with('/')
}

/// Fetches `refspecs` of `url` into the bare repository `dir`, shallow (depth 1): only the
/// objects the wanted commits' trees need, so a mirror without the rest of the history (a
/// snapshot without the blobs of old large files) serves as well as a full one.
fn fetch(dir: &Path, url: &str, refspecs: &[String]) -> Result<(), GitError> {
    if is_local(url) {
        // libgit2 fetches whole history over its local transport; git's upload-pack with
        // protocol v2 also serves a commit by ID that no ref names.
        return git()
            .arg("--git-dir")
            .arg(dir)
            .args([
                "-c",
                "protocol.version=2",
                "fetch",
                "-q",
                "--no-tags",
                "--no-write-fetch-head",
                "--depth=1",
                url,
            ])
            .args(refspecs)
            .run()
            .map(|_| ())
            .map_err(|e| match from_process(url, e) {
                GitError::Other { message, .. }
                    if message.contains("couldn't find remote ref")
                        || message.contains("not our ref") =>
                {
                    GitError::MissingRef {
                        url: url.to_string(),
                        what: refspecs.join(" "),
                    }
                }
                e => e,
            });
    }
    let repo = reopen(dir, url)?;
    let mut remote = repo.remote_anonymous(url).map_err(other(url))?;
    let mut opts = git2::FetchOptions::new();
    opts.download_tags(git2::AutotagOption::None);
    opts.depth(1);
    let specs: Vec<&str> = refspecs.iter().map(String::as_str).collect();
    tracing::info!(target: "rocforge::process", "libgit2 fetch {url} {}", specs.join(" "));
    remote
        .fetch(&specs, Some(&mut opts), None)
        .map_err(other(url))
}

enum WriteError {
    Git(git2::Error),
    Io(PathBuf, std::io::Error),
    BadName(PathBuf),
}

/// Writes `tree` into the existing directory `dest` as git would check it out: blobs with
/// their modes, symlinks, and an empty directory for each submodule (gitlink), whose commit
/// lives in another repository. libgit2's checkout cannot do the last from a bare repository
/// ("cannot get submodules without a working tree"). Blobs are written as stored, which is what
/// libgit2 wrote from the bare cache too (it reads no .gitattributes there). Every file and
/// directory is created anew, never opened through something already on disk, so a crafted
/// tree with duplicate names cannot write through a symlink it made.
fn write_tree(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
    dest: &Path,
    rel: &Path,
) -> Result<(), WriteError> {
    use std::ffi::OsStr;
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    for entry in tree.iter() {
        let bytes = entry.name_bytes();
        let name = OsStr::from_bytes(bytes);
        let rel = rel.join(name);
        // Names a checkout must never create: they would leave the tree or plant git metadata.
        if bytes.is_empty()
            || bytes == b"."
            || bytes == b".."
            || bytes.contains(&b'/')
            || bytes.contains(&0)
            || bytes.eq_ignore_ascii_case(b".git")
        {
            return Err(WriteError::BadName(rel));
        }
        let path = dest.join(name);
        let io = |e| WriteError::Io(path.clone(), e);
        match entry.filemode() {
            0o040000 => {
                std::fs::create_dir(&path).map_err(io)?;
                let sub = repo.find_tree(entry.id()).map_err(WriteError::Git)?;
                write_tree(repo, &sub, &path, &rel)?;
            }
            0o160000 => std::fs::create_dir(&path).map_err(io)?,
            0o120000 => {
                let blob = repo.find_blob(entry.id()).map_err(WriteError::Git)?;
                std::os::unix::fs::symlink(OsStr::from_bytes(blob.content()), &path).map_err(io)?;
            }
            mode => {
                let blob = repo.find_blob(entry.id()).map_err(WriteError::Git)?;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(io)?;
                f.write_all(blob.content()).map_err(io)?;
                let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
                f.set_permissions(std::fs::Permissions::from_mode(perm))
                    .map_err(io)?;
            }
        }
    }
    Ok(())
}

/// What a sparse checkout takes: `paths` (directories or files; empty = everything) without
/// `exclude`.
pub struct Sparse<'a> {
    pub paths: &'a [String],
    pub exclude: &'a [String],
}

/// The git CLI path: a partial clone with a sparse checkout, submodules when asked. Blobs are
/// fetched only for what is checked out, so an excluded file is never downloaded (nor needed:
/// a snapshot may lack it). The working tree, without `.git`, ends up in `dest`.
pub fn sparse_fetch(
    url: &str,
    reference: &GitRef,
    locked: Option<&str>,
    sparse: &Sparse<'_>,
    submodules: bool,
    dest: &Path,
) -> Result<Fetched, GitError> {
    let work = tempfile::Builder::new()
        .prefix(".rocforge-clone-")
        .tempdir_in(dest.parent().unwrap_or(Path::new(".")))
        .map_err(|source| GitError::Io {
            path: dest.display().to_string(),
            source,
        })?;
    let repo = work.path();
    let run = |cmd: Cmd| cmd.run().map_err(|e| from_process(url, e));
    init_partial_clone(url, repo)?;
    let commit = fetch_commit(url, repo, reference)?;
    if let (Some(l), GitRef::Tag(tag)) = (locked, reference)
        && l != commit
    {
        return Err(GitError::Moved {
            url: url.to_string(),
            tag: tag.clone(),
            locked: l.to_string(),
            found: commit,
        });
    }
    if !sparse.paths.is_empty() || !sparse.exclude.is_empty() {
        set_sparse_checkout(url, repo, sparse)?;
    }
    run(git()
        .arg("-C")
        .arg(repo)
        .args(["checkout", "-q", "--detach"])
        .arg(&commit))?;
    if submodules {
        run(git().arg("-C").arg(repo).args([
            "submodule",
            "update",
            "-q",
            "--init",
            "--recursive",
            "--depth=1",
        ]))?;
    }
    let time: i64 = run(git()
        .arg("-C")
        .arg(repo)
        .args(["show", "-s", "--format=%ct", "HEAD"]))?
    .trim()
    .parse()
    .unwrap_or(0);
    move_tree_without_git(repo, dest).map_err(|source| GitError::Io {
        path: dest.display().to_string(),
        source,
    })?;
    Ok(Fetched { commit, time })
}

/// An empty repository at `repo` whose `origin` is `url`, ready for a partial fetch.
fn init_partial_clone(url: &str, repo: &Path) -> Result<(), GitError> {
    let run = |cmd: Cmd| cmd.run().map_err(|e| from_process(url, e));
    run(git().args(["init", "-q"]).arg(repo))?;
    run(git()
        .arg("-C")
        .arg(repo)
        .args(["remote", "add", "origin", url]))?;
    // A local mirror (a bare snapshot) is served by an upload-pack that reads the mirror's own
    // config, which rarely allows partial clones: without one every blob is sent, and a snapshot
    // lacking one fails. Ours runs with them allowed, for the fetch and the blobs fetched later.
    if url.starts_with("file://") || url.starts_with('/') {
        run(git().arg("-C").arg(repo).args([
            "config",
            "remote.origin.uploadpack",
            "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack",
        ]))?;
    }
    Ok(())
}

/// Fetches `reference` (depth 1, no blobs) into `repo`; returns the commit it names.
fn fetch_commit(url: &str, repo: &Path, reference: &GitRef) -> Result<String, GitError> {
    let run = |cmd: Cmd| cmd.run().map_err(|e| from_process(url, e));
    // A tag is fetched into its own ref so it can be peeled; a rev by its commit ID.
    let (want, refspec) = match reference {
        GitRef::Rev(rev) => (rev.clone(), rev.clone()),
        GitRef::Tag(tag) => (
            format!("refs/tags/{tag}"),
            format!("+refs/tags/{tag}:refs/tags/{tag}"),
        ),
    };
    let fetch = git()
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "protocol.version=2",
            "fetch",
            "-q",
            "--no-tags",
            "--filter=blob:none",
            "--depth=1",
            "origin",
        ])
        .arg(&refspec);
    run(fetch).map_err(|e| match e {
        GitError::Other { message, .. }
            if message.contains("couldn't find remote ref") || message.contains("not our ref") =>
        {
            GitError::MissingRef {
                url: url.to_string(),
                what: want.clone(),
            }
        }
        e => e,
    })?;
    Ok(match reference {
        GitRef::Rev(rev) => rev.clone(),
        GitRef::Tag(tag) => run(git()
            .arg("-C")
            .arg(repo)
            .args(["rev-parse", "--verify"])
            .arg(format!("refs/tags/{tag}^{{commit}}")))?
        .trim()
        .to_string(),
    })
}

/// Limits the checkout of `repo` to `sparse`'s paths without its exclusions.
fn set_sparse_checkout(url: &str, repo: &Path, sparse: &Sparse<'_>) -> Result<(), GitError> {
    // Without a trailing slash a pattern names a directory (with everything under it) or a
    // single file: a recipe that needs only a repository's LICENSE.md fetches just that.
    // Exclusions come last, so they win over what the paths include.
    let included: Vec<String> = if sparse.paths.is_empty() {
        vec!["/*".to_string()]
    } else {
        sparse
            .paths
            .iter()
            .map(|p| format!("/{}", p.trim_end_matches('/')))
            .collect()
    };
    let excluded = sparse
        .exclude
        .iter()
        .map(|p| format!("!/{}", p.trim_end_matches('/')));
    git()
        .arg("-C")
        .arg(repo)
        .args(["sparse-checkout", "set", "--no-cone"])
        .args(included.into_iter().chain(excluded))
        .run()
        .map_err(|e| from_process(url, e))?;
    Ok(())
}

/// Moves every entry of `from` except git metadata into `to`.
fn move_tree_without_git(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        std::fs::rename(entry.path(), to.join(&name))?;
    }
    strip_git_files(to)
}

/// Submodule checkouts leave `.git` files (gitlinks) behind; a source tree carries none.
fn strip_git_files(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        if entry.file_name() == ".git" {
            if ft.is_dir() {
                std::fs::remove_dir_all(entry.path())?;
            } else {
                std::fs::remove_file(entry.path())?;
            }
        } else if ft.is_dir() {
            strip_git_files(&entry.path())?;
        }
    }
    Ok(())
}
