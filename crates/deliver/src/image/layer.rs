//! The layer: the components' trees under the release prefix, as one deterministic tar.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::oci::Descriptor;
use crate::package::manifest::{FileEntry, Kind};
use crate::package::tarball::{self, HashingWriter};

use super::{ImageError, LAYER_TAR_GZIP, io_err};

/// One store entry going into the image.
#[derive(Debug, Clone)]
pub struct Component {
    pub name: String,
    pub version: String,
    pub key: String,
    pub tree: PathBuf,
}

/// The layer file, with its digests.
#[derive(Debug)]
pub struct Layer {
    pub path: tempfile::TempPath,
    /// `sha256:` of the compressed bytes (the blob).
    pub digest: String,
    pub size: u64,
    /// `sha256:` of the uncompressed tar (the config's rootfs.diff_ids).
    pub diff_id: String,
    pub entries: usize,
    /// DT_NEEDED names of the stack's ELF files that none of them provides (DT_SONAME), each
    /// with the first component (in the layer's order) that needs it: what the base must have.
    pub needs: BTreeMap<String, String>,
    /// The wheels unpacked into it, with the Python each needs, and where (under the prefix,
    /// absolute in the image): what the base must run and PYTHONPATH must name.
    pub wheels: Vec<(String, String)>,
    pub site_packages: Option<String>,
}

/// Where an entry of the layer comes from.
#[derive(Debug, Clone, Copy)]
enum From {
    /// The prefix's own directories.
    Prefix,
    /// A component's tree.
    Tree(usize),
    /// Member (by zip index; None: a directory it implies) of a wheel.
    Wheel(usize, Option<usize>),
}

impl Layer {
    pub fn descriptor(&self) -> Descriptor {
        Descriptor {
            media_type: LAYER_TAR_GZIP.into(),
            digest: self.digest.clone(),
            size: self.size,
            annotations: BTreeMap::new(),
        }
    }
}
/// Writes one layer (in `work_dir`) holding every component's tree under `prefix`: the union
/// of the trees, sorted by path, with the prefix's parent directories first. The same path in
/// two components must be the same (directories always are).
pub fn write_layer(
    components: &[Component],
    prefix: &str,
    mtime: u64,
    work_dir: &Path,
) -> Result<Layer, ImageError> {
    let prefix = prefix.trim_matches('/');
    let under = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let Union { all, needs, wheels } = union(components, prefix, &under)?;

    std::fs::create_dir_all(work_dir).map_err(io_err(work_dir))?;
    let tmp = tempfile::Builder::new()
        .prefix(".layer-")
        .suffix(".tar.gz")
        .tempfile_in(work_dir)
        .map_err(io_err(work_dir))?;
    let file = tmp.as_file().try_clone().map_err(io_err(tmp.path()))?;
    let compressed = HashingWriter {
        inner: io::BufWriter::with_capacity(1 << 20, file),
        hasher: Sha256::new(),
        bytes: 0,
    };
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(compressed, flate2::Compression::default());
    let plain = HashingWriter {
        inner: gz,
        hasher: Sha256::new(),
        bytes: 0,
    };
    let mut b = tar::Builder::new(plain);
    b.follow_symlinks(false);
    let mut open = super::wheels::Open::default();
    for (name, (from, e)) in &all {
        match from {
            From::Tree(i) => tarball::append_files(
                &mut b,
                &components[*i].tree,
                std::slice::from_ref(e),
                &under,
                mtime,
            )?,
            From::Wheel(w, Some(index)) => {
                open.append(&mut b, &wheels[*w].path, *index, name, e, mtime)?
            }
            // Directories: the prefix's, and those the wheels' members imply.
            From::Prefix | From::Wheel(_, None) => {
                let dir = FileEntry {
                    path: name.clone(),
                    ..e.clone()
                };
                tarball::append_files(&mut b, work_dir, std::slice::from_ref(&dir), "", mtime)?
            }
        }
    }
    let tmp_path = tmp.path().to_path_buf();
    let out = io_err(&tmp_path);
    let plain = b.into_inner().map_err(&out)?;
    let diff_id = format!("sha256:{}", hex::encode(plain.hasher.finalize()));
    let compressed = plain.inner.finish().map_err(&out)?;
    let HashingWriter {
        inner,
        hasher,
        bytes,
    } = compressed;
    inner
        .into_inner()
        .map_err(|e| out(e.into_error()))?
        .sync_all()
        .map_err(&out)?;
    Ok(Layer {
        path: tmp.into_temp_path(),
        digest: format!("sha256:{}", hex::encode(hasher.finalize())),
        size: bytes,
        diff_id,
        entries: all.len(),
        needs,
        site_packages: (!wheels.is_empty())
            .then(|| format!("/{under}{}", super::wheels::SITE_PACKAGES)),
        wheels: wheels
            .into_iter()
            .map(|w| (w.file_name, w.python))
            .collect(),
    })
}

/// What goes into the layer, before any of it is written.
struct Union {
    /// path in the layer → (where it comes from, its entry as its source names it)
    all: BTreeMap<String, (From, FileEntry)>,
    /// As [`Layer::needs`].
    needs: BTreeMap<String, String>,
    /// The components' wheels, as `From::Wheel` counts them.
    wheels: Vec<super::wheels::Wheel>,
}

/// The union of the components' trees under `under` (`prefix/`), the prefix's own directories
/// included; refused when two components have the same path with different contents.
fn union(components: &[Component], prefix: &str, under: &str) -> Result<Union, ImageError> {
    let mut all = prefix_dirs(prefix);
    let mut needed: BTreeMap<String, String> = BTreeMap::new();
    let mut provided = std::collections::BTreeSet::new();
    let mut wheels = Vec::new();
    let site = format!("{under}{}/", super::wheels::SITE_PACKAGES);
    for (i, c) in components.iter().enumerate() {
        let scan = tarball::scan(&c.tree, &[])?;
        provided.extend(scan.sonames.iter().cloned());
        for n in &scan.needed {
            needed.entry(n.clone()).or_insert_with(|| c.name.clone());
        }
        let unpacked = super::wheels::wheels_of(&c.tree)?;
        for e in scan.files {
            // A wheel goes in unpacked (below), not as its zip as well.
            if unpacked
                .iter()
                .any(|w| e.path == format!("{}/{}", super::wheels::WHEEL_DIR, w.file_name))
            {
                continue;
            }
            let name = format!("{under}{}", e.path);
            add(
                &mut all,
                name,
                From::Tree(i),
                e,
                &c.name,
                components,
                &wheels,
            )?;
        }
        for w in unpacked {
            let members = super::wheels::members(&w)?;
            let at = wheels.len();
            let label = format!("{} (wheel {})", c.name, w.file_name);
            wheels.push(w);
            // site-packages and the directories above it.
            let mut parent = String::new();
            for part in site.trim_end_matches('/').split('/') {
                parent = if parent.is_empty() {
                    part.to_string()
                } else {
                    format!("{parent}/{part}")
                };
                let dir = FileEntry::dir(&parent);
                add(
                    &mut all,
                    parent.clone(),
                    From::Wheel(at, None),
                    dir,
                    &label,
                    components,
                    &wheels,
                )?;
            }
            for m in members {
                if let Some(s) = &m.soname {
                    provided.insert(s.clone());
                }
                for n in &m.needed {
                    needed.entry(n.clone()).or_insert_with(|| label.clone());
                }
                let name = format!("{site}{}", m.entry.path);
                add(
                    &mut all,
                    name,
                    From::Wheel(at, m.index),
                    m.entry,
                    &label,
                    components,
                    &wheels,
                )?;
            }
        }
    }
    Ok(Union {
        all,
        needs: needed
            .into_iter()
            .filter(|(n, _)| !provided.contains(n))
            .collect(),
        wheels,
    })
}

/// Adds `e` at `name`, or checks it is what is there already (directories always are).
fn add(
    all: &mut BTreeMap<String, (From, FileEntry)>,
    name: String,
    from: From,
    e: FileEntry,
    who: &str,
    components: &[Component],
    wheels: &[super::wheels::Wheel],
) -> Result<(), ImageError> {
    match all.get(&name) {
        None => {
            all.insert(name, (from, e));
        }
        Some((_, old)) if old.kind == Kind::Dir && e.kind == Kind::Dir => {}
        Some((_, old))
            if old.kind == e.kind
                && old.sha256 == e.sha256
                && old.executable == e.executable
                && old.target == e.target => {}
        Some((j, _)) => {
            return Err(ImageError::Conflict {
                path: format!("/{name}"),
                first: source_name(*j, components, wheels),
                second: who.to_string(),
            });
        }
    }
    Ok(())
}

fn source_name(f: From, components: &[Component], wheels: &[super::wheels::Wheel]) -> String {
    match f {
        From::Prefix => "the prefix".into(),
        From::Tree(i) => components[i].name.clone(),
        From::Wheel(w, _) => format!("wheel {}", wheels[w].file_name),
    }
}

/// The directories of `prefix` (`opt`, `opt/rocm`), which belong to no component.
fn prefix_dirs(prefix: &str) -> BTreeMap<String, (From, FileEntry)> {
    let mut all = BTreeMap::new();
    let mut parent = String::new();
    for part in prefix.split('/').filter(|p| !p.is_empty()) {
        parent = if parent.is_empty() {
            part.to_string()
        } else {
            format!("{parent}/{part}")
        };
        all.insert(parent.clone(), (From::Prefix, FileEntry::dir(&parent)));
    }
    all
}
