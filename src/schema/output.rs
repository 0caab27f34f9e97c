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
    /// `rocforge fetch --format json`
    Fetch,
    /// `rocforge build --format json`
    Build,
    /// `rocforge store list --format json`
    Store,
    /// `rocforge store show --format json`
    StoreEntry,
    /// `rocforge inspect --against --format json`
    Coverage,
    /// `rocforge inspect --against --component --format json`, for GPU code not compiled ahead of time
    Verdict,
    /// `rocforge package --format json`
    Package,
    /// `rocforge install --format json`
    Install,
    /// `rocforge list --installed --format json`
    Installed,
    /// `rocforge uninstall --format json`
    Uninstall,
    /// `rocforge image create --format json`
    Image,
    /// `rocforge publish --format json`
    Publish,
    /// `rocforge ci runners --format json`
    Runners,
    /// `rocforge nix export --format json` (no `schema` field)
    NixExport,
    /// `rocforge verify --format json`, of a signed file or an image
    Verify,
    /// `rocforge test --format json`
    Test,
    /// `--format json` of any command that fails
    Error,
}

impl Output {
    pub const ALL: [Output; 24] = [
        Output::Schemas,
        Output::Arches,
        Output::Arch,
        Output::List,
        Output::Check,
        Output::Lock,
        Output::LockCheck,
        Output::Fetch,
        Output::Build,
        Output::Store,
        Output::StoreEntry,
        Output::Coverage,
        Output::Verdict,
        Output::Package,
        Output::Install,
        Output::Installed,
        Output::Uninstall,
        Output::Image,
        Output::Publish,
        Output::Runners,
        Output::NixExport,
        Output::Verify,
        Output::Test,
        Output::Error,
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
            Output::Fetch => "fetch",
            Output::Build => "build",
            Output::Store => "store",
            Output::StoreEntry => "store-entry",
            Output::Coverage => "coverage",
            Output::Verdict => "verdict",
            Output::Package => "package",
            Output::Install => "install",
            Output::Installed => "installed",
            Output::Uninstall => "uninstall",
            Output::Image => "image",
            Output::Publish => "publish",
            Output::Runners => "runners",
            Output::NixExport => "nix-export",
            Output::Verify => "verify",
            Output::Test => "test",
            Output::Error => "error",
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
            Output::Fetch => Some(crate::source::prepare::FETCH_SCHEMA),
            Output::Build => Some(crate::build::report::BUILD_SCHEMA),
            Output::Store => Some(crate::store::output::STORE_SCHEMA),
            Output::StoreEntry => Some(crate::store::output::STORE_ENTRY_SCHEMA),
            Output::Coverage => Some(crate::inspect::coverage::COVERAGE_SCHEMA),
            Output::Verdict => Some(crate::inspect::verdict::VERDICT_SCHEMA),
            Output::Package => Some(crate::package::report::PACKAGE_SCHEMA),
            Output::Install => Some(crate::app::install::INSTALL_SCHEMA),
            Output::Installed => Some(crate::install::report::INSTALLED_SCHEMA),
            Output::Uninstall => Some(crate::install::report::UNINSTALL_SCHEMA),
            Output::Image => Some(crate::app::image::IMAGE_SCHEMA),
            Output::Publish => Some(crate::app::publish::PUBLISH_SCHEMA),
            Output::Runners => Some(crate::ci::discover::RUNNERS_SCHEMA),
            Output::NixExport => None,
            Output::Verify => Some(crate::attest::report::VERIFY_SCHEMA),
            Output::Test => Some(crate::app::test::TEST_SCHEMA),
            Output::Error => Some(crate::app::ERROR_SCHEMA),
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
            Output::Fetch => generate::<crate::source::prepare::Fetched>(),
            Output::Build => generate::<crate::build::report::Report>(),
            Output::Store => generate::<crate::store::output::Listing>(),
            Output::StoreEntry => generate::<crate::store::output::Shown>(),
            Output::Coverage => generate::<crate::inspect::coverage::Covered>(),
            Output::Verdict => generate::<crate::inspect::verdict::Judged>(),
            Output::Package => generate::<crate::package::report::Report>(),
            Output::Install => generate::<crate::app::install::Report>(),
            Output::Installed => generate::<crate::install::report::InstalledList>(),
            Output::Uninstall => generate::<crate::install::report::Uninstalled>(),
            Output::Image => generate::<crate::app::image::Report>(),
            Output::Publish => generate::<crate::app::publish::Published>(),
            Output::Runners => generate::<crate::ci::discover::Report>(),
            Output::NixExport => generate::<crate::ci::nix::ExportReport>(),
            Output::Verify => generate::<crate::attest::report::Verified>(),
            Output::Test => generate::<crate::app::test::Report>(),
            Output::Error => generate::<crate::app::Failed>(),
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
