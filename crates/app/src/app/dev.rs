//! `dev` and `patch export`: a git checkout of a component's pristine source with its patch
//! series applied as one commit per patch, and the commits written back as the series.

use crate::diag::Hint;
use std::path::{Path, PathBuf};

use super::{Error, Result, Session};
use crate::catalog::CatalogRoot;
use crate::diag::Diagnostic;
use crate::process::Cmd;
use crate::recipe::Recipe;
use crate::source::patch::{self, PatchFile};
use crate::source::prepare;

/// The tag on the pristine source's commit; the series is what lies on top of it.
pub const BASE_TAG: &str = "rocforge-base";

/// `--dir`, else ./rocforge-dev/<component>.
pub fn dev_dir(component: &str, dir: Option<&Path>) -> PathBuf {
    dir.map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("rocforge-dev").join(component))
}

/// The same source with no patches, derivations or overlays.
pub fn pristine(recipe: &Recipe) -> Recipe {
    let mut p = recipe.clone();
    p.patches = Default::default();
    p.derive.clear();
    p
}

/// Makes the checkout at `dest` (which must be absent or empty); returns how many patches
/// became commits.
pub fn checkout(session: &Session, component: &str, dest: &Path) -> Result<usize> {
    let sources = session.sources(&[], false)?;
    let targets = session.targets()?;
    let recipe = session.recipe(component)?;
    if dest.exists()
        && std::fs::read_dir(dest)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(Diagnostic::new(format!(
            "{} already exists and is not empty",
            dest.display()
        ))
        .hint("choose another --dir, or remove the old checkout after exporting its patches")
        .into());
    }
    let pristine = pristine(recipe);
    let resolved =
        crate::source::resolved::Resolved::of(&session.catalog, session.lock()?, &pristine)?;
    let prepared = prepare::prepare(&sources, &pristine, &resolved, targets)?;
    crate::fsutil::copy_tree(&prepared.tree, dest).map_err(|e| {
        Error::hinted(
            format!("cannot write {}: {e}", dest.display()),
            "check free disk space and permissions",
        )
    })?;
    // The source cache keeps no `.git`; a tree that still has one (a cache written by an older
    // rocforge) is refused rather than trusted, as `git init` would keep its config and hooks.
    if let Some(found) = std::fs::read_dir(dest)
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| crate::source::tree::is_vcs_name(&e.file_name()))
    {
        return Err(Diagnostic::new(format!(
            "{} holds repository state from the source: {}",
            dest.display(),
            found.file_name().to_string_lossy()
        ))
        .hint("remove the source cache entry (`rocforge gc`, or delete it) and run `rocforge dev` again")
        .into());
    }
    // Hooks and fsmonitor are off and the repository starts from an empty template: nothing in
    // the source, the template directory or the user's config runs a command here.
    let git = |args: &[&str]| {
        Cmd::new("git")
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
            ])
            .arg("-C")
            .arg(dest)
            .args(args.iter().copied())
            .env("GIT_AUTHOR_NAME", "rocforge")
            .env("GIT_AUTHOR_EMAIL", "rocforge@localhost")
            .env("GIT_COMMITTER_NAME", "rocforge")
            .env("GIT_COMMITTER_EMAIL", "rocforge@localhost")
            .env("GIT_AUTHOR_DATE", "1970-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "1970-01-01T00:00:00Z")
            .run()
            .map_err(|e| Error::hinted(e, "is git installed?"))
    };
    git(&["init", "-q", "--template="])?;
    git(&["add", "-A", "-f"])?;
    let subject = format!(
        "{component} {} pristine source{}",
        recipe.version,
        prepared
            .commit
            .as_deref()
            .map(|c| format!(" at {c}"))
            .unwrap_or_default()
    );
    git(&["commit", "-q", "--no-verify", "-m", &subject])?;
    git(&["tag", BASE_TAG])?;
    let series = read_series(session, recipe)?;
    let commits = patch::commit_series(dest, &series)
        .map_err(|e| Error::hinted(format!("{component}: {e}"), e.hint()))?;
    Ok(commits.len())
}

/// The recipe's patch series for the session's targets, read from the catalog.
fn read_series(session: &Session, recipe: &Recipe) -> Result<Vec<PatchFile>> {
    let root = &session.catalog.root;
    let component = &recipe.name.value;
    let release = recipe
        .patches
        .release
        .as_deref()
        .unwrap_or(&session.catalog.release.name);
    recipe
        .patches
        .series(session.targets()?.iter().map(|t| t.arch.as_str()))
        .into_iter()
        .map(|p| {
            let name = root.patch_display(release, component, p);
            root.read_patch(release, component, p)
                .map(|bytes| PatchFile {
                    name: name.clone(),
                    bytes,
                })
                .map_err(|e| {
                    Error::hinted(format!("cannot read {name}: {e}"), "run `rocforge check`")
                })
        })
        .collect()
}

/// What `patch export` wrote.
pub struct Exported {
    /// patches/<release>/<component>/
    pub dir: PathBuf,
    /// The patch files, in series order.
    pub names: Vec<String>,
    /// The recipe's `[patches]` lists other files: it must be edited to match.
    pub differs: bool,
    /// The recipe file, for the message that says so.
    pub recipe_file: String,
}

/// Writes the commits on top of [`BASE_TAG`] in the checkout `src` back as the series.
pub fn export(session: &Session, component: &str, src: &Path) -> Result<Exported> {
    let catalog = &session.catalog;
    let recipe = session.recipe(component)?;
    let CatalogRoot::Dir(recipes) = &catalog.root else {
        return Err(Diagnostic::new("the built-in catalog cannot be written")
            .hint("export it first: `rocforge catalog export DIR`, then use --recipes DIR/recipes")
            .into());
    };
    if !src.join(".git").exists() {
        return Err(Diagnostic::new(format!(
            "{} is not a `rocforge dev` checkout",
            src.display()
        ))
        .hint(format!("create one with `rocforge dev {component}`"))
        .into());
    }
    let dir = recipes
        .parent()
        .unwrap_or(Path::new("."))
        .join("patches")
        .join(&catalog.release.name)
        .join(component);
    let names = patch::export_series(src, BASE_TAG, &dir)
        .map_err(|e| Error::hinted(format!("{component}: {e}"), e.hint()))?;
    let listed: Vec<&str> = recipe.patches.every().map(|p| p.as_str()).collect();
    // Patches inherited from a base line resolve from the base's directory: the series written
    // here is used only once this line's file declares its own [patches].
    let inherited = recipe
        .patches
        .release
        .as_ref()
        .is_some_and(|r| *r != catalog.release.name);
    let differs = inherited || listed != names.iter().map(String::as_str).collect::<Vec<_>>();
    Ok(Exported {
        dir,
        names,
        differs,
        recipe_file: recipe.display_file().to_string(),
    })
}
