//! `plan`: the plan as text, JSON or a GitHub Actions matrix, or one step's hash input.

use std::process::ExitCode;

use super::{Format, Global, Result};
use rocforge::diag::Diagnostic;
use rocforge::plan::render;

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Components to build (with their dependencies) [default: the whole release line]
    components: Vec<String>,
    /// Print the hash input of one component instead of the plan
    #[arg(long, value_name = "COMPONENT")]
    explain: Option<String>,
    #[command(flatten)]
    runtime: super::RuntimeArg,
    /// Replace a directory of a component's source with your own: COMPONENT:PATH=DIR
    #[arg(long, value_name = "SPEC")]
    overlay: Vec<String>,
}

pub fn plan_cmd(g: &Global, a: &PlanArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    session.plan_inputs()?;
    let overlays = session.overlays(&a.overlay)?;
    let runtime = a.runtime.runtime.kind();
    let image = session.default_runtime_image(runtime)?;
    let plan = session.plan(&a.components, runtime, image, overlays)?;
    if let Some(c) = &a.explain {
        let catalog = &session.catalog;
        let step = plan.step(c).ok_or_else(|| {
            if catalog.get(c).is_some() {
                Diagnostic::new(format!("{c} is not part of this plan"))
                    .hint(format!("plan it directly: rocforge plan {c} --explain {c}"))
            } else {
                catalog.unknown_component(c)
            }
        })?;
        match g.format {
            Format::Json => println!(
                "{}",
                serde_json::to_string_pretty(&step.hash_input).unwrap_or_default()
            ),
            _ => print!("{}", render::explain(step)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    match g.format {
        Format::Text => print!("{}", render::text(&plan)),
        Format::Json => print!("{}", render::json(&plan)),
        Format::GithubMatrix => print!("{}", render::github_matrix(&plan)),
    }
    Ok(ExitCode::SUCCESS)
}
