//! Which release index `rocforge install` reads: `--from`, else `ROCFORGE_INDEX`, else the
//! config's `[install] index`, else the project's own published releases.

/// The project's releases, as the release workflow publishes them: the GitHub release of the
/// newest tag of the repository whose registry holds the builder images (ghcr.io/rocforge).
/// `latest/download/` follows to that release, so the index's relative artifact URLs do too.
pub const DEFAULT_INDEX: &str =
    "https://github.com/rocforge/rocforge/releases/latest/download/index.json";

/// Where github.com redirects release downloads: trusted for the default index only, as the
/// signed index pins every artifact's sha256 wherever its bytes come from.
pub const DEFAULT_INDEX_HOSTS: &[&str] = &[
    "release-assets.githubusercontent.com",
    "objects.githubusercontent.com",
];

pub const INDEX_ENV: &str = "ROCFORGE_INDEX";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Env,
    /// The config file that set `[install] index`.
    Config(String),
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexChoice {
    pub location: String,
    pub origin: Origin,
}

/// The first of `--from`, `ROCFORGE_INDEX` and the config's index that is set (an empty value
/// counts as unset), else [`DEFAULT_INDEX`].
pub fn choose(flag: Option<&str>, env: Option<&str>, config: Option<(&str, &str)>) -> IndexChoice {
    let set = |v: Option<&str>| v.map(str::trim).filter(|v| !v.is_empty()).map(String::from);
    if let Some(location) = set(flag) {
        return IndexChoice {
            location,
            origin: Origin::Flag,
        };
    }
    if let Some(location) = set(env) {
        return IndexChoice {
            location,
            origin: Origin::Env,
        };
    }
    if let Some((index, file)) = config
        && let Some(location) = set(Some(index))
    {
        return IndexChoice {
            location,
            origin: Origin::Config(file.to_string()),
        };
    }
    IndexChoice {
        location: DEFAULT_INDEX.into(),
        origin: Origin::Default,
    }
}

impl IndexChoice {
    /// Hosts besides the index's own that its artifacts may come from without --allow-host.
    pub fn implied_hosts(&self) -> Vec<String> {
        match self.origin {
            Origin::Default => DEFAULT_INDEX_HOSTS.iter().map(|h| h.to_string()).collect(),
            _ => Vec::new(),
        }
    }
}

impl IndexChoice {
    /// Where the location came from and how to use another, for an index that cannot be read.
    pub fn hint(&self) -> String {
        const OTHER: &str = "pass --from DIR_OR_URL (a directory or URL holding index.json), set ROCFORGE_INDEX, or set [install] index in rocforge.toml or ~/.config/rocforge/config.toml";
        match &self.origin {
            Origin::Flag => "check --from: a directory or URL holding index.json".into(),
            Origin::Env => {
                format!("{INDEX_ENV} names this index; fix or unset it, or pass --from DIR_OR_URL")
            }
            Origin::Config(file) => {
                format!("[install] index in {file} names this index; fix it, or {OTHER}")
            }
            Origin::Default => format!(
                "this is the default index (the project's published releases); to install from another, {OTHER}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_one_set_wins() {
        let cfg = Some(("https://c.example/", "rocforge.toml"));
        assert_eq!(choose(Some("./dist"), Some("e"), cfg).origin, Origin::Flag);
        assert_eq!(choose(None, Some("e"), cfg).origin, Origin::Env);
        assert_eq!(choose(None, Some(" "), cfg).location, "https://c.example/");
        assert_eq!(
            choose(None, None, cfg).origin,
            Origin::Config("rocforge.toml".into())
        );
        let d = choose(None, None, None);
        assert_eq!(
            (d.location.as_str(), d.origin.clone()),
            (DEFAULT_INDEX, Origin::Default)
        );
        assert!(!d.implied_hosts().is_empty());
        assert!(choose(Some("x"), None, None).implied_hosts().is_empty());
        assert!(d.hint().contains("[install] index"));
    }
}
