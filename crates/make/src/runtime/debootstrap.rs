//! A base image made of a distribution's packages alone (release.toml `[image-base]`):
//! `debootstrap` into a scratch directory as root, or `mmdebstrap` in a user namespace without
//! root (as rootless podman runs its containers), then imported into the container runtime. For
//! machines that reach a Debian mirror but no container registry.

use std::path::{Path, PathBuf};

use super::{ContainerRuntime, RuntimeError};
use crate::recipe::release::ImageBase;

#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    #[error("neither debootstrap nor mmdebstrap is installed")]
    NoDebootstrap,
    #[error(
        "making {image} without root needs mmdebstrap, which is not installed (debootstrap needs root)"
    )]
    NotRoot { image: String },
    #[error("{tool} {suite} from {mirror} failed (exit {code})")]
    Debootstrap {
        tool: &'static str,
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

impl crate::diag::Hint for BaseError {
    fn hint(&self) -> String {
        match self {
            BaseError::Runtime(e) => e.hint(),
            BaseError::NoDebootstrap => "install one (`apt-get install mmdebstrap`: it works with or without root), or import the base image yourself under the [image-base] name".into(),
            BaseError::NotRoot { .. } => "install mmdebstrap (`sudo apt-get install mmdebstrap`): it makes the base in a user namespace, as rootless podman runs containers; then run the command again".into(),
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

pub use crate::catalog::containers::from_of;

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

/// What makes the root file system.
#[derive(Debug, Clone, Copy)]
enum Tool {
    Debootstrap,
    /// `unshare`: as a user without root, in a user namespace.
    Mmdebstrap {
        unshare: bool,
    },
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Debootstrap => "debootstrap",
            Tool::Mmdebstrap { .. } => "mmdebstrap",
        }
    }
}

/// The tool that makes a base here: debootstrap as root, mmdebstrap (in a user namespace)
/// without; an error naming what to install when neither can.
fn tool_here(image: &str) -> Result<Tool, BaseError> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match (
        root,
        crate::process::on_path("debootstrap"),
        crate::process::on_path("mmdebstrap"),
    ) {
        (true, true, _) => Ok(Tool::Debootstrap),
        (_, _, true) => Ok(Tool::Mmdebstrap { unshare: !root }),
        (true, false, false) => Err(BaseError::NoDebootstrap),
        (false, _, false) => Err(BaseError::NotRoot {
            image: image.to_string(),
        }),
    }
}

/// The name of the tool `ensure` would run here, for the progress note before it does.
pub fn tool_for_this_user() -> &'static str {
    tool_here("").map_or("debootstrap", Tool::name)
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
    let tool = tool_here(&base.name)?;
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
    // A directory from debootstrap; a tarball from mmdebstrap, whose files a rootless user could
    // not own on disk.
    let root = match tool {
        Tool::Debootstrap => dir.path().join("root"),
        Tool::Mmdebstrap { .. } => dir.path().join("root.tar"),
    };
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io(log))?;
    let mut args = vec![format!("--variant={}", base.variant)];
    if let Tool::Mmdebstrap { unshare } = tool {
        args.push(format!(
            "--mode={}",
            if unshare { "unshare" } else { "root" }
        ));
        args.push("--format=tar".into());
        // Mirrors that cache a suite (as these machines' does) serve a Release file past its
        // Valid-Until; the packages are still the ones its signature covers.
        args.push("--aptopt=Acquire::Check-Valid-Until \"false\"".into());
    }
    args.extend([
        base.suite.clone(),
        root.display().to_string(),
        mirror.clone(),
    ]);
    let code = crate::process::Cmd::new(tool.name())
        .args(&args)
        .run_logged(logf)
        .map_err(|e| match e {
            crate::process::ProcessError::Spawn { source, .. } => {
                io(Path::new(tool.name()))(source)
            }
            other => io(Path::new(tool.name()))(std::io::Error::other(other.to_string())),
        })?;
    if code != Some(0) {
        return Err(BaseError::Debootstrap {
            tool: tool.name(),
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
