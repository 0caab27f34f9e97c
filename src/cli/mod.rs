//! The command line: clap definitions, and one file per command that parses its flags, calls
//! the library ([`rocforge::app`] for the use cases) and renders the result as text or JSON.
//! Only this module (and main) prints.

/// A note on stderr about what a command did (never an error, nor a warning about safety):
/// `-q` silences it, as it silences the reporter's notes.
macro_rules! note {
    ($g:expr, $($arg:tt)*) => {
        if !$g.quiet {
            eprintln!($($arg)*)
        }
    };
}

mod arch_cmd;
mod artifact_cmd;
mod attest_cmd;
mod build_cmd;
mod catalog_cmds;
mod check_cmd;
mod ci_cmd;
pub mod complete;
mod docs_cmd;
mod doctor_cmd;
mod image_cmd;
mod inspect_cmd;
mod lock_cmd;
mod plan_cmd;
pub mod progress;
mod publish_cmd;
mod sources;
mod store_cmd;
pub mod term;
mod test_cmd;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

pub use rocforge::app::Error as CliError;
use rocforge::app::runtime::RuntimeChoice;
use rocforge::app::{Options, Session};
use rocforge::catalog::{CatalogRoot, export_embedded};
use rocforge::diag::Diagnostic;
use rocforge::plan::key::RuntimeKind;
use rocforge::progress::Reporter;

const AFTER_HELP: &str = "\
Examples:
  rocforge list                          # components of every release line
  rocforge plan rocsparse --arch gfx90c  # what a rocSPARSE build would do
  rocforge plan rocsolver --arch gfx90c,gfx902 --format json
  rocforge arch show gfx90c              # what rocforge knows of a target
  rocforge check --recipes ./recipes     # validate an edited catalog
  rocforge fetch rocblas --arch gfx90c   # the patched source tree
  rocforge dev rocblas --arch gfx90c     # a git checkout, one commit per patch

The shipped catalog is built in; `rocforge catalog export DIR` writes it out for editing and \
`--recipes DIR/recipes` (or ROCFORGE_RECIPES) uses the edited copy.

Exit codes: 0 done; 1 what was asked failed or found a problem (a build, the coverage gate, a \
check, a failing test, a bad signature), said on stderr with a hint; 2 the command line itself \
is wrong (an unknown flag or value, or a --format or --runtime value the command does not \
take); 130 interrupted (Ctrl-C): the same command continues.";

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

/// Flags every command takes. In a command's help they come last, under their own heading, so
/// the command's own flags are read first.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// A recipes/ directory to use instead of the built-in catalog (patches come from its sibling patches/)
    #[arg(long, global = true, env = "ROCFORGE_RECIPES", value_name = "DIR")]
    pub recipes: Option<PathBuf>,
    /// Release line, e.g. debian-6.4 [default: the newest built line: `rocforge list`]
    #[arg(long, global = true, env = "ROCFORGE_RELEASE", value_name = "NAME")]
    pub release: Option<String>,
    /// The store of built install trees [default: $XDG_DATA_HOME/rocforge/store]
    #[arg(long, global = true, env = "ROCFORGE_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// GPU targets as a comma list of target IDs, e.g. gfx90c or gfx90c,gfx902:xnack- [default: this machine's GPU when it has one (ROCFORGE_SYSFS_ROOT: a recorded KFD tree), else the release's]
    #[arg(long, global = true, value_name = "LIST")]
    pub arch: Option<String>,
    /// Output format; a command refuses one it does not write (github-matrix is plan's alone)
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Refuse any input that rocforge.lock does not pin (unlocked tags, stale entries)
    #[arg(long, global = true)]
    pub locked: bool,
    /// No progress bars or notes on stderr
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// More on stderr: -v each command run and file downloaded, and a build's log as it is
    /// written; -vv debug events; -vvv everything, libraries included
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// When to colour diagnostics, help and log lines
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = term::Color::Auto)]
    pub color: term::Color,
}

/// `--runtime`: one set of values for every command that takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Runtime {
    /// podman if it works, else docker
    // `container` was plan's, package's and image create's name for it.
    #[value(alias = "container")]
    Auto,
    /// podman, with rocforge.toml's podman arguments
    Podman,
    /// docker, with rocforge.toml's docker arguments
    Docker,
    /// no container: on this machine itself (not reproducible; keyed apart from container builds)
    Host,
}

impl Runtime {
    /// The library's choice: None lets it pick podman, else docker.
    pub fn choice(self) -> Option<RuntimeChoice> {
        match self {
            Runtime::Auto => None,
            Runtime::Podman => Some(RuntimeChoice::Podman),
            Runtime::Docker => Some(RuntimeChoice::Docker),
            Runtime::Host => Some(RuntimeChoice::Host),
        }
    }

    /// Which builds: podman and docker run the same image, so their builds share keys.
    pub fn kind(self) -> RuntimeKind {
        RuntimeChoice::kind(self.choice())
    }
}

/// The `--runtime` flag, flattened into each command that takes it so that it reads the same
/// everywhere.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct RuntimeArg {
    /// Where builds run. Commands that read the store (plan, package, image create) take the
    /// builds made that way; podman's and docker's are the same
    #[arg(long, value_enum, value_name = "RUNTIME", default_value_t = Runtime::Auto)]
    pub runtime: Runtime,
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
    List(catalog_cmds::ListArgs),
    /// Validate the whole catalog (every release line, the target table, patches); exit 1 listing every problem
    #[command(after_help = "\
Without --sources nothing is fetched: the recipes, the target table and the patches' shape are \
checked. With --sources each component's source is fetched (through the mirrors in rocforge.toml), \
then its patch series and derivations are applied for all of the line's targets together and for \
each target with patches of its own, in scratch copies (the source cache is not written). Each \
component is reported as applies, conflict (naming the patch, the hunk and the line), derivation \
fails, or source unreachable; exit 1 when any does not apply.

  rocforge check               # recipes and patches, offline
  rocforge check --sources     # every component of every release line
  rocforge check --sources --release rocm-6.4.4 rocblas tensile
  rocforge check --sources --only-patched --format json")]
    Check(check_cmd::CheckArgs),
    /// Show what would be built, in order, with content keys, GPU flags and a resource estimate
    #[command(after_help = "\
Status is `build (new)` for a component the store never held, `build (X changed)` naming the inputs \
that differ from the newest stored build, or `cached`.

Examples:
  rocforge plan rocsparse --arch gfx90c
  rocforge plan --format github-matrix --arch gfx90c,gfx902  # a list per level
  rocforge plan rocblas --explain tensile  # the hash input behind tensile's key")]
    Plan(plan_cmd::PlanArgs),
    /// Fetch components' sources at their pinned commits, patched for the targets, into the source cache
    #[command(after_help = "\
The tree is keyed by the pinned commit (or tarball sha256), the patch series, derivations and \
overlays, so a second fetch is a no-op. Sources come through mirrors when rocforge.toml maps \
their URL prefix (see `rocforge fetch --help` in docs/sources.md). The cache lives in \
$ROCFORGE_CACHE (default ~/.cache/rocforge).

Examples:
  rocforge fetch rocblas --arch gfx90c
  rocforge fetch rocblas tensile --arch gfx90c,gfx902
  rocforge fetch rocblas --arch gfx90c \\
    --overlay rocblas:library/src/blas3/Tensile/Logic/asm_full/renoir=./logic
  rocforge fetch rocsparse rocprim --locked --format json  # a JSON array")]
    Fetch(sources::FetchArgs),
    /// Pin every git tag to a commit and every builder image to a digest in rocforge.lock
    Lock(lock_cmd::LockArgs),
    /// A working git checkout with the patch series applied as one commit per patch, for patch authors
    #[command(after_help = "\
Edit, then commit (amend, rebase, add commits) as usual, and write the series back with \
`rocforge patch export COMPONENT`. The pristine source is the commit tagged rocforge-base.")]
    Dev(sources::DevArgs),
    /// Build components and every dependency the store lacks, in reproducible containers
    #[command(after_help = "\
Each component is built in the release line's builder image with the network off, sources \
mounted read-only and dependencies mounted read-only under the release prefix, then committed \
to the store under its content key. A second run with the same inputs does nothing. Ctrl-C \
stops the containers it started; finished components stay in the store.

Examples:
  rocforge build rocsparse --arch gfx90c
  rocforge build rocsolver --arch gfx90c,gfx902 --jobs 8 --keep-going
  rocforge build rocprim --arch gfx902 --runtime host  # not reproducible
  rocforge build rocblas --dry-run                     # the plan, nothing built")]
    Build(build_cmd::BuildArgs),
    /// Images: the builder image (`image build`), images with a built stack installed (`image create`)
    #[command(subcommand)]
    Image(ImageCommand),
    /// Check this machine before hours of work: runtime, builder image, disk and memory against the plan
    Doctor(doctor_cmd::DoctorArgs),
    /// The store of built install trees
    #[command(subcommand)]
    Store(StoreCommand),
    /// Patch series maintenance
    #[command(subcommand)]
    Patch(PatchCommand),
    /// Remove source cache entries that the catalog no longer produces
    Gc(sources::GcArgs),
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
    /// Shell completions, with the catalog's component, target and line names
    ///
    /// The script asks rocforge as you type, so the names offered are those of the catalog
    /// ROCFORGE_RECIPES and ROCFORGE_RELEASE select, as the command would read it.
    #[command(after_help = "\
Examples:
  echo 'source <(rocforge completions bash)' >> ~/.bashrc
  echo 'source <(rocforge completions zsh)' >> ~/.zshrc
  rocforge completions fish > ~/.config/fish/completions/rocforge.fish")]
    Completions(docs_cmd::CompletionsArgs),
    /// Man pages: rocforge(1) on standard output, or every command's page into --out DIR
    #[command(after_help = "\
Examples:
  rocforge man | man -l -
  rocforge man --out ~/.local/share/man/man1")]
    Man(docs_cmd::ManArgs),
    /// JSON Schemas of the formats other programs read: index, manifest, receipt, results, plan
    #[command(after_help = "\
Each schema is generated from the types rocforge writes the format with; docs/schemas/ holds
the same files, and docs/*-schema.md describe each field of the saved formats. A command's
--format json output has its schema under the name `rocforge schema` lists (arches, install,
store-entry, ...).

Examples:
  rocforge schema                     every name, with its identifier
  rocforge schema index               the release index's schema
  rocforge schema --out docs/schemas  every schema, as NAME.schema.json")]
    Schema(docs_cmd::SchemaArgs),
    /// Upload a release directory to a GitHub release or an OCI registry; write its wheel index
    #[command(after_help = "\
github://OWNER/REPO@TAG: finds or creates the release, uploads the tarballs, signatures, \
SHA256SUMS, index.json and wheels; files already there with the same size are skipped, so a \
re-run finishes an interrupted publish. A file GitHub already holds under that name whose digest \
is not this file's means the tag is another release: refused before anything is uploaded (publish \
under a new tag). The token comes from GITHUB_TOKEN (never printed); ROCFORGE_GITHUB_API \
overrides https://api.github.com.

oci://REGISTRY/REPO: each tarball an artifact tagged <name>-<version>-<targets>-<key8>, the \
signed index tagged by the release (ROCFORGE_REGISTRY_USER/ROCFORGE_REGISTRY_PASSWORD for \
registries that want credentials).

Wheels (*.whl) in DIR get a PEP 503 index per target: DIR/<target>/<project>/index.html.

--dry-run prints the plan instead, read from DIR alone: each file with its sha256 and size and
where it goes, the index's entries and which files are signed, the wheel index pages; --format
json prints it as rocforge.publish-plan/1. Nothing is uploaded or written, and the destination
is not asked what it already has.

Examples:
  rocforge publish dist --to github://me/rocm-gfx90c@rocm-6.4.4-1
  rocforge publish dist --to oci://ghcr.io/me/rocforge
  rocforge publish dist --to oci://ghcr.io/me/rocforge --dry-run")]
    Publish(publish_cmd::PublishArgs),
    /// Tarballs of built components from the store, with SHA256SUMS, signatures and the release index
    #[command(after_help = "\
One deterministic tarball per component of the plan (the components and their dependencies): \
<name>-<version>-<targets>-<key8>.tar.zst with a manifest (content key, hash input, image, glibc \
floor, coverage, every file's size and sha256) as its first entry. The same store entry always \
gives the same bytes. Signs with --key, $ROCFORGE_SIGNING_KEY or the default key, and writes \
index.json (signed) for `rocforge install --from DIR_OR_URL`.

Examples:
  rocforge package rocsparse --arch gfx90c --out dist
  rocforge package rocblas --arch gfx90c,gfx902 --compression gz")]
    Package(artifact_cmd::PackageArgs),
    /// Regenerate (and sign) DIR/index.json from the tarballs in DIR
    #[command(after_help = "\
With --renew, DIR needs only index.json and its signature: once that signature verifies as \
`rocforge verify` checks it (trusted keys, keys.json beside it), the same artifacts are issued \
again with a new expiry and signed, so a published release stays installable (the release \
workflow's scheduled resign job).")]
    Index(artifact_cmd::IndexArgs),
    /// Signing keys (minisign format)
    #[command(subcommand)]
    Key(KeyCommand),
    /// Sign files: writes FILE.minisig beside each (minisign format)
    Sign(artifact_cmd::SignArgs),
    /// Check FILE.minisig against the trusted keys (built-in, config [trust] keys, --key, key lists)
    #[command(after_help = "\
A key list (keys.json, written by `rocforge key rotate`) in FILE's directory, or the one \
--key-list names, adds the keys it trusts when its chain of signatures leads back to a trusted \
key, and removes the keys it revokes. The newest list seen and every revocation are remembered in \
$ROCFORGE_STATE/trust.json (default ~/.local/state/rocforge): an older list is refused as a replay.

With --rebuild, FILE is a tarball written by `rocforge package` (a path or an http(s) URL): it is rebuilt from the inputs its manifest records (release line, component, targets, runtime, content key) with this catalog, packaged the same way, and compared byte for byte. Exit 0: identical; exit 1: not (the first differing file and how), or this catalog plans another key (both keys and the inputs that differ). The rebuild goes into --store when that store lacks the key (the entry stays), else into a temporary store, removed afterwards; the source cache is shared.

Examples:
  rocforge verify dist/rocprim-3.4.1-gfx90c_gfx902-1a2b3c4d.tar.zst --rebuild
  rocforge verify https://example.org/r/rocprim.tar.zst --rebuild --format json")]
    Verify(artifact_cmd::VerifyArgs),
    /// Install prebuilt components (and their dependencies) from a signed release index
    #[command(after_help = "\
Checks the index signature against the trusted keys (built-in, config, --key, and those of the \
key list keys.json beside the index when its signatures chain back to a trusted key) and its \
expiry, the host's glibc against the artifacts' floor, and that the HIP runtime is there for \
artifacts that need it (in the prefix, in the ld.so cache, $ROCM_PATH/lib or /opt/rocm/lib; \
else the index's rocm-runtime is added, else install stops; ROCFORGE_HOST_LIBS=DIR[:DIR…], for \
tests and unusual systems, names the only directories to look in), downloads each artifact \
(resumable, verified against the index's sha256), extracts it safely into a staging directory \
beside the prefix, then moves it in and writes a receipt. A failed or interrupted install leaves the prefix as it was.

--dry-run makes the same checks and prints the plan instead: each artifact (dependencies first) with its URL, sha256 and sizes, whether it is installed, replaces a version or is kept, and the components left as they are; --format json prints it as rocforge.install-plan/1. Nothing is downloaded, locked or written.

Without --from, ROCFORGE_INDEX or [install] index in rocforge.toml or ~/.config/rocforge/config.toml, \
the index is the project's newest published release: \
https://github.com/rocforge/rocforge/releases/latest/download/index.json

Examples:
  rocforge install rocsparse --arch gfx90c --prefix ~/rocm
  rocforge install rocsparse --arch gfx90c --from ./dist --prefix ~/rocm
  rocforge install rocsparse --arch gfx90c --prefix ~/rocm --dry-run")]
    Install(artifact_cmd::InstallArgs),
    /// Remove installed components: exactly the files their receipts list
    Uninstall(artifact_cmd::UninstallArgs),
    /// The local GPUs from the KFD topology: target, compute units, memory, xnack, nearest target
    #[command(after_help = "\
Reads /sys/class/kfd/kfd/topology (or DIR/sys/... with --sysfs-root DIR, a recorded tree), the \
amdgpu noretry parameter and HSA_XNACK. Exits 1 when no GPU node is found, saying why that may be.

Examples:
  rocforge detect
  rocforge detect --format json
  rocforge detect --sysfs-root ./recorded-machine")]
    Detect(test_cmd::DetectArgs),
    /// Run a built component's test client on the local GPU, sharded and hang-proof
    #[command(after_help = "\
Installs the component and its dependencies from the store into a scratch prefix (a build for the \
target alone, else the newest build whose targets include it, e.g. the release's gfx90c,gfx902 \
build for --arch gfx90c) and runs the recipe's [test] client with LD_LIBRARY_PATH and ROCM_PATH set, one shard after another. Every \
finished test is journaled at once; a test that makes no progress for the timeout is killed, \
recorded as hung, and the shard restarts without it. Writes OUT/results.json and OUT/junit.xml.

--dry-run makes the same choices and checks and prints the plan instead: the artifact tested (its \
key, and the store build or index it comes from), its dependencies, the GPU (or the spoof and its \
HSA_OVERRIDE_GFX_VERSION), the results directory and scratch prefix, the client with its \
arguments, timeout and environment, and each shard (gtest's sharding variables, or the programs \
it runs); --format json prints it as rocforge.test-plan/1. Nothing is installed, run or written.

--all --from INDEX is a volunteer's whole run: the GPU detected (or --arch), every component of the \
index that carries a test client for it (a COMPONENT-tests artifact, or a component such as \
rocm-examples whose own tree holds its programs) installed with its dependencies and run in turn, \
into one bundle: OUT/<component>/results.json per component and OUT/summary.json, each signed \
with --sign-key. A component that fails to install or run is recorded and the next one runs. \
The end says how each went and the command that submits the bundle; `rocforge report OUT` reads it.

Examples:
  rocforge test --all --from https://example.org/rocm/gfx90c/index.json
  rocforge test rocsparse --arch gfx90c
  rocforge test rocsparse --arch gfx900 --spoof   # the gfx900 build, spoofed
  rocforge test rocsparse --arch gfx90c --resume  # go on after Ctrl-C
  rocforge test rocsparse --arch gfx90c --dry-run # the plan, nothing run")]
    Test(test_cmd::TestArgs),
    /// One HTML page and a markdown summary from results bundles of any number of machines
    #[command(after_help = "\
Results pulled from oci://REGISTRY/REPO come from anyone who can push there, so each must carry a \
minisign signature (`rocforge test … --submit oci://… --key SECRET`) by a trusted key: the \
built-in keys, config [trust] keys, or --key. A bad signature or an untrusted key is refused \
(named, and left out); an unsigned artifact is left out unless --allow-unsigned. Local \
results.json files are your own and are read as they are.

Examples:
  rocforge report rocforge-results/*/results.json --out report/
  rocforge report rocforge-results/all-gfx90c --out report/  # of test --all
  rocforge report oci://ghcr.io/me/rocforge-results --key RWQ… \\
      --out report/")]
    Report(test_cmd::ReportArgs),
    /// The GPU code in built files: offload bundles, code objects, target IDs, Tensile files
    #[command(after_help = "\
PATH is a shared library, executable, object, static archive, code object or bundle, or a \
directory (an install prefix), read recursively. With --against, prints a library x target \
table (present, only the nearest target's code so a spoof is needed, MISSING) and exits 1 when \
anything is missing or a file could not be read.

Examples:
  rocforge inspect /opt/rocforge/lib/librocsparse.so
  rocforge inspect --against gfx90c,gfx902 /opt/rocforge
  rocforge inspect --format json build/libfoo.so")]
    Inspect(inspect_cmd::InspectArgs),
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
Writes OUT (keys.json: sequence, issue date, the keys to trust and to revoke, and a sha256 link \
to the list before it) and OUT.minisig, signed by the old key, plus the numbered copy \
keys-<N>.json(.minisig); an existing OUT becomes keys-<N-1>.json. Publish all of them beside \
index.json: installers that trust the old key follow the chain to the new one. Schema and rules: \
docs/security.md. The old key's password comes from ROCFORGE_KEY_PASSWORD.

Examples:
  rocforge key generate --out new-keys
  rocforge key rotate --old ~/.config/rocforge/keys/rocforge.key \\
      --new new-keys/rocforge.pub --revoke-old --out dist/keys.json")]
    Rotate(artifact_cmd::KeyRotateArgs),
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
    /// Build one of the release line's images locally: builder (default), runtime or devel
    #[command(after_help = "\
builder: the image components are built in (containers/Containerfile.<release>, release.toml's \
image), recorded in the store: builds key it by its image ID. runtime: what the line's libraries \
need at run time and no compiler (containers/Containerfile.runtime-<release>, named \
localhost/rocforge/runtime:<release>): for debian-6.4, Debian sid with Debian's HIP 6.4 runtime, \
ROCr, comgr and device libraries, every package pinned. devel: runtime plus hipcc, headers and \
CMake packages (Containerfile.devel-<release>, localhost/rocforge/devel:<release>; the runtime \
image is built first when absent). podman builds with --timestamp 0: the same packages give the \
same image ID.

Examples:
  rocforge image build --release debian-6.4
  rocforge image build --release debian-6.4 --kind runtime
  rocforge image build --release debian-6.4 --kind devel")]
    Build(image_cmd::ImageBuildArgs),
    /// An image to run the stack in: a base image plus one layer with the built components installed
    #[command(after_help = "\
`image build` makes the builder image rocforge builds in; `image create` makes an image for \
users: the base image plus one layer holding the components and their dependencies from the \
store under the release prefix (/opt/rocm), with ROCM_PATH, PATH and LD_LIBRARY_PATH set and \
org.opencontainers.image.* and rocforge.* labels. Reproducible: the same store entries on the same \
base give the same digest (created and file times: SOURCE_DATE_EPOCH, else the store entries', \
else 1970). Loopback registries are spoken to over HTTP; ROCFORGE_REGISTRY_USER/PASSWORD for \
credentials.

The base: --base REGISTRY/NAME:TAG (pulled; linux/amd64 from a multi-platform index); --base \
containers-storage:NAME or a plain --base localhost/NAME:TAG (read from podman's local storage \
with podman save); --base docker-daemon:NAME (docker save); or --kind runtime|devel, the release \
line's own base (localhost/rocforge/<kind>:<release>, built when absent), with the default tag \
localhost/rocforge/rocm:<release>-<kind>-<targets>.

Refused before anything is pushed: a stack that links libamdhip64.so.6 without shipping it, on a \
base that has no HIP runtime (its org.rocforge.hip-runtime label or the library in its layers); \
a --tag the registry already has for another image (unless --force); a registry that redirects \
to another host.

Examples:
  rocforge --release debian-6.4 image create rocrand --arch gfx90c,gfx902 \\
      --kind runtime --load podman
  rocforge --release debian-6.4 image create rocrand --arch gfx90c \\
      --kind devel --push \\
      --tag 127.0.0.1:5000/rocforge/rocm:debian-6.4-devel-gfx90c
  rocforge image create rocm-math --arch gfx90c \\
      --base docker.io/library/ubuntu:24.04 \\
      --tag ghcr.io/me/rocm-gfx90c:6.4.4 --push
  rocforge image create rocsparse --arch gfx90c \\
      --base containers-storage:localhost/base:1 \\
      --tag localhost/rocsparse:gfx90c --load podman")]
    Create(image_cmd::CreateArgs),
}

#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// Every entry: key, component, version, targets, runtime, disk (the total on stderr)
    List,
    /// The install tree of each component's build for --arch; exit 1 when one is not built
    /// yet (nothing is built: for `$(rocforge store path C)` in scripts)
    Path {
        /// Components (or bundles) of the release line
        #[arg(required = true)]
        components: Vec<String>,
        #[command(flatten)]
        runtime: RuntimeArg,
    },
    /// One entry in full (a key prefix of 8 or more characters is enough)
    Show {
        /// The entry's content key, or a prefix of 8 or more characters
        key: String,
    },
    /// Remove entries: by content key (a prefix of 8 or more characters) or every build of a
    /// component (those for --arch when given); one a build is using is refused
    Rm {
        /// Content keys, key prefixes or component names (`rocforge store list`)
        #[arg(required = true, value_name = "KEY|COMPONENT")]
        entries: Vec<String>,
        /// Only list what would be removed
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove entries superseded by a newer build of the same component and targets
    Gc {
        /// Only list what would be removed
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PatchCommand {
    /// Write the commits of a `rocforge dev` checkout back into patches/<release>/<component>/
    Export(sources::PatchExportArgs),
}

#[derive(Subcommand, Debug)]
pub enum CiCommand {
    /// Write .github/workflows/release.yml (and .github/actionlint.yaml) from the catalog and runners.toml
    #[command(after_help = "\
One plan job (`rocforge plan --format github-matrix`, one output per dependency level), a \
builder-image job, one build job per dependency level (a level with nothing to build is skipped, \
the later ones still run), test jobs on the GPU runners runners.toml lists as registered, a \
report and a publish job. See docs/ci.md.

Examples:
  rocforge ci github          # after changing recipes or runners.toml
  rocforge ci github --check  # in CI: exit 1 with a diff if the files differ")]
    Github(ci_cmd::CiGithubArgs),
    /// Which self-hosted runner labels of runners.toml have a runner: from the GitHub API when a token is set
    #[command(after_help = "\
Without a token, runners.toml's `registered` decides. With ROCFORGE_RUNNERS_TOKEN (or \
GITHUB_TOKEN) set and --repo or --org given, the GitHub API lists the runners: a label is ready \
when a runner carrying self-hosted, linux and the label is online. The token needs \
\"Administration: read\" on the repository (\"Self-hosted runners: read\" on an organization); \
the workflow's own GITHUB_TOKEN does not have it. ROCFORGE_GITHUB_API overrides \
https://api.github.com. `gpu_ready` in the JSON is what the release workflow's plan job uses.

Examples:
  rocforge ci runners                                  runners.toml only
  ROCFORGE_RUNNERS_TOKEN=… rocforge ci runners --repo me/rocforge
  rocforge ci runners --repo me/rocforge --format json \\
      | jq -r '.gpu_ready | join(\",\")'")]
    Runners(ci_cmd::CiRunnersArgs),
}

#[derive(Subcommand, Debug)]
pub enum NixCommand {
    /// Write an overlay for nixpkgs' rocmPackages: gpuTargets, our patch series, a nixpkgs pin
    #[command(after_help = "\
Writes DIR/overlay.nix, DIR/patches/<component>/*.patch, DIR/default.nix and DIR/nixpkgs.json. \
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

pub(crate) type Result<T> = std::result::Result<T, CliError>;

pub(crate) fn root(g: &Global) -> CatalogRoot {
    match &g.recipes {
        Some(dir) => CatalogRoot::Dir(dir.clone()),
        None => CatalogRoot::Embedded,
    }
}

/// The library's view of the global flags.
/// `--key` once named the secret key that signs (package, index, sign, test); everywhere else
/// it is a public key to trust. The old spelling still works, and says what to write instead.
pub(crate) fn warn_old_key_flag() {
    if std::env::args().any(|a| a == "--key" || a.starts_with("--key=")) {
        eprintln!(
            "warning: --key FILE (the secret key that signs) is now --sign-key FILE; --key names a public key to trust"
        );
    }
}

pub(crate) fn options(g: &Global) -> Options {
    Options {
        root: root(g),
        release: g.release.clone(),
        store: g.store.clone(),
        arch: g.arch.clone(),
        locked: g.locked,
    }
}

/// Progress on stderr, unless --quiet; with the build log's lines too under -v.
pub(crate) fn reporter(g: &Global) -> Arc<dyn Reporter> {
    Arc::new(progress::TermReporter::new(g))
}

pub(crate) fn session(g: &Global) -> Result<Session> {
    session_with(g, reporter(g))
}

pub(crate) fn session_with(g: &Global, reporter: Arc<dyn Reporter>) -> Result<Session> {
    Session::open(options(g), reporter)
}

/// A `--format json` document: pretty, every object's keys sorted, except that the top
/// level's `schema` comes first, so a reader sees what it holds before reading it. Every JSON
/// output of the command line is written here, which is what keeps them one shape.
pub(crate) fn print_json(report: &impl serde::Serialize) {
    println!("{}", json_text(report));
}

pub(crate) fn json_text(report: &impl serde::Serialize) -> String {
    #[derive(serde::Serialize)]
    struct SchemaFirst<'a> {
        schema: &'a serde_json::Value,
        #[serde(flatten)]
        rest: std::collections::BTreeMap<&'a str, &'a serde_json::Value>,
    }
    let value = serde_json::to_value(report).unwrap_or_default();
    let text = match value.as_object().and_then(|o| Some((o.get("schema")?, o))) {
        Some((schema, object)) => serde_json::to_string_pretty(&SchemaFirst {
            schema,
            rest: object
                .iter()
                .filter(|(k, _)| *k != "schema")
                .map(|(k, v)| (k.as_str(), v))
                .collect(),
        }),
        None => serde_json::to_string_pretty(&value),
    };
    text.unwrap_or_default()
}

pub(crate) fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

const TEXT: &[Format] = &[Format::Text];
const TEXT_JSON: &[Format] = &[Format::Text, Format::Json];

/// The formats each command writes, by its name as typed. Any other `--format` is refused
/// before the command runs (exit 2, as for any flag value the command line cannot have), so a
/// program asking for JSON never gets text. A test checks that this names every command clap
/// defines, and that each one it says writes JSON does.
pub(crate) const FORMATS: &[(&str, &[Format])] = &[
    ("list", TEXT_JSON),
    ("check", TEXT_JSON),
    ("plan", &[Format::Text, Format::Json, Format::GithubMatrix]),
    ("fetch", TEXT_JSON),
    ("lock", TEXT_JSON),
    ("dev", TEXT),
    ("build", TEXT_JSON),
    ("image build", TEXT),
    ("image create", TEXT_JSON),
    ("doctor", TEXT_JSON),
    ("store list", TEXT_JSON),
    ("store show", TEXT_JSON),
    ("store path", TEXT),
    ("store rm", TEXT),
    ("store gc", TEXT),
    ("patch export", TEXT),
    ("gc", TEXT),
    ("arch list", TEXT_JSON),
    ("arch show", TEXT_JSON),
    ("catalog export", TEXT),
    ("ci github", TEXT),
    ("ci runners", TEXT_JSON),
    ("nix export", TEXT_JSON),
    ("completions", TEXT),
    ("man", TEXT),
    ("schema", TEXT_JSON),
    ("publish", TEXT_JSON),
    ("package", TEXT_JSON),
    ("index", TEXT),
    ("key generate", TEXT),
    ("key rotate", TEXT),
    ("sign", TEXT),
    ("verify", TEXT_JSON),
    ("install", TEXT_JSON),
    ("uninstall", TEXT_JSON),
    ("detect", TEXT_JSON),
    ("test", TEXT_JSON),
    ("report", TEXT),
    ("inspect", TEXT_JSON),
];

/// The formats `command` (e.g. `store gc`) writes; text alone for one the table lacks.
pub(crate) fn formats(command: &str) -> &'static [Format] {
    FORMATS
        .iter()
        .find(|(name, _)| *name == command)
        .map_or(TEXT, |(_, f)| f)
}

fn format_name(f: Format) -> String {
    f.to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

/// The subcommand names of a parsed command line, e.g. `["store", "gc"]`.
pub(crate) fn command_path(m: &clap::ArgMatches) -> Vec<&str> {
    let mut path = Vec::new();
    let mut m = m;
    while let Some((name, sub)) = m.subcommand() {
        path.push(name);
        m = sub;
    }
    path
}

/// Refuses a `--format` the command does not write, with the command's own usage line.
fn check_format(
    cmd: &mut clap::Command,
    m: &clap::ArgMatches,
    format: Format,
) -> std::result::Result<(), clap::Error> {
    let path = command_path(m);
    let mut name = path.join(" ");
    let mut supported = formats(&name);
    // `plan --explain` prints one hash input: there is no matrix of it.
    let explain = path == ["plan"]
        && m.subcommand_matches("plan")
            .is_some_and(|p| p.get_one::<String>("explain").is_some());
    if explain {
        name += " --explain";
        supported = TEXT_JSON;
    }
    if supported.contains(&format) {
        return Ok(());
    }
    let list: Vec<String> = supported.iter().map(|f| format_name(*f)).collect();
    let message = format!(
        "--format {} is not available for `rocforge {name}` (its formats: {})",
        format_name(format),
        list.join(", ")
    );
    let sub = path.iter().fold(cmd, |c, p| {
        // The path came from these matches: every name on it is a subcommand.
        c.find_subcommand_mut(p).expect("a parsed subcommand")
    });
    Err(sub.error(clap::error::ErrorKind::ArgumentConflict, message))
}

/// Parses the command line, exiting as clap does on a usage error (status 2) or for --help.
pub fn parse() -> Args {
    parse_from(std::env::args_os().collect()).unwrap_or_else(|e| e.exit())
}

/// clap's parse, with `--color` applied to clap's own output and `--format` checked against
/// the command.
pub(crate) fn parse_from(argv: Vec<std::ffi::OsString>) -> std::result::Result<Args, clap::Error> {
    let mut cmd = Args::command().color(term::Color::from_args(&argv).clap());
    let matches = cmd.try_get_matches_from_mut(&argv)?;
    let args = Args::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))?;
    check_format(&mut cmd, &matches, args.global.format)?;
    check_runtime(&mut cmd, &matches)?;
    Ok(args)
}

/// Commands that take `--runtime` but cannot use a value of it, and why.
const RUNTIME_REFUSED: &[(&str, Runtime, &str)] = &[(
    "image build",
    Runtime::Host,
    "an image is built by podman or docker",
)];

fn check_runtime(
    cmd: &mut clap::Command,
    m: &clap::ArgMatches,
) -> std::result::Result<(), clap::Error> {
    let path = command_path(m);
    let name = path.join(" ");
    let leaf = path
        .iter()
        .try_fold(m, |m, p| m.subcommand_matches(p))
        .expect("a parsed subcommand");
    let Ok(Some(runtime)) = leaf.try_get_one::<Runtime>("runtime") else {
        return Ok(());
    };
    for (command, refused, why) in RUNTIME_REFUSED {
        if *command == name && refused == runtime {
            let value = runtime
                .to_possible_value()
                .map(|v| v.get_name().to_string())
                .unwrap_or_default();
            let sub = path.iter().fold(cmd, |c, p| {
                c.find_subcommand_mut(p).expect("a parsed subcommand")
            });
            return Err(sub.error(
                clap::error::ErrorKind::InvalidValue,
                format!("--runtime {value} is not available for `rocforge {name}`: {why}"),
            ));
        }
    }
    Ok(())
}

pub fn run(args: Args) -> Result<ExitCode> {
    let g = &args.global;
    match &args.command {
        Command::List(a) if a.installed => artifact_cmd::list_installed(g, a.prefix.as_deref()),
        Command::List(_) => catalog_cmds::list(g),
        Command::Package(a) => artifact_cmd::package(g, a),
        Command::Index(a) => {
            artifact_cmd::index_cmd(g, &a.dir, a.key.as_deref(), a.expires_days, a.renew)
        }
        Command::Publish(a) => publish_cmd::publish_cmd(g, a),
        Command::Key(KeyCommand::Generate { out }) => artifact_cmd::key_generate(g, out.as_deref()),
        Command::Key(KeyCommand::Rotate(a)) => artifact_cmd::key_rotate(g, a),
        Command::Sign(a) => artifact_cmd::sign_cmd(g, &a.files, a.key.as_deref()),
        Command::Verify(a) => artifact_cmd::verify_cmd(g, a),
        Command::Install(a) => artifact_cmd::install_cmd(g, a),
        Command::Uninstall(a) => artifact_cmd::uninstall_cmd(g, &a.names, a.prefix.as_deref()),
        Command::Check(a) => check_cmd::check(g, a),
        Command::Plan(a) => plan_cmd::plan_cmd(g, a),
        Command::Fetch(a) => sources::fetch(g, a),
        Command::Lock(a) => lock_cmd::lock(g, a),
        Command::Dev(a) => sources::dev(g, a),
        Command::Patch(PatchCommand::Export(a)) => sources::patch_export(g, a),
        Command::Gc(a) => sources::gc(g, a.dry_run),
        Command::Build(a) => build_cmd::build(g, a),
        Command::Image(ImageCommand::Build(a)) => image_cmd::build(g, a),
        Command::Image(ImageCommand::Create(a)) => image_cmd::create(g, a),
        Command::Doctor(a) => doctor_cmd::doctor(g, a),
        Command::Store(StoreCommand::List) => store_cmd::store_list(g),
        Command::Store(StoreCommand::Path {
            components,
            runtime,
        }) => store_cmd::store_path(g, components, runtime),
        Command::Store(StoreCommand::Show { key }) => store_cmd::store_show(g, key),
        Command::Store(StoreCommand::Gc { dry_run }) => store_cmd::store_gc(g, *dry_run),
        Command::Store(StoreCommand::Rm { entries, dry_run }) => {
            store_cmd::store_rm(g, entries, *dry_run)
        }
        Command::Arch(ArchCommand::List) => arch_cmd::arch_list(g),
        Command::Arch(ArchCommand::Show { target }) => arch_cmd::arch_show(g, target),
        Command::Detect(a) => test_cmd::detect(g, a.sysfs_root.as_deref()),
        Command::Test(a) => test_cmd::test(g, a),
        Command::Report(a) => test_cmd::report(g, a),
        Command::Inspect(a) => inspect_cmd::inspect_cmd(g, a),
        Command::Ci(CiCommand::Github(a)) => ci_cmd::github(g, &a.dir, a.check),
        Command::Ci(CiCommand::Runners(a)) => ci_cmd::runners(g, a),
        Command::Nix(NixCommand::Export { out }) => ci_cmd::nix_export(g, out),
        Command::Completions(a) => docs_cmd::completions(a),
        Command::Man(a) => docs_cmd::man(a),
        Command::Schema(a) => docs_cmd::schema(g, a),
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
