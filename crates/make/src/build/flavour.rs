//! Builder image flavours: the line's builder image plus what one recipe's build needs and no
//! other's does (PyTorch's Python 3.13 beside the line's 3.14). A recipe names one with
//! `[build] image = "<flavour>"`; `containers/Containerfile.builder-<flavour>-<line>` makes it
//! FROM the line's image. Its identity is that file's bytes and the line image's own identity,
//! so adding a flavour, or changing one, changes the keys of the components built in it alone.

use sha2::{Digest, Sha256};

use super::image::{
    INPUTS_LABEL, ImageError, Named, Ready, build_as, copies_in, digest_of, log_path, record,
};
use crate::catalog::Catalog;
use crate::catalog::containers::{self, Containerfile, flavour_file_name, flavour_reference};
use crate::plan::key::ImageRef;
use crate::progress::Reporter;
use crate::runtime::{ContainerRuntime, Kind as RtKind};
use crate::store::Store;

/// The flavour's Containerfile (checked to exist, FROM the line's image, when the catalog loaded).
pub fn containerfile(catalog: &Catalog, flavour: &str) -> Option<Containerfile> {
    containers::find(
        &catalog.root,
        &flavour_file_name(&catalog.release.name, flavour),
    )
}

fn named(catalog: &Catalog, flavour: &str) -> Named {
    Named {
        image: flavour_reference(&catalog.release.image, flavour),
        file_name: flavour_file_name(&catalog.release.name, flavour),
        record: format!("{}+{flavour}", catalog.release.name),
        kind: "builder",
        from_base: false,
    }
}

/// `sha256:…` of what the flavour is made from: its Containerfile's bytes and what keys the
/// line's image (its inputs, or the digest or ID that pins it). None when the line's image is
/// not pinned at all, or the flavour copies files in.
fn inputs_digest(catalog: &Catalog, flavour: &str, line: &ImageRef) -> Option<String> {
    let file = containerfile(catalog, flavour)?;
    let from = line.built_from.as_ref().or(line.digest.as_ref())?;
    if copies_in(&file.text) {
        return None;
    }
    #[derive(serde::Serialize)]
    struct Inputs<'a> {
        schema: &'static str,
        containerfile_sha256: String,
        from: &'a str,
    }
    let inputs = Inputs {
        schema: "rocforge.image-flavour-inputs/1",
        containerfile_sha256: hex::encode(Sha256::digest(file.text.as_bytes())),
        from,
    };
    Some(digest_of(&inputs))
}

/// The flavour as keys see it, given the line's image as they see it: keyed by its inputs,
/// whether it is built yet or not, the same on every machine.
pub fn image_ref(catalog: &Catalog, flavour: &str, line: &ImageRef) -> ImageRef {
    ImageRef {
        reference: flavour_reference(&catalog.release.image, flavour),
        digest: None,
        local: true,
        built_from: inputs_digest(catalog, flavour, line),
        runtime_id: false,
    }
}

/// Makes the flavour `image` (as [`image_ref`] made it) present in `rt`, once the line's image
/// is: present as made from these inputs here, adopted when its label says so, else built.
pub fn ensure(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    flavour: &str,
    image: &ImageRef,
    store: &Store,
    reporter: &dyn Reporter,
) -> Result<Ready, ImageError> {
    if rt.kind() == RtKind::Host {
        return Ok(Ready::NotNeeded);
    }
    let named = named(catalog, flavour);
    let file = file_of(catalog, flavour, &named)?;
    let log = || log_path(store, &named.record);
    match (&image.built_from, rt.image_id(&named.image)) {
        (Some(inputs), Some(id)) => {
            let recorded = store.local_image_record(&named.record);
            if recorded.is_some_and(|l| {
                l.reference == named.image && l.id == id && l.inputs.as_ref() == Some(inputs)
            }) {
                return Ok(Ready::Present);
            }
            if rt.image_label(&named.image, INPUTS_LABEL).as_ref() == Some(inputs) {
                record(rt, &named, &file, id, Some(inputs.clone()), store, &log()?)?;
                return Ok(Ready::Present);
            }
        }
        (None, Some(_)) => return Ok(Ready::Present),
        (_, None) => {}
    }
    build(rt, catalog, flavour, image, store, reporter).map(Ready::Built)
}

/// Builds the flavour `image` (as [`image_ref`] made it) in `rt` afresh, FROM the line's image
/// already present, labelled with its inputs, and records it: `image build --flavour`, and
/// [`ensure`] when the image is missing or stale. Returns the new image ID.
pub fn build(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    flavour: &str,
    image: &ImageRef,
    store: &Store,
    reporter: &dyn Reporter,
) -> Result<String, ImageError> {
    let named = named(catalog, flavour);
    let file = file_of(catalog, flavour, &named)?;
    let log = log_path(store, &named.record)?;
    let label = image
        .built_from
        .as_ref()
        .map(|i| (INPUTS_LABEL, i.as_str()));
    let id = build_as(rt, catalog, &named, &file, label, store, &log, reporter)?;
    record(
        rt,
        &named,
        &file,
        id.clone(),
        image.built_from.clone(),
        store,
        &log,
    )?;
    Ok(id)
}

fn file_of(catalog: &Catalog, flavour: &str, named: &Named) -> Result<Containerfile, ImageError> {
    containerfile(catalog, flavour).ok_or_else(|| ImageError::Missing {
        image: named.image.clone(),
        why: format!(
            "there is no containers/{} to build it from",
            named.file_name
        ),
    })
}

/// The flavours the line's recipes name, each with the recipes that name it.
pub fn named_by_recipes(catalog: &Catalog) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (name, recipe) in &catalog.recipes {
        if let Some(f) = &recipe.build.image {
            out.entry(f.as_str().to_string())
                .or_default()
                .push(name.clone());
        }
    }
    out
}
