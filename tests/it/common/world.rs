//! One test world: a temporary directory holding a catalog root (recipes/, patches/), the store,
//! the source cache, HOME, signing keys with the configs trusting them, recorded KFD trees, and
//! git repositories served by a git daemon behind a mirror mapping, with the environment
//! rocforge runs in there. Each area's fixture builds one with [`World`] and adds its own
//! components, so the layout and the environment are the same everywhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{GitDaemon, Out, containers_conf, kfd, manifest, rocforge_command, test_release};

/// Where `key generate --out DIR` leaves the pair; the secret half signs, the public half is
/// what configs trust.
pub const KEYS: &str = "keys";

pub struct World {
    /// Stopped before the directory it serves is removed.
    git: Option<GitDaemon>,
    /// None for a [`Builder::shared`] world, which is never removed.
    _tmp: Option<tempfile::TempDir>,
    root: PathBuf,
    env: Vec<(String, PathBuf)>,
    lead: Vec<String>,
    /// rocforge.toml's `[mirrors]` as built: (URL prefix, what serves it).
    mirrors: Vec<(String, String)>,
}

/// What [`World::new`] sets up; [`Builder::build`] makes it.
pub struct Builder {
    release: Option<String>,
    arches: Option<Vec<String>>,
    catalog: Option<String>,
    shared: Option<String>,
    config: Option<String>,
    env: Vec<(String, Value)>,
    lead: Vec<String>,
    keys: bool,
    git: bool,
    git_mirrors: Vec<String>,
}

/// An environment variable's value: a path under the world's root, or written as given.
enum Value {
    Under(String),
    Verbatim(PathBuf),
}

impl World {
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Builder {
        Builder {
            release: None,
            arches: None,
            catalog: None,
            shared: None,
            config: None,
            env: Vec::new(),
            lead: Vec::new(),
            keys: false,
            git: false,
            git_mirrors: Vec::new(),
        }
    }

    /// The directory rocforge runs in: HOME, and the parent of recipes/, store/ and cache/.
    /// It is a subdirectory of the temporary directory, so tests can check that nothing is
    /// written beside it.
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
    pub fn recipes(&self) -> PathBuf {
        self.root.join("recipes")
    }
    /// The recipes of the release [`Builder::release`] wrote.
    pub fn release_dir(&self) -> PathBuf {
        self.recipes().join("test-1.0")
    }
    pub fn store(&self) -> PathBuf {
        self.root.join("store")
    }
    pub fn cache(&self) -> PathBuf {
        self.root.join("cache")
    }
    pub fn home(&self) -> &Path {
        &self.root
    }
    /// The secret key of a pair made with [`World::generate_key`] into `dir`, as an argument.
    pub fn secret_key(&self, dir: &str) -> String {
        self.root
            .join(dir)
            .join("rocforge.key")
            .display()
            .to_string()
    }
    pub fn public_key(&self, dir: &str) -> String {
        self.root
            .join(dir)
            .join("rocforge.pub")
            .display()
            .to_string()
    }

    /// The world's environment, for [`super::rocforge_env`] and [`super::rocforge_command`]
    /// (which add the store, cache, HOME and an empty user config under the root).
    pub fn env(&self) -> Vec<(&str, &Path)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_path()))
            .collect()
    }

    /// rocforge with the world's leading arguments (e.g. `--recipes recipes`) then `args`,
    /// the world's environment then `extra` (later entries win), not started.
    pub fn command_env(&self, extra: &[(&str, &Path)], args: &[&str]) -> Command {
        let mut env = self.env();
        env.extend_from_slice(extra);
        let mut full: Vec<&str> = self.lead.iter().map(String::as_str).collect();
        full.extend_from_slice(args);
        rocforge_command(&self.root, &env, &full)
    }
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_env(&[], args)
    }
    pub fn run_env(&self, extra: &[(&str, &Path)], args: &[&str]) -> Out {
        Out::from(
            self.command_env(extra, args)
                .output()
                .expect("run rocforge"),
        )
    }
    pub fn run(&self, args: &[&str]) -> Out {
        self.run_env(&[], args)
    }
    /// Runs and asserts success.
    pub fn ok(&self, args: &[&str]) -> Out {
        let o = self.run(args);
        assert_eq!(o.code, 0, "{args:?}:\n{}\n{}", o.stdout, o.stderr);
        o
    }
    /// Runs and asserts the exit code of an error (1); returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(
            o.code, 1,
            "{args:?} should fail:\n{}\n{}",
            o.stdout, o.stderr
        );
        o.stderr
    }

    /// Writes `text` to `rel` under the root, making its directories.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    /// [`World::write`] with mode 755.
    pub fn executable(&self, rel: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.write(rel, text);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// `key generate --out dir` in the world's environment; returns the public key's line.
    pub fn generate_key(&self, dir: &str) -> String {
        let o = Out::from(
            rocforge_command(&self.root, &self.env(), &["key", "generate", "--out", dir])
                .output()
                .expect("run rocforge"),
        );
        assert_eq!(o.code, 0, "key generate --out {dir}: {}", o.stderr);
        o.stdout.trim().to_string()
    }
    /// Writes the config `config` (under the root) trusting exactly `keys`.
    pub fn trust(&self, config: &str, keys: &[&str]) {
        let list: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
        self.write(config, &format!("[trust]\nkeys = [{}]\n", list.join(", ")));
    }
    /// A new pair in `dir`, trusted (alone) by the config `config`; returns its public key.
    pub fn trust_new_key(&self, dir: &str, config: &str) -> String {
        let public = self.generate_key(dir);
        self.trust(config, &[&public]);
        public
    }

    /// Where the test's git repositories go: origin/ under the root, served by the git daemon
    /// of [`Builder::git_server`] when there is one.
    pub fn origin(&self) -> PathBuf {
        self.root.join("origin")
    }
    /// The git daemon's URL (`git://127.0.0.1:PORT/`), under which `origin/NAME` is `NAME`.
    pub fn git_url(&self) -> String {
        self.git
            .as_ref()
            .expect("a world with Builder::git_server")
            .url()
    }
    /// Stops the git daemon: what was fetched must be had without the network.
    pub fn stop_git_server(&mut self) {
        assert!(self.git.take().is_some(), "no git server to stop");
    }
    /// Writes rocforge.toml's `[mirrors]`: the mappings [`Builder::git_mirror`] made, then
    /// `extra` (URL prefix, what serves it).
    pub fn mirrors(&self, extra: &[(&str, String)]) {
        let mut text = String::from("[mirrors]\n");
        let built = self.mirrors.iter().map(|(p, to)| (p.as_str(), to.as_str()));
        for (prefix, to) in built.chain(extra.iter().map(|(p, to)| (*p, to.as_str()))) {
            text.push_str(&format!("\"{prefix}\" = \"{to}\"\n"));
        }
        self.write("rocforge.toml", &text);
    }

    /// The recorded machines (see [`kfd::machines`]) under the root: m-gfx90c, m-gfx902,
    /// m-gfx1151 and m-none.
    pub fn machines(&self) {
        kfd::machines(&self.root);
    }
    /// One recorded machine with `gpu` under `rel`; returns its root.
    pub fn machine(&self, rel: &str, gpu: Option<kfd::Node>) -> PathBuf {
        let root = self.root.join(rel);
        kfd::write_machine(&root, gpu, None, None);
        root
    }
}

impl Builder {
    /// The test release (see [`test_release`]) with builder image `image`; commands get
    /// `--recipes recipes`.
    pub fn release(mut self, image: &str) -> Builder {
        self.release = Some(image.to_string());
        self.lead
            .splice(0..0, ["--recipes".into(), "recipes".into()]);
        self
    }
    /// For a world built once per test process and kept in a static (which is never dropped):
    /// its root is `$CARGO_TARGET_TMPDIR/<name>-<pid>`, and the roots of earlier processes that
    /// are gone are removed when it is built.
    pub fn shared(mut self, name: &str) -> Builder {
        self.shared = Some(name.to_string());
        self
    }
    /// A copy of the test catalog tests/fixtures/`name` (recipes/, patches/) under the root.
    pub fn catalog(mut self, name: &str) -> Builder {
        self.catalog = Some(name.to_string());
        self
    }
    /// The GPU targets of the release [`Builder::release`] writes, instead of gfx90c alone.
    pub fn arches(mut self, arches: &[&str]) -> Builder {
        self.arches = Some(arches.iter().map(|a| a.to_string()).collect());
        self
    }
    /// Arguments every command starts with (after `--recipes recipes` when there is a
    /// release), e.g. `--arch gfx90c`.
    pub fn args(mut self, args: &[&str]) -> Builder {
        self.lead.extend(args.iter().map(|a| a.to_string()));
        self
    }
    /// ROCFORGE_CONFIG is the file `rel` under the root, empty until something is trusted.
    pub fn config(mut self, rel: &str) -> Builder {
        self.config = Some(rel.to_string());
        self.env
            .push(("ROCFORGE_CONFIG".into(), Value::Under(rel.to_string())));
        self
    }
    /// ROCFORGE_STATE is state/ under the root (locally trusted keys, install receipts).
    pub fn state(self) -> Builder {
        self.under("ROCFORGE_STATE", "state")
    }
    /// CONTAINERS_CONF is the tests' podman configuration.
    pub fn containers(self) -> Builder {
        self.var("CONTAINERS_CONF", containers_conf())
    }
    /// `key` is the path `rel` under the root.
    pub fn under(mut self, key: &str, rel: &str) -> Builder {
        self.env.push((key.into(), Value::Under(rel.to_string())));
        self
    }
    /// `key` is `value` as written.
    pub fn var(mut self, key: &str, value: impl Into<PathBuf>) -> Builder {
        self.env.push((key.into(), Value::Verbatim(value.into())));
        self
    }
    /// A key pair in keys/ trusted by the config ([`Builder::config`], trust.toml when none
    /// was named).
    pub fn with_keys(mut self) -> Builder {
        if self.config.is_none() {
            self = self.config("trust.toml");
        }
        self.keys = true;
        self
    }

    /// A git daemon on 127.0.0.1 serving the repositories a test makes under
    /// [`World::origin`], at [`World::git_url`].
    pub fn git_server(mut self) -> Builder {
        self.git = true;
        self
    }
    /// rocforge.toml maps the URL prefix `prefix` to the git daemon ([`Builder::git_server`]),
    /// so recipes name the upstream URL and the mirror path is taken.
    pub fn git_mirror(mut self, prefix: &str) -> Builder {
        self.git = true;
        self.git_mirrors.push(prefix.to_string());
        self
    }

    pub fn build(self) -> World {
        let (tmp, root) = match &self.shared {
            Some(name) => (None, shared_root(name)),
            None => {
                let tmp = tempfile::tempdir().unwrap();
                let root = tmp.path().join("w");
                (Some(tmp), root)
            }
        };
        std::fs::create_dir_all(&root).unwrap();
        if let Some(name) = &self.catalog {
            rocforge::fsutil::copy_tree(&manifest().join("tests/fixtures").join(name), &root)
                .unwrap();
        }
        if let Some(image) = &self.release {
            let rel = test_release(&root, image);
            if let Some(arches) = &self.arches {
                let file = rel.join("release.toml");
                let text = std::fs::read_to_string(&file).unwrap();
                let list: Vec<String> = arches.iter().map(|a| format!("\"{a}\"")).collect();
                let new = text.replace(
                    "arches = [\"gfx90c\"]",
                    &format!("arches = [{}]", list.join(", ")),
                );
                assert_ne!(new, text, "test_release names its arches");
                std::fs::write(&file, new).unwrap();
            }
        }
        if let Some(config) = &self.config {
            std::fs::write(root.join(config), "").unwrap();
        }
        let env = self
            .env
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Under(rel) => root.join(rel),
                    Value::Verbatim(p) => p,
                };
                (k, v)
            })
            .collect();
        let git = self.git.then(|| {
            let origin = root.join("origin");
            std::fs::create_dir_all(&origin).unwrap();
            GitDaemon::start(&origin)
        });
        let mirrors = match &git {
            Some(daemon) => self
                .git_mirrors
                .iter()
                .map(|prefix| (prefix.clone(), daemon.url()))
                .collect(),
            None => Vec::new(),
        };
        let world = World {
            git,
            _tmp: tmp,
            root,
            env,
            lead: self.lead,
            mirrors,
        };
        if !world.mirrors.is_empty() {
            world.mirrors(&[]);
        }
        if self.keys {
            world.trust_new_key(KEYS, self.config.as_deref().unwrap());
        }
        world
    }
}

/// `$CARGO_TARGET_TMPDIR/<name>-<pid>`, empty, after removing those of processes that are
/// gone.
fn shared_root(name: &str) -> PathBuf {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let root = base.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let prefix = format!("{name}-");
    for e in std::fs::read_dir(&base).unwrap().flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = file
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<u32>().ok())
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    root
}

/// Gives a file's fixture (a `World` in its field `w`, beside what is particular to the file)
/// the World's paths and runners.
macro_rules! derefs_to_world {
    ($fx:ty) => {
        impl std::ops::Deref for $fx {
            type Target = $crate::common::World;
            fn deref(&self) -> &Self::Target {
                &self.w
            }
        }
    };
}
pub(crate) use derefs_to_world;
