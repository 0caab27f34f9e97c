//! `recipes/<release>/release.toml`: what a release line shares (builder image, prefix, targets).

use crate::diag::Hint;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::arch::{ArchTable, TargetId, check_target_in_file, normalize};
use crate::diag::reader::{self, Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

pub const RELEASE_FILE: &str = "release.toml";

#[derive(Debug, Clone)]
pub struct Release {
    pub name: String,
    pub version: String,
    pub summary: String,
    /// Builder image reference; `rocforge.lock` pins its digest.
    pub image: String,
    /// Where dependencies are mounted and outputs are installed, e.g. /opt/rocm.
    pub prefix: String,
    /// Targets used when `--arch` is not given.
    pub arches: Vec<TargetId>,
    /// A line still being brought up: listed and buildable with `--release`, but never the
    /// default line and not part of the release workflow. `preview = true`, or implied when
    /// `built` records nothing: a line nothing has been built from cannot be the default.
    pub preview: bool,
    /// The components that have been built from this line and recorded (`built = [...]`;
    /// for the shipped catalog, in docs/catalog.md). Checked against the line's components.
    pub built: Vec<Sp<String>>,
    /// The line this one is based on (`base = "rocm-6.4.4"`): its components are the base's,
    /// each with this line's `<component>.toml` overriding where its source comes from.
    pub base: Option<Sp<String>>,
    /// How the builder image's `FROM` is made when no registry can provide it.
    pub image_base: Option<ImageBase>,
    /// Named groups of components (`rocm-math`, `pytorch`), usable wherever a component is.
    pub bundles: BTreeMap<String, Vec<Sp<String>>>,
    /// Where each bundle's name is written, for messages.
    pub bundle_spans: BTreeMap<String, std::ops::Range<usize>>,
    pub file: Arc<SourceFile>,
}

/// A base image made from a distribution's packages alone: `debootstrap` into a directory,
/// imported into the container runtime under `name` (release.toml `[image-base]`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImageBase {
    /// The image reference the Containerfile names in `FROM`, e.g. localhost/rocforge/debootstrap:sid.
    pub name: String,
    /// The Debian suite, e.g. "sid".
    pub suite: String,
    pub variant: String,
    /// The mirror; None: the one this host's apt uses.
    pub mirror: Option<String>,
}

pub fn parse(
    file: &Arc<SourceFile>,
    dir_name: &str,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<Release> {
    let before = d.len();
    let doc = reader::parse(file, d)?;
    let mut r = TableReader::new(file, &doc, "");
    let name = r.str("name", d, &format!("add name = \"{dir_name}\""));
    let version = r.str(
        "version",
        d,
        "add the ROCm version of this line, e.g. version = \"6.4.4\"",
    );
    let summary = r.opt_str("summary", d);
    let image = r.str(
        "image",
        d,
        "add the builder image, e.g. image = \"ghcr.io/rocforge/builder:rocm-6.4.4\"",
    );
    let prefix = r.str(
        "prefix",
        d,
        "add the install prefix, e.g. prefix = \"/opt/rocm\"",
    );
    let default_arches = r.opt_str_list("arches", d).unwrap_or_default();
    let (preview, built) = read_preview(&mut r, dir_name, d);
    let base = read_base(&mut r, dir_name, d);
    let image_base = r
        .opt_table("image-base", d)
        .and_then(|t| read_image_base(t, d));
    let (bundles, bundle_spans) = read_bundles(&mut r, d);
    r.finish(d);

    if let Some(n) = &name {
        check_name(file, n, dir_name, d);
    }
    if let Some(p) = &prefix {
        check_prefix(file, p, d);
    }
    if let Some(i) = &image {
        check_image(file, i, d);
    }
    let targets = read_targets(file, &default_arches, arches, d);
    d.sort_from(before);
    if d.len() > before {
        return None;
    }
    Some(Release {
        name: name?.value,
        version: version?.value,
        summary: summary.map(|s| s.value).unwrap_or_default(),
        image: image?.value,
        prefix: prefix?.value,
        arches: targets,
        preview,
        built,
        base,
        image_base,
        bundles,
        bundle_spans,
        file: file.clone(),
    })
}

/// `preview` and `built`: whether the line may be the default, and the record that says so.
fn read_preview(
    r: &mut TableReader<'_, '_>,
    dir_name: &str,
    d: &mut Diagnostics,
) -> (bool, Vec<Sp<String>>) {
    let explicit_preview = r.opt_bool("preview", d);
    let built = r.opt_str_list("built", d).unwrap_or_default();
    // The policy: the default line is one that has been built. A line that says it is no
    // preview must say what was built from it, so the claim can be checked against the record.
    if let Some(p) = &explicit_preview
        && !p.value
        && built.is_empty()
    {
        d.push(
            Diagnostic::new(format!(
                "release line \"{dir_name}\" is no preview but records nothing built from it"
            ))
            .at(r.file(), p.span.clone(), "preview = false")
            .hint("list what has been built from the line and recorded, e.g. built = [\"rocprim\", \"rocrand\"], or remove preview = false: a line nothing has been built from is a preview"),
        );
    }
    let preview = explicit_preview.map_or(built.is_empty(), |p| p.value);
    (preview, built)
}

fn read_base(
    r: &mut TableReader<'_, '_>,
    dir_name: &str,
    d: &mut Diagnostics,
) -> Option<Sp<String>> {
    let base = r.opt_str("base", d);
    if let Some(b) = &base
        && b.value == dir_name
    {
        d.push(
            Diagnostic::new(format!(
                "release line \"{dir_name}\" names itself as its base"
            ))
            .at(r.file(), b.span.clone(), "its own name")
            .hint("base names another release line of this catalog, e.g. base = \"rocm-6.4.4\""),
        );
    }
    base
}

/// `[image-base]`: the debootstrap arguments and the name of the image they make.
fn read_image_base(mut t: TableReader<'_, '_>, d: &mut Diagnostics) -> Option<ImageBase> {
    let file = t.file();
    let before = d.len();
    let name = t.str(
        "name",
        d,
        "name the image the Containerfile's FROM uses, e.g. name = \"localhost/rocforge/debootstrap:sid\"",
    );
    let suite = t.str(
        "debootstrap",
        d,
        "give the Debian suite, e.g. debootstrap = \"sid\"",
    );
    let variant = t.opt_str("variant", d);
    let mirror = t.opt_str("mirror", d);
    t.finish(d);
    for s in [&suite, &variant].into_iter().flatten() {
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            d.push(
                Diagnostic::new(format!("malformed debootstrap argument \"{}\"", s.value))
                    .at(file, s.span.clone(), "letters, digits and '-' only")
                    .hint("e.g. debootstrap = \"sid\", variant = \"minbase\""),
            );
        }
    }
    if let Some(m) = &mirror
        && !(m.starts_with("http://") || m.starts_with("https://"))
    {
        d.push(
            Diagnostic::new(format!("malformed mirror \"{}\"", m.value))
                .at(file, m.span.clone(), "not an http(s) URL")
                .hint("e.g. mirror = \"http://deb.debian.org/debian\""),
        );
    }
    if let Some(n) = &name
        && (n.is_empty()
            || n.chars()
                .any(|c| c.is_whitespace() || c.is_ascii_uppercase()))
    {
        d.push(
            Diagnostic::new(format!("malformed image reference \"{}\"", n.value))
                .at(
                    file,
                    n.span.clone(),
                    "expected registry/name:tag in lowercase",
                )
                .hint("e.g. name = \"localhost/rocforge/debootstrap:sid\""),
        );
    }
    if d.len() > before {
        return None;
    }
    Some(ImageBase {
        name: name?.value,
        suite: suite?.value,
        variant: variant.map_or_else(|| "minbase".into(), |v| v.value),
        mirror: mirror.map(|m| m.value),
    })
}

type Bundles = BTreeMap<String, Vec<Sp<String>>>;
type BundleSpans = BTreeMap<String, std::ops::Range<usize>>;

/// `[bundles]`: named lists of components, with where each name is written.
fn read_bundles(r: &mut TableReader<'_, '_>, d: &mut Diagnostics) -> (Bundles, BundleSpans) {
    let file = r.file();
    let mut bundles = BTreeMap::new();
    let mut bundle_spans = BTreeMap::new();
    let Some(mut t) = r.opt_table("bundles", d) else {
        return (bundles, bundle_spans);
    };
    for (k, v) in t.rest() {
        let name = k.get_ref().to_string();
        if !crate::recipe::is_component_name(&name) {
            d.push(
                Diagnostic::new(format!("invalid bundle name \"{name}\""))
                    .at(file, k.span(), "not a plain name")
                    .hint("bundle names use lowercase letters, digits, '-', '_' and '.'"),
            );
            continue;
        }
        if let Some(list) = reader::read_str_list(file, &format!("bundles.{name}"), v, d) {
            bundle_spans.insert(name.clone(), k.span());
            bundles.insert(name, list);
        }
    }
    (bundles, bundle_spans)
}

/// The line is named after its directory.
fn check_name(file: &Arc<SourceFile>, n: &Sp<String>, dir_name: &str, d: &mut Diagnostics) {
    if n.value != dir_name {
        d.push(
            Diagnostic::new(format!(
                "release \"{}\" is described in directory \"{dir_name}\"",
                n.value
            ))
            .at(file, n.span.clone(), "does not match its directory")
            .hint(format!(
                "rename the directory to {} or set name = \"{dir_name}\"",
                n.value
            )),
        );
    }
}

fn check_prefix(file: &Arc<SourceFile>, p: &Sp<String>, d: &mut Diagnostics) {
    if !p.starts_with('/') || p.split('/').any(|c| c == "..") {
        d.push(
            Diagnostic::new(format!("prefix \"{}\" must be an absolute path", p.value))
                .at(file, p.span.clone(), "not absolute")
                .hint("e.g. prefix = \"/opt/rocm\""),
        );
    }
}

fn check_image(file: &Arc<SourceFile>, i: &Sp<String>, d: &mut Diagnostics) {
    if i.is_empty()
        || i.chars()
            .any(|c| c.is_whitespace() || c.is_ascii_uppercase())
    {
        d.push(
            Diagnostic::new(format!("malformed image reference \"{}\"", i.value))
                .at(
                    file,
                    i.span.clone(),
                    "expected registry/name:tag in lowercase",
                )
                .hint("e.g. image = \"ghcr.io/rocforge/builder:rocm-6.4.4\""),
        );
    }
}

/// `arches`: the default targets, one setting per processor.
fn read_targets(
    file: &Arc<SourceFile>,
    default_arches: &[Sp<String>],
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Vec<TargetId> {
    let written: Vec<(TargetId, &Sp<String>)> = default_arches
        .iter()
        .filter_map(|a| check_target_in_file(arches, file, a, "arches", d).map(|t| (t, a)))
        .collect();
    // normalize() would find the same conflicts, but without the entries' positions.
    let mut conflicts = 0;
    for (i, (t, at)) in written.iter().enumerate() {
        if let Some((first, first_at)) = written[..i]
            .iter()
            .find(|(f, _)| f.arch == t.arch && f != t)
        {
            conflicts += 1;
            d.push(
                Diagnostic::new(format!(
                    "targets {first} and {t} name the same processor with different features"
                ))
                .at(
                    file,
                    at.span.clone(),
                    format!("a second setting for {}", t.arch),
                )
                .related(file, first_at.span.clone(), "first setting")
                .hint("a library holds one code object per processor; keep one of these entries"),
            );
        }
    }
    let mut targets: Vec<TargetId> = written.into_iter().map(|(t, _)| t).collect();
    if let Err(e) = normalize(&mut targets)
        && conflicts == 0
    {
        d.push(Diagnostic::new(e.to_string()).in_file(file).hint(e.hint()));
    }
    targets
}
