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
    let Union { all, needs } = union(components, prefix, &under)?;

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
    for (i, e) in all.values() {
        match i {
            Some(i) => tarball::append_files(
                &mut b,
                &components[*i].tree,
                std::slice::from_ref(e),
                &under,
                mtime,
            )?,
            None => tarball::append_files(&mut b, work_dir, std::slice::from_ref(e), "", mtime)?,
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
    })
}

/// What goes into the layer, before any of it is written.
struct Union {
    /// path in the layer → (index of the component, entry relative to its tree)
    all: BTreeMap<String, (Option<usize>, FileEntry)>,
    /// As [`Layer::needs`].
    needs: BTreeMap<String, String>,
}

/// The union of the components' trees under `under` (`prefix/`), the prefix's own directories
/// included; refused when two components have the same path with different contents.
fn union(components: &[Component], prefix: &str, under: &str) -> Result<Union, ImageError> {
    let mut all = prefix_dirs(prefix);
    let mut needed: BTreeMap<String, String> = BTreeMap::new();
    let mut provided = std::collections::BTreeSet::new();
    for (i, c) in components.iter().enumerate() {
        let scan = tarball::scan(&c.tree, &[])?;
        provided.extend(scan.sonames.iter().cloned());
        for n in &scan.needed {
            needed.entry(n.clone()).or_insert_with(|| c.name.clone());
        }
        for e in scan.files {
            let name = format!("{under}{}", e.path);
            match all.get(&name) {
                None => {
                    all.insert(name, (Some(i), e));
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
                        first: j.map_or("the prefix".into(), |j| components[j].name.clone()),
                        second: c.name.clone(),
                    });
                }
            }
        }
    }
    Ok(Union {
        all,
        needs: needed
            .into_iter()
            .filter(|(n, _)| !provided.contains(n))
            .collect(),
    })
}

/// The directories of `prefix` (`opt`, `opt/rocm`), which belong to no component.
fn prefix_dirs(prefix: &str) -> BTreeMap<String, (Option<usize>, FileEntry)> {
    let mut all = BTreeMap::new();
    let mut parent = String::new();
    for part in prefix.split('/').filter(|p| !p.is_empty()) {
        parent = if parent.is_empty() {
            part.to_string()
        } else {
            format!("{parent}/{part}")
        };
        all.insert(
            parent.clone(),
            (
                None,
                FileEntry {
                    path: parent.clone(),
                    kind: Kind::Dir,
                    size: 0,
                    sha256: None,
                    executable: false,
                    target: None,
                },
            ),
        );
    }
    all
}
