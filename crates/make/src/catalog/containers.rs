//! The Containerfiles a catalog's lines build their images from: `containers/<file>` beside a
//! catalog directory, else the copy built into the binary (as the recipes are), so an installed
//! rocforge makes a line's images from any directory.

use std::path::PathBuf;

use include_dir::{Dir, include_dir};

use super::CatalogRoot;

static EMBEDDED_CONTAINERS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../containers");

/// A Containerfile: on disk, or the one built in.
#[derive(Debug, Clone)]
pub struct Containerfile {
    /// The path a user sees (`<built-in>/containers/…` for the embedded one).
    pub shown: String,
    pub text: String,
    /// The file on disk; None for the embedded one (written out to build it).
    pub path: Option<PathBuf>,
}

/// `containers/<file>` of the catalog: beside its directory, else built in. A catalog
/// directory without its own file (a copy of recipes/ alone) builds the shipped one.
pub fn find(root: &CatalogRoot, file: &str) -> Option<Containerfile> {
    let on_disk = root.base_dir().and_then(|base| {
        let path = base.join("containers").join(file);
        let text = std::fs::read_to_string(&path).ok()?;
        Some(Containerfile {
            shown: path.display().to_string(),
            text,
            path: Some(path),
        })
    });
    match root {
        CatalogRoot::Embedded => embedded(file),
        CatalogRoot::Dir(_) => on_disk.or_else(|| embedded(file)),
    }
}

/// `containers/<file>` as built into this binary.
pub fn embedded(file: &str) -> Option<Containerfile> {
    let text = EMBEDDED_CONTAINERS.get_file(file)?.contents_utf8()?;
    Some(Containerfile {
        shown: format!("<built-in>/containers/{file}"),
        text: text.to_string(),
        path: None,
    })
}

/// A flavour's Containerfile: `Containerfile.builder-<flavour>-<line>`.
pub fn flavour_file_name(release: &str, flavour: &str) -> String {
    format!("Containerfile.builder-{flavour}-{release}")
}

/// The image a flavour's Containerfile makes: the line's builder image with `-<flavour>`
/// appended to its tag (to its name when it has no tag).
pub fn flavour_reference(image: &str, flavour: &str) -> String {
    format!("{image}-{flavour}")
}

/// The image a Containerfile builds FROM (its first FROM line).
pub fn from_of(containerfile: &str) -> Option<String> {
    containerfile.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next()?.eq_ignore_ascii_case("FROM"))
            .then(|| w.find(|x| !x.starts_with("--")))
            .flatten()
            .map(str::to_string)
    })
}
