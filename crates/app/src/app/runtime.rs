//! Which container runtime a use case runs in, with rocforge.toml's arguments for it.

use std::sync::Arc;

use super::{Error, Result};
use crate::catalog::Catalog;
use crate::catalog::config::Config;
use crate::catalog::lock::Lockfile;
use crate::plan::{self, key::RuntimeKind};
use crate::runtime::{self, ContainerRuntime, Kind, RuntimeArgs};

/// `--runtime`: podman, docker or host [default: podman if it works, else docker].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeChoice {
    Podman,
    Docker,
    Host,
}

impl RuntimeChoice {
    /// The kind of build it gives: keys differ between container and host builds.
    pub fn kind(choice: Option<RuntimeChoice>) -> RuntimeKind {
        if choice == Some(RuntimeChoice::Host) {
            RuntimeKind::Host
        } else {
            RuntimeKind::Container
        }
    }
}

pub fn runtime_error(e: runtime::RuntimeError) -> Error {
    Error::from(e)
}

/// The runtime asked for and the podman and docker arguments of rocforge.toml (`run` ones only
/// when something will be run).
fn runtime_config(
    choice: Option<RuntimeChoice>,
    config: &Config,
    with_run: bool,
) -> (Option<Kind>, RuntimeArgs, RuntimeArgs) {
    let wanted = choice.map(|c| match c {
        RuntimeChoice::Podman => Kind::Podman,
        RuntimeChoice::Docker => Kind::Docker,
        RuntimeChoice::Host => Kind::Host,
    });
    let run = |args: &Vec<String>| if with_run { args.clone() } else { Vec::new() };
    let podman = RuntimeArgs {
        global: config.podman_args.clone(),
        run: run(&config.podman_run_args),
    };
    let docker = RuntimeArgs {
        global: config.docker_args.clone(),
        run: run(&config.docker_run_args),
    };
    (wanted, podman, docker)
}

pub fn open_runtime(
    choice: Option<RuntimeChoice>,
    config: &Config,
) -> Result<Arc<dyn ContainerRuntime>> {
    let (wanted, podman, docker) = runtime_config(choice, config, true);
    runtime::detect(wanted, podman, docker)
        .map(Arc::from)
        .map_err(runtime_error)
}

/// What the container runtime says of the release's builder image, for keys: asked only when
/// rocforge.lock does not pin the image and the build runs in a container.
pub fn runtime_image(
    catalog: &Catalog,
    lock: &Lockfile,
    config: &Config,
    choice: Option<RuntimeChoice>,
    kind: RuntimeKind,
) -> plan::RuntimeImage {
    let image = &catalog.release.image;
    if kind == RuntimeKind::Host || lock.image(&catalog.release.name, image).is_some() {
        return plan::RuntimeImage::Unknown;
    }
    let (wanted, podman, docker) = runtime_config(choice, config, false);
    let label = crate::build::image::INPUTS_LABEL;
    match runtime::local_image_id(wanted, podman, docker, image, label) {
        None => plan::RuntimeImage::Unknown,
        Some(None) => plan::RuntimeImage::Absent,
        Some(Some((id, inputs))) => plan::RuntimeImage::Id { id, inputs },
    }
}
