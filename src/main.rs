//! The `rocforge` command line. Parses flags, calls the library, prints.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    // The shell's completion script runs the binary with COMPLETE set: answer and exit.
    cli::complete::answer_if_asked();
    let args = cli::parse();
    let color = args.global.color.stderr();
    let json = args.global.format == cli::Format::Json;
    cli::term::init_logging(args.global.verbose, color);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            // Scripts read stdout; people read stderr: JSON for one, the rendering for the other.
            if json {
                cli::print_json(&e.report());
            }
            eprint!("{}", e.render(color));
            ExitCode::from(1)
        }
    }
}

/// `rocforge list | head` closes stdout early; print! then panics with EPIPE. Exit the way a
/// SIGPIPE'd command does (status 141, no message) instead of printing a backtrace. SIGPIPE stays
/// ignored so a closed socket or pipe to a child is still an error the code handles.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}
