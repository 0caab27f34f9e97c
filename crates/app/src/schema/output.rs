//! The command outputs with a published schema: what `--format json` prints, by command, and
//! the JSON `plan --format github-matrix` prints.

use serde_json::Value;

use super::{finish, generate_output};

/// A command's `--format json` output (and `plan --format github-matrix`).
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
    /// `rocforge check --sources --format json`
    CheckSources,
    /// `rocforge plan --explain COMPONENT --format json`, also each artifact's hash-input.json
    HashInput,
    /// `rocforge plan --format github-matrix`
    GithubMatrix,
    /// `rocforge lock --format json`
    Lock,
    /// `rocforge lock --check --format json`
    LockCheck,
    /// `rocforge fetch --format json`
    Fetch,
    /// `rocforge build --format json`
    Build,
    /// `rocforge doctor --format json`
    Doctor,
    /// `rocforge store list --format json`
    Store,
    /// `rocforge store show --format json`
    StoreEntry,
    /// `rocforge inspect PATH… --format json` (without `--against`)
    Inspect,
    /// `rocforge inspect --against --format json`
    Coverage,
    /// `rocforge inspect --against --component --format json`, for GPU code not compiled ahead of time
    Verdict,
    /// `rocforge package --format json`
    Package,
    /// `rocforge verify --format json`, of a signed file or an image
    Verify,
    /// `rocforge verify --rebuild --format json`
    VerifyRebuild,
    /// `rocforge install --format json`
    Install,
    /// `rocforge install --dry-run --format json`
    InstallPlan,
    /// `rocforge list --installed --format json`
    Installed,
    /// `rocforge uninstall --format json`
    Uninstall,
    /// `rocforge detect --format json`
    Device,
    /// `rocforge test --format json`
    Test,
    /// `rocforge test --dry-run --format json`
    TestPlan,
    /// `rocforge test --all --format json`, also the bundle's summary.json
    TestAll,
    /// `rocforge image create --format json`
    Image,
    /// `rocforge publish --format json`
    Publish,
    /// `rocforge publish --dry-run --format json`
    PublishPlan,
    /// `rocforge ci runners --format json`
    Runners,
    /// `rocforge nix export --format json` (no `schema` field)
    NixExport,
    /// `--format json` of any command that fails
    Error,
}

impl Output {
    pub const ALL: [Output; 35] = [
        Output::Schemas,
        Output::Arches,
        Output::Arch,
        Output::List,
        Output::Check,
        Output::CheckSources,
        Output::HashInput,
        Output::GithubMatrix,
        Output::Lock,
        Output::LockCheck,
        Output::Fetch,
        Output::Build,
        Output::Doctor,
        Output::Store,
        Output::StoreEntry,
        Output::Inspect,
        Output::Coverage,
        Output::Verdict,
        Output::Package,
        Output::Verify,
        Output::VerifyRebuild,
        Output::Install,
        Output::InstallPlan,
        Output::Installed,
        Output::Uninstall,
        Output::Device,
        Output::Test,
        Output::TestPlan,
        Output::TestAll,
        Output::Image,
        Output::Publish,
        Output::PublishPlan,
        Output::Runners,
        Output::NixExport,
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
            Output::CheckSources => "check-sources",
            Output::HashInput => "hash-input",
            Output::GithubMatrix => "github-matrix",
            Output::Lock => "lock",
            Output::LockCheck => "lock-check",
            Output::Fetch => "fetch",
            Output::Build => "build",
            Output::Doctor => "doctor",
            Output::Store => "store",
            Output::StoreEntry => "store-entry",
            Output::Inspect => "inspect",
            Output::Coverage => "coverage",
            Output::Verdict => "verdict",
            Output::Package => "package",
            Output::Verify => "verify",
            Output::VerifyRebuild => "verify-rebuild",
            Output::Install => "install",
            Output::InstallPlan => "install-plan",
            Output::Installed => "installed",
            Output::Uninstall => "uninstall",
            Output::Device => "device",
            Output::Test => "test",
            Output::TestPlan => "test-plan",
            Output::TestAll => "test-all",
            Output::Image => "image",
            Output::Publish => "publish",
            Output::PublishPlan => "publish-plan",
            Output::Runners => "runners",
            Output::NixExport => "nix-export",
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
            Output::CheckSources => Some(crate::app::check_sources::CHECK_SOURCES_SCHEMA),
            Output::HashInput => Some(crate::plan::key::HASH_INPUT_SCHEMA),
            Output::GithubMatrix => Some(crate::plan::render::MATRIX_SCHEMA),
            Output::Lock => Some(crate::app::lock::LOCK_SCHEMA),
            Output::LockCheck => Some(crate::app::lock::LOCK_CHECK_SCHEMA),
            Output::Fetch => Some(crate::source::prepare::FETCH_SCHEMA),
            Output::Build => Some(crate::build::report::BUILD_SCHEMA),
            Output::Doctor => Some(crate::app::doctor::DOCTOR_SCHEMA),
            Output::Store => Some(crate::store::output::STORE_SCHEMA),
            Output::StoreEntry => Some(crate::store::output::STORE_ENTRY_SCHEMA),
            Output::Inspect => Some(crate::inspect::INSPECT_SCHEMA),
            Output::Coverage => Some(crate::inspect::coverage::COVERAGE_SCHEMA),
            Output::Verdict => Some(crate::inspect::verdict::VERDICT_SCHEMA),
            Output::Package => Some(crate::package::report::PACKAGE_SCHEMA),
            Output::Verify => Some(crate::attest::report::VERIFY_SCHEMA),
            Output::VerifyRebuild => Some(crate::app::verify::REPORT_SCHEMA),
            Output::Install => Some(crate::app::install::INSTALL_SCHEMA),
            Output::InstallPlan => Some(crate::install::plan::PLAN_SCHEMA),
            Output::Installed => Some(crate::install::report::INSTALLED_SCHEMA),
            Output::Uninstall => Some(crate::install::report::UNINSTALL_SCHEMA),
            Output::Device => Some(crate::testrun::detect::PROFILE_SCHEMA),
            Output::Test => Some(crate::app::test::TEST_SCHEMA),
            Output::TestPlan => Some(crate::testrun::plan::PLAN_SCHEMA),
            Output::TestAll => Some(crate::app::test::ALL_SCHEMA),
            Output::Image => Some(crate::app::image::IMAGE_SCHEMA),
            Output::Publish => Some(crate::app::publish::PUBLISH_SCHEMA),
            Output::PublishPlan => Some(crate::publish::plan::PLAN_SCHEMA),
            Output::Runners => Some(crate::ci::discover::RUNNERS_SCHEMA),
            Output::NixExport => None,
            Output::Error => Some(crate::app::ERROR_SCHEMA),
        }
    }

    /// The JSON Schema (draft 2020-12) of the output.
    pub fn json_schema(self) -> Value {
        let schema = match self {
            Output::Schemas => generate_output::<super::Listing>(),
            Output::Arches => generate_output::<crate::arch::output::Arches>(),
            Output::Arch => generate_output::<crate::arch::output::Shown>(),
            Output::List => generate_output::<crate::catalog::listing::Listing>(),
            Output::Check => generate_output::<crate::catalog::checked::CheckReport>(),
            Output::CheckSources => generate_output::<crate::app::check_sources::Report>(),
            Output::HashInput => generate_output::<crate::plan::key::HashInput>(),
            Output::GithubMatrix => generate_output::<crate::plan::render::MatrixDoc<'static>>(),
            Output::Lock => generate_output::<crate::app::lock::WrittenReport>(),
            Output::LockCheck => generate_output::<crate::app::lock::CheckedReport>(),
            Output::Fetch => generate_output::<crate::source::prepare::Fetched>(),
            Output::Build => generate_output::<crate::build::report::Report>(),
            Output::Doctor => generate_output::<crate::app::doctor::Report>(),
            Output::Store => generate_output::<crate::store::output::Listing>(),
            Output::StoreEntry => generate_output::<crate::store::output::Shown>(),
            Output::Inspect => generate_output::<crate::inspect::Inspected<'static>>(),
            Output::Coverage => generate_output::<crate::inspect::coverage::Covered>(),
            Output::Verdict => generate_output::<crate::inspect::verdict::Judged>(),
            Output::Package => generate_output::<crate::package::report::Report>(),
            Output::Verify => generate_output::<crate::attest::report::Verified>(),
            Output::VerifyRebuild => generate_output::<crate::app::verify::Report>(),
            Output::Install => generate_output::<crate::app::install::Report>(),
            Output::InstallPlan => generate_output::<crate::install::plan::InstallPlan>(),
            Output::Installed => generate_output::<crate::install::report::InstalledList>(),
            Output::Uninstall => generate_output::<crate::install::report::Uninstalled>(),
            Output::Device => generate_output::<crate::testrun::detect::Profile>(),
            Output::Test => generate_output::<crate::app::test::Report>(),
            Output::TestPlan => generate_output::<crate::testrun::plan::TestPlan>(),
            Output::TestAll => generate_output::<crate::app::test::AllOutcome>(),
            Output::Image => generate_output::<crate::app::image::Report>(),
            Output::Publish => generate_output::<crate::app::publish::Published>(),
            Output::PublishPlan => generate_output::<crate::publish::plan::PublishPlan>(),
            Output::Runners => generate_output::<crate::ci::discover::Report>(),
            Output::NixExport => generate_output::<crate::ci::nix::ExportReport>(),
            Output::Error => generate_output::<crate::app::Failed>(),
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
