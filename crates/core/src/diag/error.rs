//! What a use case fails with: one diagnostic, or every problem found (an invalid catalog).
//! Every wing's error with a [`Hint`](super::Hint) becomes one with `?`; one that carries
//! diagnostics of its own (an invalid catalog's) converts beside its type.

use std::fmt::Display;

use serde::Serialize;

use crate::diag::{Diagnostic, Diagnostics};

#[derive(Debug, Clone)]
pub enum Error {
    Diagnostics(Diagnostics),
    One(Diagnostic),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The schema of a failed command's JSON (`--format json`).
pub const ERROR_SCHEMA: &str = "rocforge.error/1";

/// What a command that failed prints under `--format json` (exit status 1).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Failed {
    pub schema: &'static str,
    /// Always false.
    #[schemars(extend("const" = false))]
    pub ok: bool,
    /// Every problem found: more than one for an invalid catalog.
    pub errors: Vec<Problem>,
}

/// One problem, as the text on stderr shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Problem {
    pub message: String,
    /// `file:line:col` of the offending text (the file alone when no place in it is known);
    /// null when the problem is in no file.
    pub location: Option<String>,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Problem {
    fn of(d: &Diagnostic) -> Self {
        Problem {
            message: d.message.clone(),
            location: d.position(),
            hint: d.hint.clone(),
        }
    }
}

impl Error {
    /// A lower layer's error with the hint that tells the user what to do about it.
    pub fn hinted(e: impl Display, hint: impl Into<String>) -> Self {
        Error::One(Diagnostic::new(e.to_string()).hint(hint))
    }

    /// The error as `--format json` prints it on stdout, so a script reading JSON gets JSON
    /// when a command fails too: each problem's message, its `file:line:col` and its hint.
    pub fn report(&self) -> Failed {
        let errors = match self {
            Error::Diagnostics(d) => d.iter().map(Problem::of).collect(),
            Error::One(d) => vec![Problem::of(d)],
        };
        Failed {
            schema: ERROR_SCHEMA,
            ok: false,
            errors,
        }
    }

    /// The text the binary prints for this error.
    pub fn render(&self, color: bool) -> String {
        match self {
            Error::Diagnostics(d) => {
                let mut out = String::new();
                for diag in d.iter() {
                    out += &diag.render(color);
                    out += "\n\n";
                }
                out += &format!("error: {} problem(s) found\n", d.len());
                out
            }
            Error::One(d) => d.render(color) + "\n",
        }
    }
}

impl From<Diagnostic> for Error {
    fn from(d: Diagnostic) -> Self {
        Error::One(d)
    }
}

impl From<Diagnostics> for Error {
    fn from(d: Diagnostics) -> Self {
        Error::Diagnostics(d)
    }
}

impl<E: super::Hint> From<E> for Error {
    fn from(e: E) -> Self {
        Error::hinted(&e, e.hint())
    }
}
