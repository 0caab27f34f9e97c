//! `<name>-tests`: a component's test client built as an artifact of its own.

use crate::diag::reader::Sp;

use super::Recipe;
use super::build::{BuildSystem, cmake_var};

impl Recipe {
    /// The suffix of a component's test-client artifact: `rocrand-tests`.
    pub const TESTS_SUFFIX: &'static str = "-tests";

    /// `<name>-tests`: the test client built as its own artifact, from the same source,
    /// patches and flags as the library (plus the test switches a `tests = false` line turned
    /// off). It depends on the library, so the library's content key is part of its hash input,
    /// and it keeps only what the library's tree lacks (the client, its CTestTestfile and its
    /// data), so at run time it uses the library artifact's shared libraries. None without a
    /// `[test]` table or for a build rocforge cannot switch (a copy).
    pub fn tests_artifact(&self) -> Option<Recipe> {
        let test = self.test.as_ref()?;
        let BuildSystem::Cmake {
            pre_configure,
            post_install,
        } = &self.build.system
        else {
            return None;
        };
        let mut r = self.clone();
        let name = format!("{}{}", self.name.value, Self::TESTS_SUFFIX);
        r.name = Sp::new(name.clone(), self.name.span.clone());
        r.summary = format!("the test client of {}", self.name.value);
        r.depends = std::iter::once(Sp::new(self.name.value.clone(), self.name.span.clone()))
            .chain(self.depends.iter().cloned())
            .collect();
        for a in &self.test_args {
            let var = cmake_var(a);
            match r.build.args.iter_mut().find(|b| cmake_var(b) == var) {
                Some(b) => *b = a.clone(),
                None => r.build.args.push(a.clone()),
            }
        }
        let keep = test.client.trim_end_matches('/');
        let prune = format!(
            "# Only what the library's tree lacks is this artifact's: the client, its\n\
             # CTestTestfile and its data. The library's files come from the library artifact.\n\
             keep={keep}\n\
             cd \"$DESTDIR$PREFIX\"\n\
             find . ! -type d | while IFS= read -r f; do\n\
             \x20 f=${{f#./}}\n\
             \x20 case \"$f\" in \"$keep\"|\"$keep\"/*) continue ;; esac\n\
             \x20 if [ -e \"$ROCFORGE_DEPS/$f\" ] || [ -L \"$ROCFORGE_DEPS/$f\" ]; then rm -f \"$f\"; fi\n\
             done\n\
             find . -depth -mindepth 1 -type d -empty -exec rmdir {{}} \\;\n\
             if [ ! -e \"$keep\" ]; then\n\
             \x20 echo \"{name}: the build installed no $keep: is the test client switched on?\" >&2\n\
             \x20 exit 1\n\
             fi\n",
            keep = crate::process::shell_quote(keep),
        );
        r.build.system = BuildSystem::Cmake {
            pre_configure: pre_configure.clone(),
            post_install: Some(match post_install {
                Some(p) => format!("{p}\n{prune}"),
                None => prune,
            }),
        };
        r.tests_apart = false;
        r.test_args = Vec::new();
        if !self.test_arch_vars.is_empty() {
            r.build.device_code = true;
            r.build.arch_vars = self.test_arch_vars.clone();
            r.test_arch_vars = Vec::new();
        }
        Some(r)
    }
}
