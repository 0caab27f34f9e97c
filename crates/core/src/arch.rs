//! The GPU target table (`recipes/arches.toml`) and LLVM target IDs such as `gfx90c:xnack-`.

use crate::diag::Hint;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;

use crate::diag::reader::{self, Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};

pub mod output;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MatrixCores {
    None,
    Mfma,
    Wmma,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Arch {
    pub llvm: String,
    pub name: String,
    pub family: String,
    pub generation: String,
    pub kind: String,
    pub wavefront: u32,
    pub xnack: bool,
    pub sramecc: bool,
    pub matrix: MatrixCores,
    /// 0 for a generic target, which no device reports.
    pub kfd_version: u32,
    pub pci_ids: Vec<String>,
    /// The nearest target AMD builds for: the spoof baseline and the source of derived data.
    pub nearest: Option<String>,
    pub rocm_supported: bool,
    /// Names this GPU may enumerate as (e.g. gfx1151 reports gfx1100 under WSL).
    pub aliases: Vec<String>,
    pub notes: Option<String>,
}

impl Arch {
    /// A generic target (gfx9-generic, gfx11-generic, ...): code for a family of processors,
    /// never what a device reports.
    pub fn is_generic(&self) -> bool {
        self.kind == "generic"
    }

    /// The KFD version, or for a generic target the version its name spells (gfx9-4-generic:
    /// 90400), so that generic targets list in hardware order too.
    fn order(&self) -> u32 {
        if !self.is_generic() {
            return self.kfd_version;
        }
        let mut parts = self
            .llvm
            .trim_start_matches("gfx")
            .trim_end_matches("-generic")
            .split('-')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let major = parts.next().unwrap_or(0);
        let minor = parts.next().unwrap_or(0);
        major * 10000 + minor * 100
    }

    /// `gfx_target_version` split as KFD encodes it: major*10000 + minor*100 + stepping.
    pub fn kfd_triple(&self) -> (u32, u32, u32) {
        (
            self.kfd_version / 10000,
            (self.kfd_version / 100) % 100,
            self.kfd_version % 100,
        )
    }

    /// The `HSA_OVERRIDE_GFX_VERSION` value that makes the runtime treat a GPU as this target.
    pub fn hsa_override(&self) -> String {
        let (a, b, c) = self.kfd_triple();
        format!("{a}.{b}.{c}")
    }
}

#[derive(Debug, Clone, Default)]
pub struct ArchTable {
    arches: BTreeMap<String, Arch>,
    /// Targets present in the file but refused (reported there), and whether the file could
    /// not be read at all: references to them must not be reported again as unknown targets.
    refused: BTreeSet<String>,
    unreadable: bool,
}

pub const ARCHES_FILE: &str = "arches.toml";

impl ArchTable {
    pub fn parse(file: &Arc<SourceFile>, diags: &mut Diagnostics) -> ArchTable {
        let mut table = ArchTable::default();
        let before = diags.len();
        let Some(doc) = reader::parse(file, diags) else {
            table.unreadable = true;
            return table;
        };
        for (key, value) in doc.get_ref().iter() {
            let llvm = key.get_ref().to_string();
            let toml::de::DeValue::Table(t) = value.get_ref() else {
                diags.push(
                    Diagnostic::new(format!("\"{llvm}\" in the target table is not a table"))
                        .at(file, key.span(), "expected [gfxNNN]")
                        .hint("each target is a table: [gfx90c] followed by its fields"),
                );
                continue;
            };
            if !is_arch_name(&llvm) {
                diags.push(
                    Diagnostic::new(format!("\"{llvm}\" is not an LLVM AMDGPU processor name"))
                        .at(file, key.span(), "expected gfx followed by hex digits")
                        .hint("names look like gfx90c, gfx1151 or gfx11-generic"),
                );
                continue;
            }
            let mut r = TableReader::with_span(file, t, value.span(), llvm.clone());
            match read_arch(&llvm, &mut r, diags) {
                Some(arch) => {
                    table.arches.insert(llvm, arch);
                }
                None => {
                    table.refused.insert(llvm);
                }
            }
            r.finish(diags);
        }
        table.check_references(file, &doc, diags);
        diags.sort_from(before);
        table
    }

    /// True when a name missing from the table was already reported in arches.toml itself.
    pub fn already_reported(&self, llvm: &str) -> bool {
        self.unreadable || self.refused.contains(llvm)
    }

    fn check_references(
        &self,
        file: &Arc<SourceFile>,
        doc: &toml::Spanned<toml::de::DeTable<'_>>,
        diags: &mut Diagnostics,
    ) {
        for arch in self.arches.values() {
            if let Some(nearest) = &arch.nearest
                && !self.arches.contains_key(nearest)
            {
                let span = doc
                    .get_ref()
                    .get(arch.llvm.as_str())
                    .and_then(|t| t.get_ref().get("nearest"))
                    .map(|v| v.span())
                    .unwrap_or(0..0);
                diags.push(
                    Diagnostic::new(format!(
                        "target {} names an unknown nearest target \"{nearest}\"",
                        arch.llvm
                    ))
                    .at(file, span, "not in this table")
                    .maybe_hint(did_you_mean(nearest, self.names())),
                );
            }
        }
    }

    pub fn get(&self, llvm: &str) -> Option<&Arch> {
        self.arches.get(llvm)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.arches.keys().map(String::as_str)
    }

    /// Targets in hardware order (by KFD version), so gfx900 comes before gfx1010; the
    /// generic targets, which no device reports, come last.
    pub fn iter(&self) -> impl Iterator<Item = &Arch> {
        let mut v: Vec<&Arch> = self.arches.values().collect();
        v.sort_by_key(|a| (a.is_generic(), a.order(), a.llvm.clone()));
        v.into_iter()
    }

    /// The processor a device reporting this KFD `gfx_target_version` is.
    pub fn by_kfd_version(&self, version: u32) -> Option<&Arch> {
        (version != 0)
            .then(|| self.iter().find(|a| a.kfd_version == version))
            .flatten()
    }

    pub fn len(&self) -> usize {
        self.arches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.arches.is_empty()
    }

    /// Validates a target ID against the table (known processor, features it supports).
    pub fn resolve(&self, id: &str) -> Result<TargetId, TargetError> {
        // LLVM spells target IDs in lower case only; the fix is exact, so say it rather than
        // reporting a malformed ID.
        if id.chars().any(|c| c.is_ascii_uppercase()) {
            let lower = id.to_ascii_lowercase();
            if self.resolve(&lower).is_ok() {
                return Err(TargetError::UpperCase {
                    id: id.to_string(),
                    lower,
                });
            }
        }
        let target: TargetId = id.parse()?;
        let Some(arch) = self.arches.get(&target.arch) else {
            let hint = did_you_mean(&target.arch, self.names());
            return Err(TargetError::UnknownArch {
                arch: target.arch,
                hint,
            });
        };
        if target.xnack.is_some() && !arch.xnack {
            return Err(TargetError::Unsupported {
                arch: target.arch.clone(),
                feature: "xnack",
            });
        }
        if target.sramecc.is_some() && !arch.sramecc {
            return Err(TargetError::Unsupported {
                arch: target.arch.clone(),
                feature: "sramecc",
            });
        }
        Ok(target)
    }

    /// Parses a comma list of target IDs (`gfx90c,gfx902:xnack-`), sorted and deduplicated so
    /// that the order a user types does not change what is built.
    pub fn resolve_list(&self, list: &str) -> Result<Vec<TargetId>, TargetError> {
        // `--arch gfx90c, gfx902`: the shell ends the value at the space, leaving "gfx90c,".
        if let Some(head) = list.trim_end().strip_suffix(',')
            && !head.trim().is_empty()
            && !head.split(',').any(|p| p.trim().is_empty())
        {
            return Err(TargetError::TrailingComma {
                list: list.to_string(),
                head: head.trim().to_string(),
            });
        }
        let mut out = Vec::new();
        for part in list.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(TargetError::Malformed {
                    id: list.to_string(),
                    why: "empty entry in the list".into(),
                });
            }
            out.push(self.resolve(part)?);
        }
        normalize(&mut out)?;
        Ok(out)
    }

    pub fn from_arches(arches: impl IntoIterator<Item = Arch>) -> Self {
        Self {
            arches: arches.into_iter().map(|a| (a.llvm.clone(), a)).collect(),
            ..Self::default()
        }
    }
}

/// Sorts and dedups; two different feature settings of one processor in one build are refused
/// because a library's code object for a processor can only be one of them.
pub fn normalize(targets: &mut Vec<TargetId>) -> Result<(), TargetError> {
    targets.sort();
    targets.dedup();
    for w in targets.windows(2) {
        if w[0].arch == w[1].arch {
            return Err(TargetError::Conflict {
                a: w[0].to_string(),
                b: w[1].to_string(),
            });
        }
    }
    Ok(())
}

fn read_arch(llvm: &str, r: &mut TableReader<'_, '_>, d: &mut Diagnostics) -> Option<Arch> {
    let name = r.str(
        "name",
        d,
        "name the GPUs, e.g. name = \"Radeon Vega (Renoir)\"",
    );
    let family = r.str("family", d, "e.g. family = \"gfx9\"");
    let generation = r.str("generation", d, "e.g. generation = \"GCN 5 (Vega)\"");
    let kind = r.str("kind", d, "one of igpu, dgpu, datacenter, generic");
    let wavefront = r.opt_int("wavefront", d);
    let xnack = r.opt_bool("xnack", d);
    let sramecc = r.opt_bool("sramecc", d);
    let matrix = r.opt_str("matrix", d);
    let kfd = r.opt_int("kfd-version", d);
    let pci = r.opt_str_list("pci-ids", d).unwrap_or_default();
    let nearest = r.opt_str("nearest", d);
    let supported = r.opt_bool("rocm-supported", d);
    let aliases = r.opt_str_list("aliases", d).unwrap_or_default();
    let notes = r.opt_str("notes", d);

    let file = r.file().clone();
    // The name decides what the entry is; a kind that disagrees is reported once, here.
    let generic = llvm.ends_with("-generic");
    check_kind(llvm, kind.as_ref(), generic, &file, d);
    let matrix = matrix_cores(llvm, matrix.as_ref(), &file, d);
    check_pci_ids(llvm, &pci, &file, d);
    check_aliases(llvm, &aliases, &file, d);
    let kfd = kfd_version(llvm, kfd, generic, r, d);
    let wavefront = wavefront_size(llvm, wavefront, r, d);
    Some(Arch {
        llvm: llvm.to_string(),
        name: name?.value,
        family: family?.value,
        generation: generation?.value,
        kind: kind?.value,
        wavefront: wavefront?,
        xnack: xnack.map(|b| b.value).unwrap_or(false),
        sramecc: sramecc.map(|b| b.value).unwrap_or(false),
        matrix,
        kfd_version: kfd?,
        pci_ids: pci.into_iter().map(|s| s.value).collect(),
        nearest: nearest.map(|s| s.value),
        rocm_supported: supported.map(|b| b.value).unwrap_or(false),
        aliases: aliases.into_iter().map(|s| s.value).collect(),
        notes: notes.map(|s| s.value),
    })
}

/// `kind` is one of the four, and `generic` exactly for a gfxN-generic name.
fn check_kind(
    llvm: &str,
    kind: Option<&Sp<String>>,
    generic: bool,
    file: &Arc<SourceFile>,
    d: &mut Diagnostics,
) {
    const KINDS: [&str; 4] = ["igpu", "dgpu", "datacenter", "generic"];
    if let Some(k) = kind
        && !KINDS.contains(&k.as_str())
    {
        d.push(
            Diagnostic::new(format!("unknown kind \"{}\" for {llvm}", k.value))
                .at(
                    file,
                    k.span.clone(),
                    "expected igpu, dgpu, datacenter or generic",
                )
                .maybe_hint(did_you_mean(k, KINDS)),
        );
    }
    if let Some(k) = kind
        && (k.as_str() == "generic") != generic
    {
        d.push(
            Diagnostic::new(format!(
                "kind \"{}\" does not fit the processor name {llvm}",
                k.value
            ))
            .at(
                file,
                k.span.clone(),
                if generic {
                    "a gfxN-generic target is not a device"
                } else {
                    "only gfxN-generic targets are generic"
                },
            )
            .hint("generic targets (gfx9-generic, gfx11-generic, ...) have kind = \"generic\"; processors are igpu, dgpu or datacenter"),
        );
    }
}

/// The `matrix` key; an unknown kind is reported and read as none.
fn matrix_cores(
    llvm: &str,
    matrix: Option<&Sp<String>>,
    file: &Arc<SourceFile>,
    d: &mut Diagnostics,
) -> MatrixCores {
    match matrix.map(|m| m.as_str()) {
        None | Some("none") => MatrixCores::None,
        Some("mfma") => MatrixCores::Mfma,
        Some("wmma") => MatrixCores::Wmma,
        Some(other) => {
            let m = matrix.expect("matched Some");
            d.push(
                Diagnostic::new(format!("unknown matrix core kind \"{other}\" for {llvm}"))
                    .at(file, m.span.clone(), "expected none, mfma or wmma")
                    .hint("matrix = \"none\" | \"mfma\" | \"wmma\""),
            );
            MatrixCores::None
        }
    }
}

/// Each PCI device ID is four lowercase hex digits.
fn check_pci_ids(llvm: &str, pci: &[Sp<String>], file: &Arc<SourceFile>, d: &mut Diagnostics) {
    for id in pci {
        if id.len() != 4
            || !id
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        {
            d.push(
                Diagnostic::new(format!(
                    "malformed PCI device ID \"{}\" for {llvm}",
                    id.value
                ))
                .at(file, id.span.clone(), "expected four lowercase hex digits")
                .hint("write the device ID without vendor or 0x, e.g. \"1636\""),
            );
        }
    }
}

/// Each alias is a processor name.
fn check_aliases(llvm: &str, aliases: &[Sp<String>], file: &Arc<SourceFile>, d: &mut Diagnostics) {
    for alias in aliases {
        if !is_arch_name(alias) {
            d.push(
                Diagnostic::new(format!(
                    "alias \"{}\" of {llvm} is not a processor name",
                    alias.value
                ))
                .at(file, alias.span.clone(), "expected gfxNNN")
                .hint("aliases are the names this GPU may enumerate as, e.g. \"gfx1100\""),
            );
        }
    }
}

/// `kfd-version`: required of a processor, refused for a generic target (0 stands for it).
fn kfd_version(
    llvm: &str,
    kfd: Option<Sp<i64>>,
    generic: bool,
    r: &mut TableReader<'_, '_>,
    d: &mut Diagnostics,
) -> Option<u32> {
    let file = r.file().clone();
    match kfd {
        Some(k) if generic => {
            d.push(
                Diagnostic::new(format!("generic target {llvm} has a kfd-version"))
                    .at(&file, k.span.clone(), "no device reports a generic target")
                    .hint("drop kfd-version; the processors it covers carry their own"),
            );
            None
        }
        None if generic => Some(0),
        Some(k) if (1..1_000_000).contains(&k.value) => Some(k.value as u32),
        Some(k) => {
            d.push(
                Diagnostic::new(format!("kfd-version {} of {llvm} is out of range", k.value))
                    .at(
                        &file,
                        k.span.clone(),
                        "expected major*10000 + minor*100 + stepping",
                    )
                    .hint("e.g. gfx90c (9.0.12) is 90012"),
            );
            None
        }
        None => {
            r.missing(
                d,
                "kfd-version",
                "the KFD gfx_target_version, e.g. kfd-version = 90012",
            );
            None
        }
    }
}

/// `wavefront`: required, 32 or 64.
fn wavefront_size(
    llvm: &str,
    wavefront: Option<Sp<i64>>,
    r: &mut TableReader<'_, '_>,
    d: &mut Diagnostics,
) -> Option<u32> {
    let file = r.file().clone();
    match wavefront {
        Some(w) if w.value == 32 || w.value == 64 => Some(w.value as u32),
        Some(w) => {
            d.push(
                Diagnostic::new(format!("wavefront {} of {llvm} is not 32 or 64", w.value))
                    .at(&file, w.span.clone(), "expected 32 or 64")
                    .hint("gfx9 runs wave64; gfx10 and later default to wave32"),
            );
            None
        }
        None => {
            r.missing(
                d,
                "wavefront",
                "wavefront = 64 for gfx9, 32 for gfx10 and later",
            );
            None
        }
    }
}

/// `gfx90c`, `gfx1151`, or a generic target: `gfx9-generic`, `gfx10-3-generic`.
pub fn is_arch_name(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("gfx") else {
        return false;
    };
    if let Some(version) = rest.strip_suffix("-generic") {
        return !version.is_empty()
            && version.len() <= 5
            && version
                .split('-')
                .all(|p| !p.is_empty() && p.len() <= 2 && p.chars().all(|c| c.is_ascii_digit()));
    }
    !rest.is_empty()
        && rest.len() <= 5
        && rest
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

/// An LLVM AMDGPU target ID: a processor plus optional `sramecc`/`xnack` settings.
/// `None` means "any": code that runs in either mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetId {
    pub arch: String,
    pub sramecc: Option<bool>,
    pub xnack: Option<bool>,
}

impl TargetId {
    pub fn plain(arch: &str) -> Self {
        Self {
            arch: arch.to_string(),
            sramecc: None,
            xnack: None,
        }
    }
}

impl fmt::Display for TargetId {
    /// Features in LLVM's canonical order (sramecc before xnack), as clang prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.arch)?;
        if let Some(on) = self.sramecc {
            write!(f, ":sramecc{}", if on { '+' } else { '-' })?;
        }
        if let Some(on) = self.xnack {
            write!(f, ":xnack{}", if on { '+' } else { '-' })?;
        }
        Ok(())
    }
}

/// Target IDs as `--arch` takes them: a comma list.
pub fn comma_list(targets: &[TargetId]) -> String {
    targets
        .iter()
        .map(TargetId::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl Serialize for TargetId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("malformed target ID \"{id}\": {why}")]
    Malformed { id: String, why: String },
    #[error("the target list \"{list}\" ends in a comma")]
    TrailingComma { list: String, head: String },
    #[error("target ID \"{id}\" is not in lower case")]
    UpperCase { id: String, lower: String },
    #[error("unknown GPU target \"{arch}\"")]
    UnknownArch { arch: String, hint: Option<String> },
    #[error("{arch} does not support the {feature} feature")]
    Unsupported { arch: String, feature: &'static str },
    #[error("targets {a} and {b} name the same processor with different features")]
    Conflict { a: String, b: String },
}

impl crate::diag::Hint for TargetError {
    fn hint(&self) -> String {
        match self {
            TargetError::Malformed { .. } => {
                "a target ID is a processor with optional features, e.g. gfx90c or gfx90c:xnack-"
                    .into()
            }
            TargetError::TrailingComma { head, .. } => format!(
                "a space after the comma ends the value in the shell: write the list without \
                 spaces, `--arch {head},NEXT`, or quote it, `--arch \"{head}, NEXT\"`"
            ),
            TargetError::UpperCase { lower, .. } => {
                format!("target IDs are lower case, as LLVM spells them: write {lower}")
            }
            TargetError::UnknownArch { hint, .. } => hint
                .clone()
                .unwrap_or_else(|| "`rocforge arch list` shows the known targets".into()),
            TargetError::Unsupported { arch, feature } => {
                format!(
                    "drop \":{feature}\u{00b1}\"; `rocforge arch show {arch}` lists what {arch} supports"
                )
            }
            TargetError::Conflict { .. } => {
                "build one feature setting of a processor at a time".into()
            }
        }
    }
}

impl FromStr for TargetId {
    type Err = TargetError;
    fn from_str(id: &str) -> Result<Self, TargetError> {
        let malformed = |why: &str| TargetError::Malformed {
            id: id.to_string(),
            why: why.to_string(),
        };
        let mut parts = id.split(':');
        let arch = parts.next().unwrap_or_default();
        if !is_arch_name(arch) {
            return Err(malformed("the processor must look like gfx90c"));
        }
        let mut target = TargetId::plain(arch);
        for feature in parts {
            let (name, on) = match feature.as_bytes().last() {
                Some(b'+') => (&feature[..feature.len() - 1], true),
                Some(b'-') => (&feature[..feature.len() - 1], false),
                _ => {
                    return Err(malformed(&format!(
                        "feature \"{feature}\" must end in + or -"
                    )));
                }
            };
            let slot = match name {
                "xnack" => &mut target.xnack,
                "sramecc" => &mut target.sramecc,
                _ => {
                    return Err(malformed(&format!(
                        "unknown feature \"{name}\" (known: sramecc, xnack)"
                    )));
                }
            };
            if slot.is_some() {
                return Err(malformed(&format!("feature \"{name}\" given twice")));
            }
            *slot = Some(on);
        }
        Ok(target)
    }
}

/// A target ID written inside a recipe, checked against the table, with its span for messages.
/// `place` names where it was written (`[build.arch-args]`) for the unknown-target message.
pub fn check_target_in_file(
    table: &ArchTable,
    file: &Arc<SourceFile>,
    id: &Sp<String>,
    place: &str,
    d: &mut Diagnostics,
) -> Option<TargetId> {
    match table.resolve(id) {
        Ok(t) => Some(t),
        Err(TargetError::UnknownArch { arch, .. }) if table.already_reported(&arch) => None,
        Err(e) => {
            let label = match &e {
                TargetError::UnknownArch { .. } => "not in recipes/arches.toml",
                TargetError::Unsupported { .. } => "feature not supported by this processor",
                _ => "malformed target ID",
            };
            let message = match &e {
                TargetError::UnknownArch { .. } => format!("{e} in {place}"),
                _ => e.to_string(),
            };
            d.push(
                Diagnostic::new(message)
                    .at(file, id.span.clone(), label)
                    .hint(e.hint()),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_ids_round_trip_in_canonical_order() {
        let t: TargetId = "gfx906:xnack-:sramecc+".parse().unwrap();
        assert_eq!(t.to_string(), "gfx906:sramecc+:xnack-");
        assert!("gfx90c:xnack".parse::<TargetId>().is_err());
        assert!("gfx90c:foo+".parse::<TargetId>().is_err());
        assert!("gfx90c:xnack+:xnack-".parse::<TargetId>().is_err());
        assert!("90c".parse::<TargetId>().is_err());
        assert!("gfx".parse::<TargetId>().is_err());
        let g: TargetId = "gfx9-4-generic:xnack-:sramecc+".parse().unwrap();
        assert_eq!(g.to_string(), "gfx9-4-generic:sramecc+:xnack-");
        for bad in [
            "gfx-generic",
            "gfx9--generic",
            "gfxa-generic",
            "gfx9-generic-x",
        ] {
            assert!(bad.parse::<TargetId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shipped_table_spells_kfd_versions_wave_sizes_and_matrix_cores() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../recipes/arches.toml");
        let file = SourceFile::new(path, std::fs::read_to_string(path).unwrap());
        let mut d = Diagnostics::default();
        let table = ArchTable::parse(&file, &mut d);
        assert!(
            d.is_empty(),
            "{:?}",
            d.iter().map(|x| x.render(false)).collect::<Vec<_>>()
        );
        for a in table.iter() {
            // KFD's encoding: major*10000 + minor*100 + stepping, stepping a hex digit of the name.
            if !a.is_generic() {
                let (maj, min, step) = a.kfd_triple();
                assert_eq!(
                    a.llvm,
                    format!("gfx{maj}{min}{step:x}"),
                    "kfd-version {} does not spell the name",
                    a.kfd_version
                );
            }
            // gfx6 to gfx9 run wave64 only; gfx10 and later default to wave32.
            let wave = if a.family.starts_with("gfx1") { 32 } else { 64 };
            assert_eq!(a.wavefront, wave, "{}", a.llvm);
            let matrix = match a.llvm.as_str() {
                "gfx908" | "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950"
                | "gfx9-4-generic" => MatrixCores::Mfma,
                n if n.starts_with("gfx11") || n.starts_with("gfx12") => MatrixCores::Wmma,
                _ => MatrixCores::None,
            };
            assert_eq!(a.matrix, matrix, "{}", a.llvm);
        }
        assert_eq!(table.get("gfx90a").unwrap().kfd_version, 90010);
        assert_eq!(table.get("gfx90a").unwrap().hsa_override(), "9.0.10");
        assert!(table.by_kfd_version(0).is_none());
    }
}
