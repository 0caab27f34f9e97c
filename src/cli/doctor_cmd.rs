//! `doctor`: the library's checks of this machine, as a table or JSON.

use std::process::ExitCode;

use super::{Format, Global, Result, exit_code, print_json};
use rocforge::app::doctor;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Components whose plan to check against [default: the whole release line]
    components: Vec<String>,
    #[command(flatten)]
    runtime: super::RuntimeArg,
}

pub fn doctor(g: &Global, a: &DoctorArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    let report = doctor::doctor(&session, &a.components, a.runtime.runtime.choice())?;
    if g.format == Format::Json {
        print_json(&report);
    } else {
        for c in &report.checks {
            let status = if c.ok { "ok  " } else { "FAIL" };
            println!("{status} {:<18} {}", c.check, c.detail);
        }
        for n in &report.notes {
            println!("note {:<18} {}", n.check, n.detail);
        }
    }
    Ok(exit_code(report.ok))
}
