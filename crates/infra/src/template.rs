//! The one way rocforge renders text from a template (minijinja): the release workflow, the
//! Nix overlay and the test report. Every template is embedded in the binary, so a template that
//! does not render is a mistake in rocforge (caught by the tests that render each), never
//! something a user's input can cause; inserted values are data, not template code.

use minijinja::{AutoEscape, Environment, UndefinedBehavior, syntax::SyntaxConfig};

#[derive(Debug, thiserror::Error)]
#[error("cannot render the {what} template: {source:#}")]
pub struct RenderError {
    pub what: &'static str,
    #[source]
    pub source: minijinja::Error,
}

/// How a template marks its variables and comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimiters {
    /// Jinja's own `{{ … }}` and `{# … #}`.
    Jinja,
    /// `<{ … }>` and `<# … #>`, for text full of GitHub's `${{ … }}` and bash's `${#a[@]}`;
    /// statements stay `{% … %}`.
    Angle,
}

/// An environment holding `templates` (name, text): lines holding only a tag leave nothing, the
/// text keeps its final newline, an undefined name is an error. Templates whose name ends in
/// `.html` escape every value they insert (HTML), the others insert text as it is.
pub fn environment(
    templates: &[(&'static str, &'static str)],
    delimiters: Delimiters,
) -> Result<Environment<'static>, RenderError> {
    let what = templates.first().map_or("", |t| t.0);
    let err = |source| RenderError { what, source };
    let mut syntax = SyntaxConfig::builder();
    if delimiters == Delimiters::Angle {
        syntax
            .variable_delimiters("<{", "}>")
            .comment_delimiters("<#", "#>");
    }
    let syntax = syntax
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build()
        .map_err(err)?;
    let mut env = Environment::new();
    env.set_syntax(syntax);
    // Set before the templates are added: minijinja fixes a template's escaping when it is added.
    env.set_auto_escape_callback(|name| {
        if name.ends_with(".html") {
            AutoEscape::Html
        } else {
            AutoEscape::None
        }
    });
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    for (name, source) in templates {
        env.add_template(name, source)
            .map_err(|source| RenderError { what: name, source })?;
    }
    Ok(env)
}

/// Renders template `name` of `env` with `context`.
pub fn render<C: serde::Serialize>(
    env: &Environment<'_>,
    name: &'static str,
    context: C,
) -> Result<String, RenderError> {
    env.get_template(name)
        .and_then(|t| t.render(minijinja::Value::from(minijinja::value::Serde(context))))
        .map_err(|source| RenderError { what: name, source })
}
