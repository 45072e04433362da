//! Progress of long runs: the [`Progress`] hooks every pipeline reports
//! through (certify, verify --model, audit, study), and [`Bar`], which draws
//! them on stderr.
//!
//! [`Bar`]: progress on stderr for long runs: a bar with the matrices done, the
//! total, the elapsed time and an estimate of the time left, drawn only
//! when stderr is a terminal (never into a file or a pipe, so logs and
//! scripts see nothing), and cleared when the run ends.
//!
//! [`Bar`] implements [`Progress`], so any pipeline that
//! reports through that trait (`certify`, `verify --model`, `audit`) can
//! drive it; [`Bar::spinner`] is for a single long computation (`svd` of a
//! large matrix), showing what runs and for how long.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::arch::MatrixId;

/// Hooks a long run calls as it goes (a progress bar on a terminal, a log,
/// nothing). Called from several threads at once.
pub trait Progress: Sync {
    /// The run will certify `n` matrices.
    fn matrices_total(&self, _n: usize) {}
    /// One matrix is finished (certified or not).
    fn matrix_done(&self, _id: MatrixId) {}
    /// What the run is doing now (a stage, a tensor), for display.
    fn message(&self, _text: &str) {}
    /// A finished unit of a long run (one model of a study), said as a
    /// line above the bar; nothing by default (quiet, Python).
    fn line(&self, _text: &str) {}
    /// Whether to stop: asked before each matrix is started; once it says
    /// `true`, no further matrix is started, those under way finish, and the
    /// run ends with `CertifyError::Cancelled` (an interrupt in the Python
    /// module). Never stops a matrix half-way.
    fn cancelled(&self) -> bool {
        false
    }
}

/// A [`Progress`] that reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {}

/// How a front shows progress: a command asks it for a progress sink when
/// a long run starts, and drops the sink when the run ends.
pub trait Ui: Sync {
    /// A sink counting matrices (a bar on a terminal), labelled by the command.
    fn matrices(&self, _label: &str) -> Box<dyn Progress + '_> {
        Box::new(NoProgress)
    }
    /// A sink for one long computation (a spinner saying `message`).
    fn spinner(&self, _label: &str, _message: &str) -> Box<dyn Progress + '_> {
        Box::new(NoProgress)
    }
}

/// A [`Ui`] that shows nothing.
pub struct Silent;

impl Ui for Silent {}

/// A progress bar on stderr, or nothing (quiet, or stderr not a terminal).
pub struct Bar {
    pb: Option<ProgressBar>,
    quiet: bool,
}

/// Whether a bar would be drawn: not `quiet`, and stderr is a terminal.
pub(crate) fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

impl Bar {
    /// A bar counting matrices, labelled `label` (`certify`, `verify`, ...);
    /// drawn only when `wanted`. Its length is set by
    /// [`Progress::matrices_total`].
    pub fn matrices(label: &str, quiet: bool) -> Self {
        // Until the number of matrices is known: a spinner while the model
        // is read and its proxy matrices formed.
        Self::spinner(
            label,
            "reading the model and forming its proxy matrices",
            quiet,
        )
    }

    /// A spinner for one long computation, with the elapsed time and a
    /// message saying what runs; drawn only when `wanted`.
    pub fn spinner(label: &str, message: &str, quiet: bool) -> Self {
        if !wanted(quiet) {
            return Self { pb: None, quiet };
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{prefix} {spinner} {elapsed} elapsed: {wide_msg}")
                .expect("valid template"),
        );
        pb.set_prefix(label.to_string());
        pb.set_message(message.to_string());
        pb.enable_steady_tick(Duration::from_millis(120));
        Self {
            pb: Some(pb),
            quiet,
        }
    }

    /// Prints a line on stderr above the bar (the bar is redrawn after it).
    pub(crate) fn println(&self, line: &str) {
        match &self.pb {
            Some(pb) => pb.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Removes the bar from the terminal (also done on drop).
    pub(crate) fn finish(&self) {
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Progress for Bar {
    fn matrices_total(&self, n: usize) {
        if let Some(pb) = &self.pb {
            pb.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} matrices, {elapsed} elapsed, ETA {eta} {wide_msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            pb.set_message("");
            // A run over several models (`study`) starts again at 0.
            pb.set_length(n as u64);
            pb.set_position(0);
            pb.reset_eta();
        }
    }
    fn matrix_done(&self, id: MatrixId) {
        if let Some(pb) = &self.pb {
            pb.inc(1);
            pb.set_message(id.to_string());
        }
    }
    fn message(&self, text: &str) {
        if let Some(pb) = &self.pb {
            pb.set_message(text.to_string());
        }
    }
    fn line(&self, text: &str) {
        if !self.quiet {
            self.println(text);
        }
    }
}
