//! A base image made of a distribution's packages alone (release.toml `[image-base]`):
//! `debootstrap` into a scratch directory, then imported into the container runtime. For
//! machines that reach a Debian mirror but no container registry.

use std::path::{Path, PathBuf};

use super::{ContainerRuntime, RuntimeError};
use crate::recipe::release::ImageBase;

#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    #[error("debootstrap is not installed")]
    NoDebootstrap,
    #[error("debootstrap needs root to make {image}")]
    NotRoot { image: String },
    #[error("debootstrap {suite} from {mirror} failed (exit {code})")]
    Debootstrap {
        suite: String,
        mirror: String,
        code: String,
        log: PathBuf,
    },
    #[error("importing {image} failed (exit {code})")]
    Import {
        image: String,
        code: String,
        log: PathBuf,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{containerfile} does not build FROM {image}, the [image-base] of release.toml")]
    From {
        containerfile: PathBuf,
        image: String,
        found: Option<String>,
    },
}

impl BaseError {
    pub fn hint(&self) -> String {
        match self {
            BaseError::Runtime(e) => e.hint(),
            BaseError::NoDebootstrap => "install it (`apt-get install debootstrap`), or import the base image yourself under the [image-base] name".into(),
            BaseError::NotRoot { .. } => "run `rocforge image build` as root once (the base image is then kept), or import it yourself: debootstrap DIR; tar -C DIR -c . | podman import - NAME".into(),
            BaseError::Debootstrap { mirror, log, .. } => format!(
                "the log is {}; check that {mirror} answers (set [image-base] mirror = \"…\" in release.toml for another)",
                log.display()
            ),
            BaseError::Import { log, .. } => format!("the log is {}", log.display()),
            BaseError::Io { .. } => "check free disk space in the store's directory".into(),
            BaseError::From { image, found, .. } => match found {
                Some(f) => format!("it builds FROM {f}; write FROM {image}, or change [image-base] name"),
                None => format!("add FROM {image} as its first instruction"),
            },
        }
    }
}

/// The Debian mirror this host's apt uses (deb822 sources first, then sources.list), else
/// deb.debian.org: debootstrap reaches the mirror apt does.
pub fn host_mirror() -> String {
    let deb822 =
        std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources").unwrap_or_default();
    if let Some(uri) = deb822
        .lines()
        .find_map(|l| l.strip_prefix("URIs:"))
        .and_then(|v| v.split_whitespace().next())
        .filter(|u| !u.contains("security"))
    {
        return uri.to_string();
    }
    let list = std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    for l in list.lines() {
        let words: Vec<&str> = l
            .split_whitespace()
            .filter(|w| !w.starts_with('['))
            .collect();
        if words.first() == Some(&"deb")
            && let Some(uri) = words.get(1)
            && !uri.contains("security")
        {
            return uri.to_string();
        }
    }
    "http://deb.debian.org/debian".into()
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

/// Checks that `containerfile` builds FROM `base.name`.
pub fn check_from(containerfile: &Path, base: &ImageBase) -> Result<(), BaseError> {
    let text = std::fs::read_to_string(containerfile).map_err(|source| BaseError::Io {
        path: containerfile.to_path_buf(),
        source,
    })?;
    let found = from_of(&text);
    if found.as_deref() == Some(base.name.as_str()) {
        return Ok(());
    }
    Err(BaseError::From {
        containerfile: containerfile.to_path_buf(),
        image: base.name.clone(),
        found,
    })
}

/// What `ensure` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Made {
    /// The runtime already had the image.
    Present(String),
    /// Made now: the image ID.
    Imported(String),
}

/// Makes `base.name` with debootstrap unless the runtime has it. `scratch` is a directory on
/// the disk that can hold the root file system (a few hundred MB); the tree is removed after.
pub fn ensure(
    rt: &dyn ContainerRuntime,
    base: &ImageBase,
    scratch: &Path,
    log: &Path,
) -> Result<Made, BaseError> {
    if let Some(id) = rt.image_id(&base.name) {
        return Ok(Made::Present(id));
    }
    if !crate::process::on_path("debootstrap") {
        return Err(BaseError::NoDebootstrap);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BaseError::NotRoot {
            image: base.name.clone(),
        });
    }
    let mirror = base.mirror.clone().unwrap_or_else(host_mirror);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BaseError::Io { path, source }
    };
    std::fs::create_dir_all(scratch).map_err(io(scratch))?;
    let dir = tempfile::Builder::new()
        .prefix(".debootstrap-")
        .tempdir_in(scratch)
        .map_err(io(scratch))?;
    let root = dir.path().join("root");
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io(log))?;
    let args = [
        format!("--variant={}", base.variant),
        base.suite.clone(),
        root.display().to_string(),
        mirror.clone(),
    ];
    let code = crate::process::Cmd::new("debootstrap")
        .args(&args)
        .run_logged(logf)
        .map_err(|e| match e {
            crate::process::ProcessError::Spawn { source, .. } => {
                io(Path::new("debootstrap"))(source)
            }
            other => io(Path::new("debootstrap"))(std::io::Error::other(other.to_string())),
        })?;
    if code != Some(0) {
        return Err(BaseError::Debootstrap {
            suite: base.suite.clone(),
            mirror,
            code: code.map_or("signal".into(), |c| c.to_string()),
            log: log.to_path_buf(),
        });
    }
    let exit = rt.import_rootfs(&root, &base.name, log)?;
    if !exit.success() {
        return Err(BaseError::Import {
            image: base.name.clone(),
            code: exit.0.map_or("signal".into(), |c| c.to_string()),
            log: log.to_path_buf(),
        });
    }
    let id = rt.image_id(&base.name).ok_or_else(|| {
        BaseError::Runtime(RuntimeError::NoImage {
            runtime: format!("{:?}", rt.kind()).to_lowercase(),
            image: base.name.clone(),
        })
    })?;
    Ok(Made::Imported(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_from_line() {
        assert_eq!(
            from_of("# c\nFROM --platform=linux/amd64 localhost/x:sid AS b\nRUN y\nFROM z\n"),
            Some("localhost/x:sid".into())
        );
        assert_eq!(from_of("from a:b\n"), Some("a:b".into()));
        assert_eq!(from_of("RUN x\n"), None);
    }
}
