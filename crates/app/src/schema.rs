//! JSON Schemas of the formats other programs read (release index, tarball manifest, install
//! receipt, test results, plan) and of each command's `--format json` output, generated from
//! the Rust types that write them, so a schema cannot drift from what rocforge writes.
//! `rocforge schema NAME` prints one; docs/schemas/ holds them as committed files, which a
//! test keeps equal to these.

use std::sync::LazyLock;

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde::Serialize;
use serde_json::{Value, json};

mod output;

pub use output::Output;

/// A saved format with a published schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SavedFormat {
    /// index.json of a release directory (`rocforge index`, read by `rocforge install`)
    Index,
    /// rocforge-manifest.json, the first entry of every tarball
    Manifest,
    /// the receipt `rocforge install` writes for each installed component
    Receipt,
    /// results.json of a test run (`rocforge test`, read by `rocforge report`)
    Results,
    /// `rocforge plan --format json`
    Plan,
    /// DIR/<image>.image.json, what `image create --push --record DIR` writes for `rocforge index`
    ImageRecord,
}

impl SavedFormat {
    pub const ALL: [SavedFormat; 6] = [
        SavedFormat::Index,
        SavedFormat::Manifest,
        SavedFormat::Receipt,
        SavedFormat::Results,
        SavedFormat::Plan,
        SavedFormat::ImageRecord,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SavedFormat::Index => "index",
            SavedFormat::Manifest => "manifest",
            SavedFormat::Receipt => "receipt",
            SavedFormat::Results => "results",
            SavedFormat::Plan => "plan",
            SavedFormat::ImageRecord => "image-record",
        }
    }

    /// The `schema` values rocforge reads for this format; the last is the one it writes.
    pub fn identifiers(self) -> &'static [&'static str] {
        match self {
            SavedFormat::Index => crate::package::index::INDEX_SCHEMAS_READ,
            SavedFormat::Manifest => &[crate::package::manifest::MANIFEST_SCHEMA],
            SavedFormat::Receipt => &[crate::install::receipt::RECEIPT_SCHEMA],
            SavedFormat::Results => crate::testrun::bundle::RESULTS_SCHEMAS_READ,
            SavedFormat::Plan => &[crate::plan::PLAN_SCHEMA],
            SavedFormat::ImageRecord => &[crate::package::index::IMAGE_RECORD_SCHEMA],
        }
    }

    /// The JSON Schema (draft 2020-12) of the format.
    pub fn json_schema(self) -> Value {
        let schema = match self {
            SavedFormat::Index => generate::<crate::package::index::Index>(),
            SavedFormat::Manifest => generate::<crate::package::manifest::Manifest>(),
            SavedFormat::Receipt => generate::<crate::install::receipt::Receipt>(),
            SavedFormat::Results => generate::<crate::testrun::bundle::Bundle>(),
            SavedFormat::Plan => generate::<crate::plan::Plan>(),
            SavedFormat::ImageRecord => generate::<crate::package::index::ImageRecord>(),
        };
        finish(
            schema,
            self.name(),
            self.identifiers(),
            "The format and its version; rocforge reads each listed, writes the last.",
        )
    }
}

/// Any document with a published schema: a saved format or a command's output. `rocforge
/// schema NAME` takes either, by one list of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    Saved(SavedFormat),
    Output(Output),
}

/// The saved formats first, as `rocforge schema` has always listed them, then the outputs.
static DOCUMENTS: LazyLock<Vec<Document>> = LazyLock::new(|| {
    SavedFormat::ALL
        .into_iter()
        .map(Document::Saved)
        .chain(Output::ALL.into_iter().map(Document::Output))
        .collect()
});

impl Document {
    pub fn all() -> &'static [Document] {
        &DOCUMENTS
    }

    pub fn name(self) -> &'static str {
        match self {
            Document::Saved(f) => f.name(),
            Document::Output(o) => o.name(),
        }
    }

    /// The `schema` value the document carries now; None for an output that has no such field.
    pub fn identifier(self) -> Option<&'static str> {
        match self {
            Document::Saved(f) => f.identifiers().last().copied(),
            Document::Output(o) => o.identifier(),
        }
    }

    /// The committed copy's path in the repository.
    pub fn file_name(self) -> String {
        format!("{}.schema.json", self.name())
    }

    pub fn json_schema(self) -> Value {
        match self {
            Document::Saved(f) => f.json_schema(),
            Document::Output(o) => o.json_schema(),
        }
    }

    /// The schema as the committed file holds it: pretty JSON and a final newline.
    pub fn text(self) -> String {
        serde_json::to_string_pretty(&self.json_schema()).expect("a schema is plain JSON") + "\n"
    }
}

// By hand, since a derive cannot join two enums' values: each keeps its own name and help.
impl clap::ValueEnum for Document {
    fn value_variants<'a>() -> &'a [Self] {
        Document::all()
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        match self {
            Document::Saved(f) => f.to_possible_value(),
            Document::Output(o) => o.to_possible_value(),
        }
    }
}

/// One line of `rocforge schema --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Listed {
    pub name: &'static str,
    /// The identifier the document carries in its `schema` field (null when it has none).
    pub schema: Option<&'static str>,
    pub file: String,
}

pub const SCHEMAS_SCHEMA: &str = "rocforge.schemas/1";

/// `rocforge schema --format json`: every document with a schema.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Listing {
    pub schema: &'static str,
    pub formats: Vec<Listed>,
}

pub fn listing() -> Listing {
    Listing {
        schema: SCHEMAS_SCHEMA,
        formats: Document::all()
            .iter()
            .map(|d| Listed {
                name: d.name(),
                schema: d.identifier(),
                file: d.file_name(),
            })
            .collect(),
    }
}

/// Names the schema after the identifier it describes and says where it comes from; the
/// identifier field, a plain string in the types, gets the values rocforge reads and writes.
fn finish(mut schema: Value, name: &str, ids: &[&str], id_description: &str) -> Value {
    if let Some(obj) = schema.as_object_mut() {
        let title = ids.last().copied().unwrap_or(name);
        obj.insert("title".into(), json!(title));
        obj.insert(
            "$comment".into(),
            json!(format!(
                "Generated from rocforge's types by `rocforge schema {name}`; do not edit."
            )),
        );
    }
    if !ids.is_empty()
        && let Some(field) = schema.pointer_mut("/properties/schema")
    {
        *field = json!({
            "type": "string",
            "enum": ids,
            "description": id_description,
        });
    }
    schema
}

fn generate<T: JsonSchema>() -> Value {
    let generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
    serde_json::to_value(generator.into_root_schema_for::<T>()).expect("a schema is plain JSON")
}

/// The schema of what `T` serializes to, for the outputs, which rocforge writes and never
/// reads: a field left out when empty (`skip_serializing_if`) is not required, and an `Option`
/// written as null when unset is.
fn generate_output<T: JsonSchema>() -> Value {
    let generator = SchemaGenerator::new(SchemaSettings::draft2020_12().for_serialize());
    serde_json::to_value(generator.into_root_schema_for::<T>()).expect("a schema is plain JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed schemas are what the types say (regenerate with
    /// `rocforge schema --out docs/schemas`).
    #[test]
    fn committed_schemas_match_the_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas");
        for f in Document::all() {
            let path = dir.join(f.file_name());
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == f.text(),
                "{} differs from the types: run `cargo run -- schema --out docs/schemas`",
                path.display()
            );
        }
    }

    /// Each schema names the identity fields with their patterns, so a reader can check a
    /// key or a target without rocforge.
    #[test]
    fn identity_fields_carry_their_patterns() {
        let index = SavedFormat::Index.json_schema();
        let text = index.to_string();
        assert!(text.contains("^[0-9a-f]{64}$"), "{text}");
        assert!(text.contains("sramecc|xnack"), "{text}");
        assert_eq!(
            index.pointer("/properties/schema/enum"),
            Some(&json!(["rocforge.index/1", "rocforge.index/2"]))
        );
        let results = SavedFormat::Results.json_schema();
        assert_eq!(
            results.pointer("/properties/schema/enum"),
            Some(&json!(["rocforge.results/1", "rocforge.results/2"]))
        );
    }
}
