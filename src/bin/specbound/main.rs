//! The `specbound` command line: a thin front over the command layer
//! (`specbound::cmd`). It parses the arguments (`args`), hands the request
//! to the command, prints the rendered report and exits with its code.
//!
//! Exit codes: 0 = certified / holds / consistent / unchanged; 1 =
//! inconclusive, a failed check or refuted quantity (verify), an
//! inconsistent claim (audit) or a certain change (diff), with the reason
//! printed; 2 = error (bad input or usage); 3 = undecided: audit claims
//! undecided or verify quantities unconfirmed (none wrong).

mod alloc;
mod args;

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

use args::{Cli, Command, Request};
use specbound::cmd::{self, CmdError, Report, Ui};
use specbound::linalg::backend;
use specbound::progress::{Bar, Progress};

/// Progress on stderr: a bar or spinner on a terminal, nothing with `--quiet`.
struct Terminal {
    quiet: bool,
}

impl Ui for Terminal {
    fn matrices(&self, label: &str) -> Box<dyn Progress + '_> {
        Box::new(Bar::matrices(label, self.quiet))
    }
    fn spinner(&self, label: &str, message: &str) -> Box<dyn Progress + '_> {
        Box::new(Bar::spinner(label, message, self.quiet))
    }
}

/// Runs a request through its command.
fn dispatch(req: Request, ui: &dyn Ui) -> Result<Box<dyn Report>, CmdError> {
    Ok(match req {
        Request::Svd(r) => Box::new(cmd::svd::run(r, ui)?),
        Request::Spectra(r) => Box::new(cmd::spectra::run(&r, ui)?),
        Request::Certify(r) => Box::new(cmd::certify::run(&r, ui)?),
        Request::Merge(r) => Box::new(cmd::merge::run(&r)?),
        Request::Study(r) => Box::new(cmd::study::run(&r, ui)?),
        Request::Report(r) => Box::new(cmd::report::run(&r)?),
        Request::Inspect(r) => Box::new(cmd::inspect::run(&r)?),
        Request::Verify(r) => Box::new(cmd::verify::run(&r, ui)?),
        Request::Audit(r) => Box::new(cmd::audit::run(&r, ui)?),
        Request::Diff(r) => Box::new(cmd::diff::run(&r)?),
    })
}

/// The shell completions or the manual page (both about this definition).
fn about_the_cli(command: &Command) -> std::io::Result<Vec<u8>> {
    let mut def = Cli::command();
    let mut out = Vec::new();
    match command {
        Command::Completions(c) => {
            let shell = c.shell;
            clap_complete::generate(shell, &mut def, "specbound", &mut out);
        }
        _ => {
            // One page: the program's sections (no list of `specbound-svd(1)`
            // pages, which do not exist), a list of the commands, then per
            // command its synopsis and options.
            let man = clap_mangen::Man::new(def.clone());
            man.render_title(&mut out)?;
            man.render_name_section(&mut out)?;
            man.render_synopsis_section(&mut out)?;
            man.render_description_section(&mut out)?;
            man.render_options_section(&mut out)?;
            out.extend_from_slice(b".SH COMMANDS\n");
            for sub in def.get_subcommands() {
                let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
                out.extend_from_slice(
                    format!(
                        ".TP\n\\fB{}\\fR\n{} (section SPECBOUND {} below)\n",
                        sub.get_name(),
                        about.replace('\\', "\\\\"),
                        sub.get_name().to_uppercase()
                    )
                    .as_bytes(),
                );
            }
            man.render_extra_section(&mut out)?;
            man.render_version_section(&mut out)?;
            for sub in def.get_subcommands() {
                let name = sub.get_name().to_string();
                let sub = sub.clone().bin_name(format!("specbound {name}"));
                out.extend_from_slice(
                    format!(".SH \"SPECBOUND {}\"\n", name.to_uppercase()).as_bytes(),
                );
                let man = clap_mangen::Man::new(sub);
                man.render_synopsis_section(&mut out)?;
                man.render_description_section(&mut out)?;
                man.render_options_section(&mut out)?;
            }
        }
    }
    Ok(out)
}

/// Writes stdout; a full disk or closed descriptor is one error line and
/// exit 2, never a panic (a closed pipe ends the process by SIGPIPE first).
fn print_out(bytes: &[u8]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(&format!("error: cannot write to standard output: {e}"));
            ExitCode::from(2)
        }
    }
}

/// One line on stderr, `specbound: ` first; a failing stderr is ignored
/// (there is nowhere left to say it).
fn say(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "specbound: {line}");
}

/// A usage error as one line: clap's first line (the tip and usage lines follow it).
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return print_out(e.to_string().as_bytes());
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = write!(std::io::stderr().lock(), "{e}");
        return ExitCode::from(2);
    }
    say(&format!("{} (see --help)", usage_line(&e.to_string())));
    ExitCode::from(2)
}

/// clap's message on one line: its first line with what follows it up to
/// the usage (the missing arguments, the nearest subcommand or flag, the
/// valid values), each part once.
fn usage_line(text: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Usage:") || t.starts_with("For more information") {
            break;
        }
        if !t.is_empty() {
            parts.push(t.trim_start_matches("error: ").to_string());
        }
    }
    if parts.is_empty() {
        return "invalid arguments".into();
    }
    let first = parts.remove(0);
    if parts.is_empty() {
        first
    } else if first.ends_with(':') {
        format!("{first} {}", parts.join(", "))
    } else {
        format!("{first}; {}", parts.join("; "))
    }
}

fn main() -> ExitCode {
    alloc::init();
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return usage_error(e),
    };
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    if let (Command::Study(a), Some(m)) = (&mut cli.command, matches.subcommand_matches("study")) {
        a.place(m);
    }
    if matches!(cli.command, Command::Completions(_) | Command::Man) {
        return match about_the_cli(&cli.command) {
            Ok(bytes) => print_out(&bytes),
            Err(e) => {
                say(&format!("error: {e}"));
                ExitCode::from(2)
            }
        };
    }
    // The device is the run's, chosen before anything is read.
    if let Some(device) = cli.command.device() {
        match backend::select(device) {
            Ok(None) => {}
            Ok(Some(fallback)) => say(&fallback),
            Err(e) => {
                say(&format!("error: {e}"));
                return ExitCode::from(2);
            }
        }
    }
    let (json, style, ui) = (
        cli.command.json(),
        cli.intervals,
        Terminal { quiet: cli.quiet },
    );
    let report = match cli.command.request(style).and_then(|r| dispatch(r, &ui)) {
        Ok(r) => r,
        Err(e) => {
            say(&format!("error: {e}"));
            return ExitCode::from(2);
        }
    };
    let out = cmd::render(&*report, json, style);
    for line in &out.notices {
        say(line);
    }
    let code = print_out(out.stdout.as_bytes());
    if code != ExitCode::SUCCESS {
        return code;
    }
    if let Some(why) = &out.reason {
        say(why);
    }
    ExitCode::from(out.exit.code())
}
