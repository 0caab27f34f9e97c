//! Command definitions and their output. Only this module (and main) prints.

mod arch_cmd;
mod artifact_cmd;
mod build_cmd;
mod catalog_cmds;
mod ci_cmd;
mod image_cmd;
mod inspect_cmd;
mod plan_cmd;
pub mod progress;
mod publish_cmd;
mod sources;
mod test_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use rocforge::catalog::{CatalogError, CatalogRoot, export_embedded};
use rocforge::diag::{Diagnostic, Diagnostics};
use rocforge::plan::key::RuntimeKind;

const AFTER_HELP: &str = "\
Examples:
  rocforge list                                  components of every release line
  rocforge plan rocsparse --arch gfx90c          what a build of rocSPARSE for gfx90c would do
  rocforge plan rocsolver --arch gfx90c,gfx902 --format json
  rocforge arch show gfx90c                      what rocforge knows about a GPU target
  rocforge check --recipes ./recipes             validate an edited catalog
  rocforge fetch rocblas --arch gfx90c           the patched source tree, in the source cache
  rocforge dev rocblas --arch gfx90c             a git checkout with one commit per patch

The shipped catalog is built in; `rocforge catalog export DIR` writes it out for editing and
`--recipes DIR/recipes` (or ROCFORGE_RECIPES) uses the edited copy.";

#[derive(Parser, Debug)]
#[command(name = "rocforge", version, about = "Build ROCm for the GPUs AMD leaves out (gfx90c, gfx902, ...), reproducibly",
    long_about = "rocforge turns TOML recipes of ROCm components into reproducible builds for GPU targets that \
AMD's packages leave out, such as the Vega iGPUs gfx90c (Renoir/Cezanne/Barcelo) and gfx902 (Raven Ridge), \
and checks that every library carries code for the GPUs you asked for.",
    after_help = AFTER_HELP)]
pub struct Args {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Args, Debug)]
pub struct Global {
    /// A recipes/ directory to use instead of the built-in catalog (patches come from its sibling patches/)
    #[arg(long, global = true, env = "ROCFORGE_RECIPES", value_name = "DIR")]
    pub recipes: Option<PathBuf>,
    /// Release line, e.g. rocm-6.4.4 [default: the newest that is not a preview]
    #[arg(long, global = true, env = "ROCFORGE_RELEASE", value_name = "NAME")]
    pub release: Option<String>,
    /// The store of built install trees [default: $XDG_DATA_HOME/rocforge/store]
    #[arg(long, global = true, env = "ROCFORGE_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// GPU targets as a comma list of target IDs, e.g. gfx90c or gfx90c,gfx902:xnack- [default: the release's]
    #[arg(long, global = true, value_name = "LIST")]
    pub arch: Option<String>,
    /// Output format; github-matrix is for `plan` only
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Refuse any input that rocforge.lock does not pin (unlocked tags, stale entries)
    #[arg(long, global = true)]
    pub locked: bool,
    /// No progress bars or notes on stderr
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    GithubMatrix,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the catalog's components: name, version, release line, summary (--installed: a prefix's)
    List {
        /// List the components installed in --prefix instead
        #[arg(long)]
        installed: bool,
        /// With --installed [default: $ROCFORGE_PREFIX, else ~/.local/rocforge]
        #[arg(long, value_name = "DIR", requires = "installed")]
        prefix: Option<PathBuf>,
    },
    /// Validate the whole catalog (every release line, the target table, patches); exit 1 listing every problem
    #[command(after_help = "\
Without --sources nothing is fetched: the recipes, the target table and the patches' shape are
checked. With --sources each component's source is fetched (through the mirrors in rocforge.toml),
then its patch series and derivations are applied for all of the line's targets together and for
each target with patches of its own, in scratch copies (the source cache is not written). Each
component is reported as applies, conflict (naming the patch, the hunk and the line), derivation
fails, or source unreachable; exit 1 when any does not apply.

  rocforge check                                  recipes and patches, offline
  rocforge check --sources                        every component of every release line
  rocforge check --sources --release rocm-6.4.4 rocblas tensile
  rocforge check --sources --only-patched --format json")]
    Check {
        /// Fetch every source and apply its patches and derivations for every target
        #[arg(long)]
        sources: bool,
        /// With --sources: skip components that carry no patches and no derivations
        #[arg(long, requires = "sources")]
        only_patched: bool,
        /// With --sources: only these components (or bundles) [default: all]
        #[arg(requires = "sources")]
        components: Vec<String>,
    },
    /// Show what would be built, in order, with content keys, GPU flags and a resource estimate
    #[command(after_help = "\
Status is `build (new)` for a component the store never held, `build (X changed)` naming the inputs
that differ from the newest stored build, or `cached`.

Examples:
  rocforge plan rocsparse --arch gfx90c
  rocforge plan --format github-matrix --arch gfx90c,gfx902   one include list per dependency level
  rocforge plan rocblas --explain tensile                     the hash input behind tensile's key")]
    Plan {
        /// Components to build (with their dependencies) [default: the whole release line]
        components: Vec<String>,
        /// Print the hash input of one component instead of the plan
        #[arg(long, value_name = "COMPONENT")]
        explain: Option<String>,
        /// Where builds run: a container (podman or docker) or the host. Keys differ between the two.
        #[arg(long, value_enum, default_value_t = RuntimeKind::Container)]
        runtime: RuntimeKind,
        /// Replace a directory of a component's source with your own: COMPONENT:PATH=DIR
        #[arg(long, value_name = "SPEC")]
        overlay: Vec<String>,
    },
    /// Fetch a component's source at its pinned commit, patched for the targets, into the source cache
    #[command(after_help = "\
The tree is keyed by the pinned commit (or tarball sha256), the patch series, derivations and
overlays, so a second fetch is a no-op. Sources come through mirrors when rocforge.toml maps
their URL prefix (see `rocforge fetch --help` in docs/sources.md). The cache lives in
$ROCFORGE_CACHE (default ~/.cache/rocforge).

Examples:
  rocforge fetch rocblas --arch gfx90c
  rocforge fetch rocblas --arch gfx90c --overlay rocblas:library/src/blas3/Tensile/Logic/asm_full/gfx90c=./my-logic
  rocforge fetch rocsparse --locked --format json")]
    Fetch {
        /// The component
        component: String,
        /// Replace a directory of the source with your own: COMPONENT:PATH=DIR
        #[arg(long, value_name = "SPEC")]
        overlay: Vec<String>,
    },
    /// Pin every git tag to a commit and every builder image to a digest in rocforge.lock
    Lock {
        /// Do not write: exit 1 if rocforge.lock does not match the recipes (for CI; no network)
        #[arg(long)]
        check: bool,
        /// Pin sources only; keep the image digests already in the lock
        #[arg(long)]
        skip_images: bool,
    },
    /// A working git checkout with the patch series applied as one commit per patch, for patch authors
    #[command(after_help = "\
Edit, then commit (amend, rebase, add commits) as usual, and write the series back with
`rocforge patch export COMPONENT`. The pristine source is the commit tagged rocforge-base.")]
    Dev {
        component: String,
        /// Where to create the checkout [default: ./rocforge-dev/<component>]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Build components and every dependency the store lacks, in reproducible containers
    #[command(after_help = "\
Each component is built in the release line's builder image with the network off, sources
mounted read-only and dependencies mounted read-only under the release prefix, then committed
to the store under its content key. A second run with the same inputs does nothing. Ctrl-C
stops the containers it started; finished components stay in the store.

Examples:
  rocforge build rocsparse --arch gfx90c
  rocforge build rocsolver --arch gfx90c,gfx902 --jobs 8 --keep-going
  rocforge build rocprim --arch gfx902 --runtime host      # no containers (not reproducible)
  rocforge build rocblas --dry-run                         # the plan, nothing built")]
    Build {
        /// Components to build [default: the whole release line]
        components: Vec<String>,
        /// Total compile jobs [default: one per 2.5 GiB of available memory, at most one per core]
        #[arg(long, short)]
        jobs: Option<usize>,
        /// podman, docker or host [default: podman if it works, else docker]
        #[arg(long, value_enum)]
        runtime: Option<build_cmd::RuntimeChoice>,
        /// Keep building what does not depend on a failed component
        #[arg(long)]
        keep_going: bool,
        /// Start each build over instead of continuing the build directory a stopped or failed
        /// build of the same content key left
        #[arg(long)]
        fresh: bool,
        /// Print the plan; build nothing
        #[arg(long)]
        dry_run: bool,
        /// Replace a directory of a component's source with your own: COMPONENT:PATH=DIR
        #[arg(long, value_name = "SPEC")]
        overlay: Vec<String>,
        /// Accept built libraries that lack these targets (the gap is recorded in the store entry)
        #[arg(long, value_name = "LIST")]
        allow_missing: Option<String>,
        /// Accept built libraries that carry only the nearest target's code for these targets
        /// (they run only under HSA_OVERRIDE_GFX_VERSION; recorded in the store entry)
        #[arg(long, value_name = "LIST")]
        allow_spoof: Option<String>,
        /// A shared build cache, oci://REGISTRY/REPO: hits are pulled (signed by a trusted key), new entries pushed
        #[arg(long, value_name = "URL", env = "ROCFORGE_CACHE_URL")]
        cache: Option<String>,
        /// The secret key that signs the entries pushed to --cache (without it nothing is pushed)
        #[arg(long, value_name = "FILE", env = "ROCFORGE_CACHE_KEY")]
        cache_key: Option<PathBuf>,
    },
    /// Images: the builder image (`image build`), images with a built stack installed (`image create`)
    #[command(subcommand)]
    Image(ImageCommand),
    /// Check this machine before hours of work: runtime, builder image, disk and memory against the plan
    Doctor {
        /// Components whose plan to check against [default: the whole release line]
        components: Vec<String>,
        #[arg(long, value_enum)]
        runtime: Option<build_cmd::RuntimeChoice>,
    },
    /// The store of built install trees
    #[command(subcommand)]
    Store(StoreCommand),
    /// Patch series maintenance
    #[command(subcommand)]
    Patch(PatchCommand),
    /// Remove source cache entries that the catalog no longer produces
    Gc {
        /// Only list what would be removed
        #[arg(long)]
        dry_run: bool,
    },
    /// The GPU target table
    #[command(subcommand)]
    Arch(ArchCommand),
    /// The built-in catalog
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Generated CI files: the GitHub Actions release workflow
    #[command(subcommand)]
    Ci(CiCommand),
    /// The Nix path: an overlay for nixpkgs' rocmPackages
    #[command(subcommand)]
    Nix(NixCommand),
    /// Upload a release directory to a GitHub release or an OCI registry; write its wheel index
    #[command(after_help = "\
github://OWNER/REPO@TAG: finds or creates the release, uploads the tarballs, signatures,
SHA256SUMS, index.json and wheels; files already there with the same size are skipped, so a
re-run finishes an interrupted publish. The token comes from GITHUB_TOKEN (never printed);
ROCFORGE_GITHUB_API overrides https://api.github.com.

oci://REGISTRY/REPO: each tarball an artifact tagged <name>-<version>-<targets>-<key8>, the
signed index tagged by the release (ROCFORGE_REGISTRY_USER/ROCFORGE_REGISTRY_PASSWORD for
registries that want credentials).

Wheels (*.whl) in DIR get a PEP 503 index per target: DIR/<target>/<project>/index.html.

Examples:
  rocforge publish dist --to github://me/rocm-gfx90c@rocm-6.4.4-1
  rocforge publish dist --to oci://ghcr.io/me/rocforge")]
    Publish {
        /// The release directory (`rocforge package --out DIR`)
        dir: PathBuf,
        /// github://OWNER/REPO@TAG or oci://REGISTRY/REPO [default: only write the wheel index]
        #[arg(long, value_name = "URL")]
        to: Option<String>,
    },
    /// Tarballs of built components from the store, with SHA256SUMS, signatures and the release index
    #[command(after_help = "\
One deterministic tarball per component of the plan (the components and their dependencies):
<name>-<version>-<targets>-<key8>.tar.zst with a manifest (content key, hash input, image, glibc
floor, coverage, every file's size and sha256) as its first entry. The same store entry always
gives the same bytes. Signs with --key, $ROCFORGE_SIGNING_KEY or the default key, and writes
index.json (signed) for `rocforge install --from DIR_OR_URL`.

Examples:
  rocforge package rocsparse --arch gfx90c --out dist
  rocforge package rocblas --arch gfx90c,gfx902 --compression gz")]
    Package {
        #[arg(required = true)]
        components: Vec<String>,
        /// Output directory
        #[arg(long, value_name = "DIR", default_value = "dist")]
        out: PathBuf,
        #[arg(long, value_enum, default_value_t = rocforge::package::tarball::Compression::Zst)]
        compression: rocforge::package::tarball::Compression,
        /// Which builds to package: container builds or --runtime host builds
        #[arg(long, value_enum, default_value_t = RuntimeKind::Container)]
        runtime: RuntimeKind,
        /// Secret key file [default: $ROCFORGE_SIGNING_KEY, else ~/.config/rocforge/keys/rocforge.key]
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// Days until the index expires
        #[arg(long, value_name = "DAYS", default_value_t = 30)]
        expires_days: u64,
        /// Package even when files mention the store or cache paths (they will not relocate)
        #[arg(long)]
        allow_build_paths: bool,
    },
    /// Regenerate (and sign) DIR/index.json from the tarballs in DIR
    #[command(after_help = "\
With --renew, DIR needs only index.json and its signature: once that signature verifies as
`rocforge verify` checks it (trusted keys, keys.json beside it), the same artifacts are issued
again with a new expiry and signed, so a published release stays installable (the release
workflow's scheduled resign job).")]
    Index {
        dir: PathBuf,
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        #[arg(long, value_name = "DAYS", default_value_t = 30)]
        expires_days: u64,
        /// Keep the artifacts of DIR/index.json and only issue it anew (no tarballs needed)
        #[arg(long)]
        renew: bool,
    },
    /// Signing keys (minisign format)
    #[command(subcommand)]
    Key(KeyCommand),
    /// Sign files: writes FILE.minisig beside each (minisign format)
    Sign {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Secret key file [default: $ROCFORGE_SIGNING_KEY, else ~/.config/rocforge/keys/rocforge.key]
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
    /// Check FILE.minisig against the trusted keys (built-in, config [trust] keys, --key, key lists)
    #[command(after_help = "\
A key list (keys.json, written by `rocforge key rotate`) in FILE's directory, or the one
--key-list names, adds the keys it trusts when its chain of signatures leads back to a trusted
key, and removes the keys it revokes. The newest list seen and every revocation are remembered in
$ROCFORGE_STATE/trust.json (default ~/.local/state/rocforge): an older list is refused as a replay.")]
    Verify {
        file: PathBuf,
        /// A public key (RW… or a .pub file); repeatable
        #[arg(long, value_name = "PUB")]
        key: Vec<String>,
        /// The signature file [default: FILE.minisig]
        #[arg(long, value_name = "FILE")]
        sig: Option<PathBuf>,
        /// A key list to apply [default: keys.json beside FILE, if there is one]
        #[arg(long, value_name = "FILE")]
        key_list: Option<PathBuf>,
    },
    /// Install prebuilt components (and their dependencies) from a signed release index
    #[command(after_help = "\
Checks the index signature against the trusted keys (built-in, config, --key, and those of the
key list keys.json beside the index when its signatures chain back to a trusted key) and its
expiry, the host's glibc against the artifacts' floor, and that the HIP runtime is there for
artifacts that need it (in the prefix, in the ld.so cache, $ROCM_PATH/lib or /opt/rocm/lib;
else the index's rocm-runtime is added, else install stops; ROCFORGE_HOST_LIBS=DIR[:DIR…], for
tests and unusual systems, names the only directories to look in), downloads each artifact
(resumable, verified against the index's sha256), extracts it safely into a staging directory
beside the prefix, then moves it in and writes a receipt. A failed or interrupted install leaves the prefix as it was.

Without --from, ROCFORGE_INDEX or [install] index in rocforge.toml or ~/.config/rocforge/config.toml,
the index is the project's newest published release:
https://github.com/rocforge/rocforge/releases/latest/download/index.json

Examples:
  rocforge install rocsparse --arch gfx90c --prefix ~/rocm
  rocforge install rocsparse --arch gfx90c --from ./dist --prefix ~/rocm")]
    Install {
        #[arg(required = true)]
        components: Vec<String>,
        /// Index location: a directory, a path or URL of index.json, or a URL of its directory [default: $ROCFORGE_INDEX, else [install] index of the config, else the project's releases]
        #[arg(long, value_name = "URL_OR_DIR")]
        from: Option<String>,
        /// Where to install [default: $ROCFORGE_PREFIX, else ~/.local/rocforge]
        #[arg(long, value_name = "DIR")]
        prefix: Option<PathBuf>,
        /// Install even if the index is unsigned or its signature does not verify (loud)
        #[arg(long)]
        allow_unsigned: bool,
        /// Accept artifacts hosted on HOST (or HOST:PORT) besides the index's host; repeatable
        #[arg(long, value_name = "HOST")]
        allow_host: Vec<String>,
        /// Also trust this public key (RW… or a .pub file); repeatable
        #[arg(long, value_name = "PUB")]
        key: Vec<String>,
        /// Refuse to unpack more than this [default: 256GiB]
        #[arg(long, value_name = "SIZE")]
        max_size: Option<String>,
        /// Also install the index's HIP runtime (rocm-runtime), whatever this system has
        #[arg(long, conflicts_with = "no_runtime_check")]
        with_runtime: bool,
        /// Do not check that the HIP runtime the artifacts need is present (nor add it)
        #[arg(long)]
        no_runtime_check: bool,
        /// Replace an installed component by an older version the index offers
        #[arg(long)]
        allow_downgrade: bool,
        /// The longest one artifact's download may take, retries included (e.g. 90m, 3h) [default: 2h]
        #[arg(long, value_name = "DURATION", env = "ROCFORGE_INSTALL_TIMEOUT")]
        timeout: Option<String>,
    },
    /// Remove installed components: exactly the files their receipts list
    Uninstall {
        #[arg(required = true)]
        names: Vec<String>,
        /// [default: $ROCFORGE_PREFIX, else ~/.local/rocforge]
        #[arg(long, value_name = "DIR")]
        prefix: Option<PathBuf>,
    },
    /// The local GPUs from the KFD topology: target, compute units, memory, xnack, nearest target
    #[command(after_help = "\
Reads /sys/class/kfd/kfd/topology (or DIR/sys/... with --sysfs-root DIR, a recorded tree), the
amdgpu noretry parameter and HSA_XNACK. Exits 1 when no GPU node is found, saying why that may be.

Examples:
  rocforge detect
  rocforge detect --format json
  rocforge detect --sysfs-root ./recorded-machine")]
    Detect {
        /// A directory standing for / (a recorded machine)
        #[arg(long, value_name = "DIR")]
        sysfs_root: Option<PathBuf>,
    },
    /// Run a built component's test client on the local GPU, sharded and hang-proof
    #[command(after_help = "\
Installs the component and its dependencies from the store into a scratch prefix (a build for the
target alone, else the newest build whose targets include it, e.g. the release's gfx90c,gfx902
build for --arch gfx90c) and runs the recipe's [test] client with LD_LIBRARY_PATH and ROCM_PATH set, one shard after another. Every
finished test is journaled at once; a test that makes no progress for the timeout is killed,
recorded as hung, and the shard restarts without it. Writes OUT/results.json and OUT/junit.xml.

Examples:
  rocforge test rocsparse --arch gfx90c
  rocforge test rocsparse --arch gfx900 --spoof      the gfx900 artifact under HSA_OVERRIDE_GFX_VERSION=9.0.0
  rocforge test rocsparse --arch gfx90c --resume     continue an interrupted run (Ctrl-C says so)")]
    Test {
        component: String,
        /// Run the nearest target's artifact on this GPU under HSA_OVERRIDE_GFX_VERSION
        #[arg(long)]
        spoof: bool,
        /// Continue the run journaled in --out
        #[arg(long)]
        resume: bool,
        /// A directory standing for / (a recorded machine)
        #[arg(long, value_name = "DIR")]
        sysfs_root: Option<PathBuf>,
        /// Results directory [default: ./rocforge-results/<component>-<target>[-spoofed]]
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// This machine's name in reports [default: the hostname]
        #[arg(long, value_name = "NAME")]
        machine: Option<String>,
        /// Share the results: oci://REGISTRY/REPO (an artifact tagged results-<component>-<target>-<machine>-<time>) or an http(s) URL (PUT URL/<machine>-<run>.json)
        #[arg(long, value_name = "DEST")]
        submit: Option<String>,
        /// Sign the submitted results.json and junit.xml with this secret key
        #[arg(long, value_name = "FILE", requires = "submit")]
        key: Option<PathBuf>,
        /// Install from this artifact index (URL or directory) when the store lacks the component
        #[arg(long, value_name = "INDEX")]
        from: Option<String>,
    },
    /// One HTML page and a markdown summary from results bundles of any number of machines
    #[command(after_help = "\
Results pulled from oci://REGISTRY/REPO come from anyone who can push there, so each must carry a
minisign signature (`rocforge test … --submit oci://… --key SECRET`) by a trusted key: the
built-in keys, config [trust] keys, or --key. A bad signature or an untrusted key is refused
(named, and left out); an unsigned artifact is left out unless --allow-unsigned. Local
results.json files are your own and are read as they are.

Examples:
  rocforge report rocforge-results/*/results.json --out report/
  rocforge report oci://ghcr.io/me/rocforge-results --key RWQ… --out report/")]
    Report {
        /// results.json files written by `rocforge test`, or oci://REGISTRY/REPO (every results artifact there)
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// Where report.html and report.md go
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Also trust this public key (RW… or a .pub file) for pulled results; repeatable
        #[arg(long, value_name = "PUB")]
        key: Vec<String>,
        /// Include pulled results that carry no signature (they are marked as such on stderr)
        #[arg(long)]
        allow_unsigned: bool,
    },
    /// The GPU code in built files: offload bundles, code objects, target IDs, Tensile files
    #[command(after_help = "\
PATH is a shared library, executable, object, static archive, code object or bundle, or a
directory (an install prefix), read recursively. With --against, prints a library x target
table (present, only the nearest target's code so a spoof is needed, MISSING) and exits 1 when
anything is missing or a file could not be read.

Examples:
  rocforge inspect /opt/rocforge/lib/librocsparse.so
  rocforge inspect --against gfx90c,gfx902 /opt/rocforge
  rocforge inspect --format json build/libfoo.so")]
    Inspect {
        /// Files or directories to read
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Target IDs every library must carry code for, e.g. gfx90c or gfx90c:xnack-,gfx902
        #[arg(long, value_name = "LIST")]
        against: Option<String>,
        /// With --against: accept the nearest target's code for these targets (it runs only
        /// under HSA_OVERRIDE_GFX_VERSION)
        #[arg(long, value_name = "LIST", requires = "against")]
        allow_spoof: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// A new ed25519 key pair in minisign format (password from ROCFORGE_KEY_PASSWORD, if set)
    Generate {
        /// Directory for rocforge.key and rocforge.pub [default: ~/.config/rocforge/keys]
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Rotate the signing key: a new key list trusting --new, signed by the --old secret key
    #[command(after_help = "\
Writes OUT (keys.json: sequence, issue date, the keys to trust and to revoke, and a sha256 link
to the list before it) and OUT.minisig, signed by the old key, plus the numbered copy
keys-<N>.json(.minisig); an existing OUT becomes keys-<N-1>.json. Publish all of them beside
index.json: installers that trust the old key follow the chain to the new one. Schema and rules:
docs/security.md. The old key's password comes from ROCFORGE_KEY_PASSWORD.

Examples:
  rocforge key generate --out new-keys
  rocforge key rotate --old ~/.config/rocforge/keys/rocforge.key --new new-keys/rocforge.pub --revoke-old --out dist/keys.json")]
    Rotate {
        /// The secret key that signs the list (trusted today)
        #[arg(long, value_name = "SECRET")]
        old: PathBuf,
        /// A public key to trust from now on (RW… or a .pub file); repeatable
        #[arg(long, value_name = "PUB", required = true)]
        new: Vec<String>,
        /// Revoke the old key: installers stop trusting it once they have seen this list
        #[arg(long)]
        revoke_old: bool,
        /// Another public key to revoke; repeatable
        #[arg(long, value_name = "PUB")]
        revoke: Vec<String>,
        /// The key list to write (its directory gets the numbered copies)
        #[arg(long, value_name = "FILE", default_value = "keys.json")]
        out: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum ArchCommand {
    /// Every known GPU target
    List,
    /// One target in full, e.g. `rocforge arch show gfx90c`
    Show {
        /// A target ID (gfx90c, gfx90c:xnack-) or a KFD gfx_target_version number (90012)
        target: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum ImageCommand {
    /// Build the release line's builder image locally from containers/Containerfile.<release>
    Build {
        #[arg(long, value_enum)]
        runtime: Option<build_cmd::RuntimeChoice>,
        /// The Containerfile [default: containers/Containerfile.<release> beside the catalog, else the built-in one]
        #[arg(long, value_name = "FILE")]
        containerfile: Option<PathBuf>,
    },
    /// An image to run the stack in: a base image plus one layer with the built components installed
    #[command(after_help = "\
`image build` makes the builder image rocforge builds in; `image create` makes an image for
users: the base image (pulled from its registry; linux/amd64 from a multi-platform index) plus
one layer holding the components and their dependencies from the store under the release
prefix (/opt/rocm), with ROCM_PATH, PATH and LD_LIBRARY_PATH set and org.opencontainers.image.*
and rocforge.* labels. Reproducible: the same store entries on the same base give the same
digest (created and file times: SOURCE_DATE_EPOCH, else the store entries', else 1970).
Loopback registries are spoken to over HTTP; ROCFORGE_REGISTRY_USER/PASSWORD for credentials.

Examples:
  rocforge image create rocm-math --arch gfx90c --base docker.io/library/ubuntu:24.04 --tag ghcr.io/me/rocm-gfx90c:6.4.4 --push
  rocforge image create rocsparse --arch gfx90c --base ghcr.io/me/base:1 --tag localhost/rocsparse:gfx90c --load podman")]
    Create {
        /// Components to install (with their dependencies); bundles like rocm-math work too
        #[arg(required = true)]
        components: Vec<String>,
        /// The base image in a registry: REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:…
        #[arg(long, value_name = "REF")]
        base: String,
        /// The new image's name: REGISTRY/NAME:TAG
        #[arg(long, value_name = "REF")]
        tag: String,
        /// Push the image to --tag's registry
        #[arg(long)]
        push: bool,
        /// Load the image into podman (an oci-archive) or docker (a docker-archive)
        #[arg(long, value_enum, value_name = "TOOL")]
        load: Option<rocforge::image::Loader>,
        /// Which builds to install: container builds or --runtime host builds
        #[arg(long, value_enum, default_value_t = RuntimeKind::Container)]
        runtime: RuntimeKind,
    },
}

#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// Every entry: key, component, version, targets, runtime
    List,
    /// One entry in full (a key prefix of 8 or more characters is enough)
    Show { key: String },
    /// Remove entries superseded by a newer build of the same component and targets
    Gc {
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PatchCommand {
    /// Write the commits of a `rocforge dev` checkout back into patches/<release>/<component>/
    Export {
        component: String,
        /// The checkout [default: ./rocforge-dev/<component>]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum CiCommand {
    /// Write .github/workflows/release.yml (and .github/actionlint.yaml) from the catalog and runners.toml
    #[command(after_help = "\
One plan job (`rocforge plan --format github-matrix`, one output per dependency level), a
builder-image job, one build job per dependency level (a level with nothing to build is skipped,
the later ones still run), test jobs on the GPU runners runners.toml lists as registered, a
report and a publish job. See docs/ci.md.

Examples:
  rocforge ci github            regenerate after changing recipes or runners.toml
  rocforge ci github --check    exit 1 with a diff when the committed files differ (CI)")]
    Github {
        /// Compare with the committed files instead of writing; exit 1 with a unified diff
        #[arg(long)]
        check: bool,
        /// The repository root: runners.toml is read and .github/ written there
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Which self-hosted runner labels of runners.toml have a runner: from the GitHub API when a token is set
    #[command(after_help = "\
Without a token, runners.toml's `registered` decides. With ROCFORGE_RUNNERS_TOKEN (or
GITHUB_TOKEN) set and --repo or --org given, the GitHub API lists the runners: a label is ready
when a runner carrying self-hosted, linux and the label is online. The token needs
\"Administration: read\" on the repository (\"Self-hosted runners: read\" on an organization);
the workflow's own GITHUB_TOKEN does not have it. ROCFORGE_GITHUB_API overrides
https://api.github.com. `gpu_ready` in the JSON is what the release workflow's plan job uses.

Examples:
  rocforge ci runners                                  runners.toml only
  ROCFORGE_RUNNERS_TOKEN=… rocforge ci runners --repo me/rocforge
  rocforge ci runners --repo me/rocforge --format json | jq -r '.gpu_ready | join(\",\")'")]
    Runners {
        /// OWNER/REPO whose runners to list
        #[arg(long, value_name = "OWNER/REPO", conflicts_with = "org")]
        repo: Option<String>,
        /// An organization whose runners to list
        #[arg(long, value_name = "ORG")]
        org: Option<String>,
        /// The repository root holding runners.toml
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum NixCommand {
    /// Write an overlay for nixpkgs' rocmPackages: gpuTargets, our patch series, a nixpkgs pin
    #[command(after_help = "\
Writes DIR/overlay.nix, DIR/patches/<component>/*.patch, DIR/default.nix and DIR/nixpkgs.json.
See docs/nix.md for what the overlay does and does not reproduce.

Examples:
  rocforge nix export --arch gfx90c --out ./rocforge-nix
  nix-build ./rocforge-nix -A rocblas --arg nixpkgs /path/to/nixpkgs")]
    Export {
        /// Output directory
        #[arg(long, value_name = "DIR", default_value = "rocforge-nix")]
        out: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum CatalogCommand {
    /// Write the built-in recipes/ and patches/ to DIR for editing; use them with --recipes DIR/recipes
    Export {
        /// Destination directory (must not exist, or be empty)
        dir: PathBuf,
    },
}

/// What a command failed with, rendered by main.
pub enum CliError {
    Diagnostics(Diagnostics),
    One(Diagnostic),
}

impl CliError {
    pub fn render(&self, color: bool) -> String {
        match self {
            CliError::Diagnostics(d) => {
                let mut out = String::new();
                for diag in d.iter() {
                    out += &diag.render(color);
                    out += "\n\n";
                }
                out += &format!("error: {} problem(s) found\n", d.len());
                out
            }
            CliError::One(d) => d.render(color) + "\n",
        }
    }
}

impl From<Diagnostic> for CliError {
    fn from(d: Diagnostic) -> Self {
        CliError::One(d)
    }
}

impl From<CatalogError> for CliError {
    fn from(e: CatalogError) -> Self {
        let hint = e.hint();
        match e {
            CatalogError::Invalid(d) => CliError::Diagnostics(d),
            other => CliError::One(Diagnostic::new(other.to_string()).maybe_hint(hint)),
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, CliError>;

pub(crate) fn root(g: &Global) -> CatalogRoot {
    match &g.recipes {
        Some(dir) => CatalogRoot::Dir(dir.clone()),
        None => CatalogRoot::Embedded,
    }
}

pub(crate) fn only_text_or_json(g: &Global, command: &str) -> Result<()> {
    if g.format == Format::GithubMatrix {
        return Err(Diagnostic::new(format!(
            "--format github-matrix is not available for `{command}`"
        ))
        .hint("github-matrix is a format of `rocforge plan`; use text or json here")
        .into());
    }
    Ok(())
}

pub fn run(args: Args) -> Result<ExitCode> {
    let g = &args.global;
    match &args.command {
        Command::List {
            installed: true,
            prefix,
        } => artifact_cmd::list_installed(g, prefix.as_deref()),
        Command::List { .. } => catalog_cmds::list(g),
        Command::Package {
            components,
            out,
            compression,
            runtime,
            key,
            expires_days,
            allow_build_paths,
        } => artifact_cmd::package(
            g,
            artifact_cmd::PackageArgs {
                components,
                out,
                compression: *compression,
                runtime: *runtime,
                key: key.as_deref(),
                valid_days: *expires_days,
                allow_build_paths: *allow_build_paths,
            },
        ),
        Command::Index {
            dir,
            key,
            expires_days,
            renew,
        } => artifact_cmd::index_cmd(g, dir, key.as_deref(), *expires_days, *renew),
        Command::Publish { dir, to } => publish_cmd::publish_cmd(g, dir, to.as_deref()),
        Command::Key(KeyCommand::Generate { out }) => artifact_cmd::key_generate(g, out.as_deref()),
        Command::Key(KeyCommand::Rotate {
            old,
            new,
            revoke_old,
            revoke,
            out,
        }) => artifact_cmd::key_rotate(g, old, new, *revoke_old, revoke, out),
        Command::Sign { files, key } => artifact_cmd::sign_cmd(g, files, key.as_deref()),
        Command::Verify {
            file,
            key,
            sig,
            key_list,
        } => artifact_cmd::verify_cmd(g, file, key, sig.as_deref(), key_list.as_deref()),
        Command::Install {
            components,
            from,
            prefix,
            allow_unsigned,
            allow_host,
            key,
            max_size,
            with_runtime,
            no_runtime_check,
            allow_downgrade,
            timeout,
        } => artifact_cmd::install_cmd(
            g,
            artifact_cmd::InstallArgs {
                components,
                from: from.as_deref(),
                prefix: prefix.as_deref(),
                allow_unsigned: *allow_unsigned,
                allow_downgrade: *allow_downgrade,
                timeout: timeout.as_deref(),
                allow_host,
                keys: key,
                max_size: max_size.as_deref(),
                runtime: if *no_runtime_check {
                    rocforge::install::RuntimeCheck::Skip
                } else if *with_runtime {
                    rocforge::install::RuntimeCheck::With
                } else {
                    rocforge::install::RuntimeCheck::Auto
                },
            },
        ),
        Command::Uninstall { names, prefix } => {
            artifact_cmd::uninstall_cmd(g, names, prefix.as_deref())
        }
        Command::Check { sources: false, .. } => catalog_cmds::check(g),
        Command::Check {
            sources: true,
            only_patched,
            components,
        } => sources::check_sources(g, components, *only_patched),
        Command::Plan {
            components,
            explain,
            runtime,
            overlay,
        } => plan_cmd::plan_cmd(g, components, explain.as_deref(), *runtime, overlay),
        Command::Fetch { component, overlay } => sources::fetch(g, component, overlay),
        Command::Lock { check, skip_images } => sources::lock(g, *check, *skip_images),
        Command::Dev { component, dir } => sources::dev(g, component, dir.as_deref()),
        Command::Patch(PatchCommand::Export { component, dir }) => {
            sources::patch_export(g, component, dir.as_deref())
        }
        Command::Gc { dry_run } => sources::gc(g, *dry_run),
        Command::Build {
            components,
            jobs,
            runtime,
            keep_going,
            fresh,
            dry_run,
            overlay,
            allow_missing,
            allow_spoof,
            cache,
            cache_key,
        } => build_cmd::build(
            g,
            build_cmd::BuildArgs {
                components,
                jobs: *jobs,
                runtime: *runtime,
                keep_going: *keep_going,
                fresh: *fresh,
                dry_run: *dry_run,
                overlays: overlay,
                allow_missing: allow_missing.as_deref(),
                allow_spoof: allow_spoof.as_deref(),
                cache: cache.as_deref(),
                cache_key: cache_key.as_deref(),
            },
        ),
        Command::Image(ImageCommand::Build {
            runtime,
            containerfile,
        }) => build_cmd::image_build(g, *runtime, containerfile.clone()),
        Command::Image(ImageCommand::Create {
            components,
            base,
            tag,
            push,
            load,
            runtime,
        }) => image_cmd::create(
            g,
            image_cmd::CreateArgs {
                components,
                base,
                tag,
                push: *push,
                load: *load,
                runtime: *runtime,
            },
        ),
        Command::Doctor {
            components,
            runtime,
        } => build_cmd::doctor(g, components, *runtime),
        Command::Store(StoreCommand::List) => build_cmd::store_list(g),
        Command::Store(StoreCommand::Show { key }) => build_cmd::store_show(g, key),
        Command::Store(StoreCommand::Gc { dry_run }) => build_cmd::store_gc(g, *dry_run),
        Command::Arch(ArchCommand::List) => arch_cmd::arch_list(g),
        Command::Arch(ArchCommand::Show { target }) => arch_cmd::arch_show(g, target),
        Command::Detect { sysfs_root } => test_cmd::detect(g, sysfs_root.as_deref()),
        Command::Test {
            component,
            spoof,
            resume,
            sysfs_root,
            out,
            machine,
            submit,
            key,
            from,
        } => test_cmd::test(
            g,
            test_cmd::TestArgs {
                component,
                spoof: *spoof,
                resume: *resume,
                sysfs_root: sysfs_root.as_deref(),
                out: out.as_deref(),
                machine: machine.as_deref(),
                submit: submit.as_deref(),
                key: key.as_deref(),
                from: from.as_deref(),
            },
        ),
        Command::Report {
            results,
            out,
            key,
            allow_unsigned,
        } => test_cmd::report(g, results, out, key, *allow_unsigned),
        Command::Inspect {
            paths,
            against,
            allow_spoof,
        } => inspect_cmd::inspect_cmd(g, paths, against.as_deref(), allow_spoof.as_deref()),
        Command::Ci(CiCommand::Github { check, dir }) => ci_cmd::github(g, dir, *check),
        Command::Ci(CiCommand::Runners { repo, org, dir }) => {
            ci_cmd::runners(g, dir, repo.as_deref(), org.as_deref())
        }
        Command::Nix(NixCommand::Export { out }) => ci_cmd::nix_export(g, out),
        Command::Catalog(CatalogCommand::Export { dir }) => {
            let written = export_embedded(dir).map_err(|e| {
                Diagnostic::new(e.to_string()).hint("choose a new directory; nothing was written")
            })?;
            println!(
                "wrote {} files to {}\nuse it with: rocforge --recipes {} check",
                written.len(),
                dir.display(),
                dir.join("recipes").display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
