//! The command outputs with a published schema: what `--format json` prints, by command.

use serde_json::Value;

use super::{finish, generate};

/// A command's `--format json` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// `rocforge schema --format json`
    Schemas,
    /// `rocforge arch list --format json`
    Arches,
    /// `rocforge arch show --format json`
    Arch,
    /// `rocforge list --format json`
    List,
    /// `rocforge check --format json`
    Check,
    /// `rocforge lock --format json`
    Lock,
    /// `rocforge lock --check --format json`
    LockCheck,
    /// `rocforge store list --format json`
    Store,
    /// `rocforge store show --format json`
    StoreEntry,
}

impl Output {
    pub const ALL: [Output; 9] = [
        Output::Schemas,
        Output::Arches,
        Output::Arch,
        Output::List,
        Output::Check,
        Output::Lock,
        Output::LockCheck,
        Output::Store,
        Output::StoreEntry,
    ];

    /// The name `rocforge schema` takes (clap's spelling of the variant).
    pub fn name(self) -> &'static str {
        match self {
            Output::Schemas => "schemas",
            Output::Arches => "arches",
            Output::Arch => "arch",
            Output::List => "list",
            Output::Check => "check",
            Output::Lock => "lock",
            Output::LockCheck => "lock-check",
            Output::Store => "store",
            Output::StoreEntry => "store-entry",
        }
    }

    /// The value of the output's `schema` field; None for an output without one.
    pub fn identifier(self) -> Option<&'static str> {
        match self {
            Output::Schemas => Some(super::SCHEMAS_SCHEMA),
            Output::Arches => Some(crate::arch::output::ARCHES_SCHEMA),
            Output::Arch => Some(crate::arch::output::ARCH_SCHEMA),
            Output::List => Some(crate::catalog::listing::LIST_SCHEMA),
            Output::Check => Some(crate::catalog::checked::CHECK_SCHEMA),
            Output::Lock => Some(crate::app::lock::LOCK_SCHEMA),
            Output::LockCheck => Some(crate::app::lock::LOCK_CHECK_SCHEMA),
            Output::Store => Some(crate::store::output::STORE_SCHEMA),
            Output::StoreEntry => Some(crate::store::output::STORE_ENTRY_SCHEMA),
        }
    }

    /// The JSON Schema (draft 2020-12) of the output.
    pub fn json_schema(self) -> Value {
        let schema = match self {
            Output::Schemas => generate::<super::Listing>(),
            Output::Arches => generate::<crate::arch::output::Arches>(),
            Output::Arch => generate::<crate::arch::output::Shown>(),
            Output::List => generate::<crate::catalog::listing::Listing>(),
            Output::Check => generate::<crate::catalog::checked::CheckReport>(),
            Output::Lock => generate::<crate::app::lock::WrittenReport>(),
            Output::LockCheck => generate::<crate::app::lock::CheckedReport>(),
            Output::Store => generate::<crate::store::output::Listing>(),
            Output::StoreEntry => generate::<crate::store::output::Shown>(),
        };
        finish(
            schema,
            self.name(),
            self.identifier().as_slice(),
            "The output and its version.",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// Every output is listed once, under the name clap parses.
    #[test]
    fn names_are_clap_names() {
        assert_eq!(Output::ALL.len(), Output::value_variants().len());
        for o in Output::ALL {
            assert_eq!(o.to_possible_value().unwrap().get_name(), o.name());
        }
    }
}
