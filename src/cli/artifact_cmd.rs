//! `package`, `index`, `key generate`, `sign`, `verify`, `install`, `uninstall`,
//! `list --installed`.

use rocforge::diag::Hint;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::progress::TermReporter;
use super::{CliError, Format, Global, Result};
use rocforge::app::{self, install::Installed};
use rocforge::diag::Diagnostic;
use rocforge::install::{self, receipt};
use rocforge::package::{self, PackageError, index};
use rocforge::sign::{self, SignError};

#[derive(clap::Args, Debug)]
pub struct KeyRotateArgs {
    /// The secret key that signs the list (trusted today)
    #[arg(long, value_name = "SECRET")]
    pub old: PathBuf,
    /// A public key to trust from now on (RW… or a .pub file); repeatable
    #[arg(long, value_name = "PUB", required = true)]
    pub new: Vec<String>,
    /// Revoke the old key: installers stop trusting it once they have seen this list
    #[arg(long)]
    pub revoke_old: bool,
    /// Another public key to revoke; repeatable
    #[arg(long, value_name = "PUB")]
    pub revoke: Vec<String>,
    /// The key list to write (its directory gets the numbered copies)
    #[arg(long, value_name = "FILE", default_value = "keys.json")]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct UninstallArgs {
    /// Installed components to remove
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Where they are installed [default: $ROCFORGE_PREFIX, else ~/.local/rocforge]
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct SignArgs {
    /// Files to sign
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Sign with this secret key file [default: $ROCFORGE_SIGNING_KEY, else ~/.config/rocforge/keys/rocforge.key]
    #[arg(long = "sign-key", alias = "key", value_name = "FILE")]
    pub key: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// The release directory: tarballs (or, with --renew, index.json) in, index.json out
    pub dir: PathBuf,
    /// Sign with this secret key file [default: $ROCFORGE_SIGNING_KEY, else ~/.config/rocforge/keys/rocforge.key]
    #[arg(long = "sign-key", alias = "key", value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Days until the index expires
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub expires_days: u64,
    /// Keep the artifacts of DIR/index.json and only issue it anew (no tarballs needed)
    #[arg(long)]
    pub renew: bool,
}

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The signed file (with --rebuild: a packaged tarball, a path or an http(s) URL)
    pub file: PathBuf,
    /// A public key (RW… or a .pub file); repeatable
    #[arg(long, value_name = "PUB")]
    pub key: Vec<String>,
    /// The signature file [default: FILE.minisig]
    #[arg(long, value_name = "FILE")]
    pub sig: Option<PathBuf>,
    /// A key list to apply [default: keys.json beside FILE, if there is one]
    #[arg(long, value_name = "FILE")]
    pub key_list: Option<PathBuf>,
    /// Rebuild the tarball FILE from the inputs its manifest records and compare it byte for byte
    #[arg(long, conflicts_with_all = ["key", "sig", "key_list"])]
    pub rebuild: bool,
    /// Total compile jobs of the rebuild [default: from memory and cores]
    #[arg(long, short, value_name = "N", requires = "rebuild")]
    pub jobs: Option<usize>,
    /// For oci://…: the signed release index (URL or directory) that must list the image at
    /// the digest its tag resolves to
    #[arg(long, value_name = "URL|DIR", conflicts_with = "rebuild")]
    pub index: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct PackageArgs {
    /// Components to package (with their dependencies); bundles like rocm-math work too
    #[arg(required = true)]
    pub components: Vec<String>,
    /// Output directory
    #[arg(long, value_name = "DIR", default_value = "dist")]
    pub out: PathBuf,
    /// The tarballs' compression
    #[arg(long, value_enum, default_value_t = rocforge::package::tarball::Compression::Zst)]
    pub compression: rocforge::package::tarball::Compression,
    #[command(flatten)]
    pub runtime: super::RuntimeArg,
    /// Sign with this secret key file [default: $ROCFORGE_SIGNING_KEY, else ~/.config/rocforge/keys/rocforge.key]
    #[arg(long = "sign-key", alias = "key", value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Days until the index expires
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub expires_days: u64,
    /// Package even when files mention the store or cache paths (they will not relocate)
    #[arg(long)]
    pub allow_build_paths: bool,
    /// The overlay the build was given (COMPONENT:PATH=DIR): it is part of the content key
    #[arg(long, value_name = "SPEC")]
    pub overlay: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    /// Components to install (with their dependencies); bundles like rocm-math work too
    #[arg(required = true)]
    pub components: Vec<String>,
    /// Index location: a directory, a path or URL of index.json, or a URL of its directory [default: $ROCFORGE_INDEX, else [install] index of the config, else the project's releases]
    #[arg(long, value_name = "URL_OR_DIR")]
    pub from: Option<String>,
    /// Where to install [default: $ROCFORGE_PREFIX, else ~/.local/rocforge]
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
    /// Install even if the index is unsigned or its signature does not verify (loud)
    #[arg(long)]
    pub allow_unsigned: bool,
    /// Accept artifacts hosted on HOST (or HOST:PORT) besides the index's host; repeatable
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Also trust this public key (RW… or a .pub file); repeatable
    #[arg(long, value_name = "PUB")]
    pub key: Vec<String>,
    /// Refuse to unpack more than this [default: 256GiB]
    #[arg(long, value_name = "SIZE")]
    pub max_size: Option<String>,
    /// Also install the index's HIP runtime (rocm-runtime), whatever this system has
    #[arg(long, conflicts_with = "no_runtime_check")]
    pub with_runtime: bool,
    /// Do not check that the HIP runtime and every other library the artifacts link are
    /// present (nor add the runtime)
    #[arg(long)]
    pub no_runtime_check: bool,
    /// Replace an installed component by an older version the index offers
    #[arg(long)]
    pub allow_downgrade: bool,
    /// The longest one artifact's download may take, retries included (e.g. 90m, 3h) [default: 2h]
    #[arg(long, value_name = "DURATION", env = "ROCFORGE_INSTALL_TIMEOUT")]
    pub timeout: Option<String>,
    /// Print the plan (artifacts, URLs, sha256, sizes, what is replaced or kept) and stop: nothing is downloaded or written
    #[arg(long)]
    pub dry_run: bool,
}

fn sign_err(e: SignError) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

fn pkg_err(e: PackageError) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

fn password() -> Option<String> {
    std::env::var(sign::PASSWORD_ENV)
        .ok()
        .filter(|p| !p.is_empty())
}

/// The signing key: --key, else $ROCFORGE_SIGNING_KEY, else the default key file if present.
pub(crate) fn signing_key_path(key: Option<&Path>) -> Option<PathBuf> {
    key.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("ROCFORGE_SIGNING_KEY").map(PathBuf::from))
        .or_else(|| {
            let p = sign::default_key_dir().join(sign::SECRET_KEY_FILE);
            p.is_file().then_some(p)
        })
}

fn load_signing_key(key: Option<&Path>) -> Result<Option<sign::SecretKey>> {
    super::warn_old_key_flag();
    match signing_key_path(key) {
        Some(p) => sign::load_secret(&p, password())
            .map(Some)
            .map_err(sign_err),
        None => Ok(None),
    }
}

/// Built-in keys, config `[trust] keys`, then `--key` arguments (base64 or .pub files).
pub(super) fn trusted(g: &Global, extra: &[String]) -> Result<Vec<sign::PublicKey>> {
    app::install::trusted_keys(&super::options(g), extra)
}

pub fn package(g: &Global, a: &PackageArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    let key = load_signing_key(a.key.as_deref())?;
    let app::package::Released {
        packaged,
        files,
        index: idx,
    } = app::package::package(
        &session,
        &app::package::Request {
            components: &a.components,
            overlay_specs: &a.overlay,
            runtime: a.runtime.runtime.kind(),
            out: &a.out,
            compression: a.compression,
            key: key.as_ref(),
            expires_days: a.expires_days,
            allow_build_paths: a.allow_build_paths,
        },
    )?;
    if g.format == Format::Json {
        super::print_json(&package::report::Report::new(&packaged, files, idx.expires));
        return Ok(ExitCode::SUCCESS);
    }
    for p in &packaged {
        println!(
            "{}  {}  {} files  glibc {}",
            p.tarball.path.display(),
            rocforge::units::format_size(p.tarball.size),
            p.manifest_files,
            p.glibc_floor.as_deref().unwrap_or("-"),
        );
    }
    println!(
        "{}  (expires {}{})",
        a.out.join(index::INDEX_NAME).display(),
        idx.expires,
        if key.is_some() {
            ", signed"
        } else {
            ", UNSIGNED"
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn index_cmd(
    g: &Global,
    dir: &Path,
    key: Option<&Path>,
    valid_days: u64,
    renew: bool,
) -> Result<ExitCode> {
    let key = load_signing_key(key)?;
    if renew {
        // Whatever --renew reads gets signed: only an index a trusted key signed is renewed.
        verify_signature(
            g,
            &VerifyArgs {
                file: dir.join(index::INDEX_NAME),
                key: Vec::new(),
                sig: None,
                key_list: None,
                rebuild: false,
                jobs: None,
                index: None,
            },
        )?;
    }
    let idx = if renew {
        index::renew(dir, valid_days)
    } else {
        index::build(dir, valid_days)
    }
    .map_err(pkg_err)?;
    index::write(dir, &idx, key.as_ref()).map_err(pkg_err)?;
    println!(
        "{}: {} artifact(s){}, expires {}{}",
        dir.join(index::INDEX_NAME).display(),
        idx.artifacts.len(),
        match idx.images.len() {
            0 => String::new(),
            n => format!(", {n} image(s)"),
        },
        idx.expires,
        if key.is_some() {
            ", signed"
        } else {
            ", UNSIGNED"
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn key_generate(g: &Global, out: Option<&Path>) -> Result<ExitCode> {
    let dir = out
        .map(Path::to_path_buf)
        .unwrap_or_else(sign::default_key_dir);
    let made = sign::generate(&dir, password()).map_err(sign_err)?;
    println!("{}", made.public_key);
    // The key in the default place is this user's own: `package` and `index` sign with it, so
    // installing what they wrote into a local directory needs no flag. A key made elsewhere
    // (--out: a CI cache key, a release key kept offline) is trusted only where asked.
    let trust = match out {
        None => {
            let file = app::install::trust_locally(&made.public_key, &made.key_id, &made.secret)?;
            format!(
                "trusted for installs from local directories (`rocforge install … --from DIR`), never for a URL: \
                 recorded in {}; delete its line there to undo it",
                file.display()
            )
        }
        Some(_) => format!(
            "not trusted by installs on its own (made outside the default key directory): \
             pass `--key {}` to `rocforge install`, or list it in [trust] keys",
            made.public.display()
        ),
    };
    note!(
        g,
        "key {}: secret key {} ({}), public key {}\n\
         keep the secret key private (a CI secret used only by the publish job); \
         publish the public key line above\n{trust}",
        made.key_id,
        made.secret.display(),
        if password().is_some() {
            "encrypted with ROCFORGE_KEY_PASSWORD"
        } else {
            "not encrypted: set ROCFORGE_KEY_PASSWORD to encrypt"
        },
        made.public.display(),
    );
    Ok(ExitCode::SUCCESS)
}

pub fn key_rotate(g: &Global, a: &KeyRotateArgs) -> Result<ExitCode> {
    let r = app::key::rotate(&app::key::RotateRequest {
        old: &a.old,
        new: &a.new,
        revoke: &a.revoke,
        revoke_old: a.revoke_old,
        out: &a.out,
        password: password(),
    })?;
    for f in &r.files {
        println!("{}", f.display());
    }
    note!(
        g,
        "key list {} signed by key {}: trusts {}{}; publish these files beside index.json (and keep \
         every keys-N.json: installers follow the chain back to the key they trust)",
        r.sequence,
        r.signer,
        r.trusts.join(", "),
        if r.revokes.is_empty() {
            String::new()
        } else {
            format!(", revokes {}", r.revokes.join(", "))
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn sign_cmd(_g: &Global, files: &[PathBuf], key: Option<&Path>) -> Result<ExitCode> {
    let Some(sk) = load_signing_key(key)? else {
        return Err(Diagnostic::new("no signing key")
            .hint("pass --sign-key FILE, set ROCFORGE_SIGNING_KEY, or run `rocforge key generate`")
            .into());
    };
    for f in files {
        let sig = sign::sign_file(&sk, f).map_err(sign_err)?;
        println!("{}", sig.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn verify_cmd(g: &Global, a: &VerifyArgs) -> Result<ExitCode> {
    if a.rebuild {
        return rebuild_cmd(g, a);
    }
    if let Some(image) = a.file.to_str().filter(|f| f.starts_with("oci://")) {
        return super::attest_cmd::verify_image(g, image, &a.key, a.index.as_deref());
    }
    if a.index.is_some() {
        return Err(Diagnostic::new("--index checks an image: it needs oci://REGISTRY/NAME:TAG")
            .hint("a tarball is checked against the index by `rocforge install`, which verifies its sha256")
            .into());
    }
    verify_signature(g, a)
}

fn verify_signature(g: &Global, a: &VerifyArgs) -> Result<ExitCode> {
    let keys = trusted(g, &a.key)?;
    let req = app::signature::FileRequest {
        file: &a.file,
        keys: &keys,
        sig: a.sig.as_deref(),
        key_list: a.key_list.as_deref(),
        state_dir: None,
    };
    let trust = app::signature::trust(&req)?;
    for n in &trust.notes {
        eprintln!("warning: {n}");
    }
    let v = app::signature::verify_file(&req, &trust)?;
    if g.format != Format::Json {
        println!(
            "{}: good signature from key {} ({})",
            a.file.display(),
            v.key_id,
            v.trusted_comment
        );
    }
    if let Some(c) = &trust.chain {
        note!(
            g,
            "trusted through key list {} ({} list{} from key {})",
            c.sequence,
            c.lists,
            if c.lists == 1 { "" } else { "s" },
            c.anchor
        );
    }
    let docs = app::signature::documents(&a.file, &trust)?;
    if docs.undocumented {
        eprintln!(
            "warning: {}: no SBOM or provenance beside it (packaged before rocforge wrote them)",
            a.file.display()
        );
    }
    if g.format == Format::Json {
        super::print_json(&rocforge::attest::report::Verified::file(
            &a.file,
            &v,
            docs.checked,
        ));
    } else {
        for c in &docs.checked {
            println!("{}", super::attest_cmd::document_line(c, true));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn rebuild_cmd(g: &Global, a: &VerifyArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    let artifact = a.file.to_string_lossy();
    let report = app::verify::rebuild(
        &session,
        &app::verify::Request {
            artifact: &artifact,
            store: g.store.as_deref(),
            jobs: a.jobs,
        },
    )?;
    if g.format == Format::Json {
        super::print_json(&report);
    } else {
        print!("{}", render_rebuild(&report));
    }
    Ok(super::exit_code(report.outcome.identical()))
}

/// `verify --rebuild`'s text report.
pub(crate) fn render_rebuild(r: &app::verify::Report) -> String {
    use app::verify::Outcome;
    let name = r.artifact.rsplit('/').next().unwrap_or(&r.artifact);
    let what = format!(
        "{} {} ({}, {}, {})",
        r.id.name,
        r.id.version,
        r.id.release,
        if r.id.targets.is_empty() {
            "any target".to_string()
        } else {
            rocforge::arch::comma_list(&r.id.targets)
        },
        r.runtime
    );
    let store = |s: &app::verify::StoreUsed| {
        if s.kept {
            format!("rebuilt into the store {}", s.path.display())
        } else {
            "rebuilt in a temporary store, removed".to_string()
        }
    };
    match &r.outcome {
        Outcome::Identical { sha256, store: s } => format!(
            "{name}: reproduced: the rebuild is byte for byte the same
  {what}, key {}
  sha256 {sha256}
  {}
",
            r.id.key,
            store(s)
        ),
        Outcome::Differs {
            published_sha256,
            rebuilt_sha256,
            difference: d,
            store: s,
        } => {
            let path = if d.path.is_empty() {
                "the tarball".to_string()
            } else {
                d.path.clone()
            };
            format!(
                "{name}: NOT reproduced: the rebuild differs
  {what}, key {}
  first difference: {path}: {}
    published: {}
    rebuilt:   {}
  sha256 {published_sha256} published
  sha256 {rebuilt_sha256} rebuilt
  {}
",
                r.id.key,
                d.how,
                d.published,
                d.rebuilt,
                store(s)
            )
        }
        Outcome::KeyDiffers {
            recorded,
            planned,
            changed,
        } => format!(
            "{name}: cannot be rebuilt from this catalog: its inputs give another content key
  {what}
  recorded key {recorded}
  this catalog {planned}
  inputs that differ: {}
  nothing was built: rebuild with the catalog (--recipes) and builder image it was built from; its manifest's hash_input records them
",
            if changed.is_empty() {
                "none named by the hash input".to_string()
            } else {
                changed.join(", ")
            }
        ),
    }
}

pub fn install_cmd(g: &Global, a: &InstallArgs) -> Result<ExitCode> {
    let req = install_request(a);
    let reporter = TermReporter::new(g);
    if a.dry_run {
        let plan = app::install::plan(&super::options(g), &req, &reporter)?;
        if g.format == Format::Json {
            super::print_json(&plan);
        } else {
            print!("{}", plan.render_text());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));
    }
    let outcome = match app::install::install(&super::options(g), &req, &reporter, &stop)? {
        Installed::Stopped { prefix } => {
            eprintln!("stopped; {} is unchanged", prefix.display());
            return Ok(ExitCode::from(130));
        }
        Installed::Done(outcome) => outcome,
    };
    note_installed(g, &outcome.report);
    if g.format == Format::Json {
        super::print_json(&outcome.report());
    } else {
        print_environment(g, &outcome);
    }
    Ok(ExitCode::SUCCESS)
}

/// The install use case's request, as the flags give it.
fn install_request(a: &InstallArgs) -> app::install::Request<'_> {
    app::install::Request {
        components: &a.components,
        from: a.from.as_deref(),
        prefix: a.prefix.as_deref(),
        allow_unsigned: a.allow_unsigned,
        allow_downgrade: a.allow_downgrade,
        timeout: a.timeout.as_deref(),
        allow_host: &a.allow_host,
        keys: &a.key,
        max_size: a.max_size.as_deref(),
        runtime: if a.no_runtime_check {
            install::RuntimeCheck::Skip
        } else if a.with_runtime {
            install::RuntimeCheck::With
        } else {
            install::RuntimeCheck::Auto
        },
    }
}

/// What each component came to (installed, repaired, already there), and whose signature the
/// index carried.
fn note_installed(g: &Global, report: &install::Report) {
    for n in &report.already {
        note!(g, "  {n:<20} already installed");
    }
    for r in &report.installed {
        match report.repaired.iter().find(|(n, _)| *n == r.name.as_str()) {
            Some((_, missing)) => note!(
                g,
                "  {:<20} {} for {} repaired ({missing} of {} files were missing)",
                r.name,
                r.version,
                r.target_list(),
                r.files.len()
            ),
            None => note!(
                g,
                "  {:<20} {} for {} installed ({} files)",
                r.name,
                r.version,
                r.target_list(),
                r.files.len()
            ),
        }
    }
    match &report.signer {
        Some(k) => note!(g, "index signature: good, key {k}"),
        None => eprintln!("WARNING: installed from an UNSIGNED or unverified index"),
    }
}

/// The lines that put the prefix in the environment, and whether its libraries need an
/// HSA_OVERRIDE_GFX_VERSION.
fn print_environment(g: &Global, outcome: &app::install::Outcome) {
    let report = &outcome.report;
    let p = outcome.prefix.display();
    println!("export ROCM_PATH={p}");
    println!("export PATH={p}/bin:$PATH");
    println!("export LD_LIBRARY_PATH={p}/lib:$LD_LIBRARY_PATH");
    if report.installed.is_empty() {
        // Nothing new: what is installed was said when it was installed.
    } else if outcome.not_native.is_empty() && report.with_device_code.is_empty() {
        note!(
            g,
            "none of these carries GPU code of its own (headers and host code): what includes or links them compiles its own"
        );
    } else if outcome.not_native.is_empty() {
        note!(
            g,
            "{} {} native code for {} targets: no HSA_OVERRIDE_GFX_VERSION is needed (unset it)",
            report.with_device_code.join(", "),
            if report.with_device_code.len() == 1 {
                "carries"
            } else {
                "carry"
            },
            if report.with_device_code.len() == 1 {
                "its"
            } else {
                "their"
            }
        );
    } else {
        eprintln!(
            "WARNING: not every library carries native code for its targets (its build accepted the gap):"
        );
        for n in &outcome.not_native {
            eprintln!("  {:<20} {}", n.component, n.advice);
        }
    }
}

/// Finishes an install into `prefix` that a kill -9 cut short (crates/use/src/install/merge.rs), so the
/// receipts about to be read tell the truth. Waits for a running install when `wait` (and then
/// returns the prefix's lock, held until dropped), else leaves the prefix to it.
fn settle(prefix: &Path, wait: bool) -> Result<Option<rocforge::fsutil::Lock>> {
    let pending = install::merge::pending(prefix);
    if !pending && (!wait || !prefix.is_dir()) {
        return Ok(None);
    }
    let err = |e: std::io::Error| {
        CliError::One(
            Diagnostic::new(format!("{}: {e}", prefix.display()))
                .hint("check permissions of the prefix and its parent directory"),
        )
    };
    let lock = install::merge::lock(prefix, wait, &|| {
        eprintln!(
            "waiting for another rocforge process installing into {}",
            prefix.display()
        )
    })
    .map_err(err)?;
    if lock.is_some() {
        let done = install::merge::recover(prefix).map_err(err)?;
        for name in &done.uninstalled {
            eprintln!("completed the uninstall of {name} that a killed run had begun");
        }
        for name in &done.installed {
            eprintln!("completed the install of {name} that a killed run had begun");
        }
    }
    Ok(lock)
}

pub fn uninstall_cmd(g: &Global, names: &[String], prefix: Option<&Path>) -> Result<ExitCode> {
    let prefix = prefix
        .map(Path::to_path_buf)
        .unwrap_or_else(app::install::default_prefix);
    let _lock = settle(&prefix, true)?;
    let removed = receipt::uninstall(&prefix, names)
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
    if g.format == Format::Json {
        super::print_json(&install::report::Uninstalled::new(&prefix, names, &removed));
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "removed {} from {}: {} files, {} directories{}",
        names.join(", "),
        prefix.display(),
        removed.files,
        removed.dirs,
        if removed.missing > 0 {
            format!(" ({} already gone)", removed.missing)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn list_installed(g: &Global, prefix: Option<&Path>) -> Result<ExitCode> {
    let prefix = prefix
        .map(Path::to_path_buf)
        .unwrap_or_else(app::install::default_prefix);
    let _lock = settle(&prefix, false)?;
    let all = receipt::read_all(&prefix);
    if g.format == Format::Json {
        super::print_json(&install::report::InstalledList::new(&prefix, &all));
        return Ok(ExitCode::SUCCESS);
    }
    let missing: Vec<usize> = all
        .iter()
        .map(|r| receipt::missing_files(&prefix, r))
        .collect();
    if all.is_empty() {
        note!(g, "nothing installed in {}", prefix.display());
        return Ok(ExitCode::SUCCESS);
    }
    for (r, &m) in all.iter().zip(&missing) {
        println!(
            "{:<20} {:<10} {:<20} {}  {} files{}",
            r.name,
            r.version,
            r.target_list(),
            r.key.get(..12).unwrap_or(&r.key),
            r.files.len(),
            if m == 0 {
                String::new()
            } else {
                format!("  DAMAGED (files missing {m})")
            }
        );
    }
    if missing.iter().any(|&m| m > 0) {
        eprintln!(
            "hint: `rocforge install NAME --from INDEX --prefix {}` puts a damaged component's missing files back",
            prefix.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
