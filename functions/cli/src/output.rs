//! How the CLI prints, for every command: JSON on stdout with `--json`, otherwise
//! aligned summary tables; progress spinners (hidden when stderr is not a terminal or
//! `--json` is given) and the one-line error. What each command prints lives with the
//! command.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use eqdv::progress::{Progress, ProgressEvent, ProgressStep};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::json;

/// `println!` for stdout that a closed pipe does not turn into a panic: when the reader
/// stops reading (`eqdv rows | head`), the process ends quietly with status 0, as
/// command-line tools do; any other write error ends it with status 1 and one line.
macro_rules! out {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use out;

/// Writes to stdout; see [`out!`].
pub fn write_stdout(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        stdout_failed(&e);
    }
}

pub fn stdout_failed(error: &std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(crate::exit::OK));
    }
    eprintln!("error: writing to stdout: {error}");
    std::process::exit(i32::from(crate::exit::FAILED));
}

/// A two-column summary table.
#[derive(Default)]
pub struct Summary {
    title: String,
    rows: Vec<(String, String)>,
}

impl Summary {
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, key: impl Into<String>, value: impl ToString) -> &mut Self {
        self.rows.push((key.into(), value.to_string()));
        self
    }

    pub fn print(&self) {
        let width = self.rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        out!("{}", self.title);
        out!("{}", "-".repeat(self.title.len().max(8)));
        for (k, v) in &self.rows {
            out!("  {k:<width$}  {v}");
        }
        out!();
    }
}

/// A table with a header row.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out!("  {}", parts.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in rows {
        line(row.clone());
    }
    out!();
}

/// A spinner for a long phase; a no-op when `quiet`.
pub fn spinner(message: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A bar over `total_bytes` of work, with the rate and the time left; a no-op when
/// `quiet` (indicatif also draws nothing when stderr is not a terminal).
pub fn progress_bytes(total_bytes: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total_bytes);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} ({binary_bytes_per_sec}, {eta} left)",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// A spinner for a conversion that turns into a bar over the data files it reads (the
/// scan of each key pass and the key index's build add theirs as they start), with
/// files, bytes and the time left; `progress` is what the engine reports to. Hidden
/// when `quiet`.
pub fn conversion_progress(message: &str, quiet: bool) -> (ProgressBar, Progress) {
    let bar = spinner(message, quiet);
    if quiet {
        return (bar, Progress::default());
    }
    let files = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let message = message.to_string();
    let listener = bar.clone();
    let progress = Progress::new(move |event| {
        let (read, total) = (&files.0, &files.1);
        match event {
            ProgressEvent::Reading { step, files, bytes } => {
                let first = total.fetch_add(files, Ordering::Relaxed) == 0;
                if first {
                    listener.set_length(0);
                }
                listener.inc_length(bytes);
                listener.set_prefix(format!(
                    "{}/{}",
                    read.load(Ordering::Relaxed),
                    total.load(Ordering::Relaxed)
                ));
                let what = match step {
                    ProgressStep::Scan => "reading key columns",
                    ProgressStep::IndexBuild => "building the key index",
                };
                listener.set_message(format!("{message}: {what}"));
                if first {
                    // From a spinner to a bar, once there is something to measure.
                    if let Ok(style) = ProgressStyle::with_template(
                        "{msg} [{bar:30}] {prefix} files, {bytes}/{total_bytes} ({eta} left)",
                    ) {
                        listener.set_style(style.progress_chars("=> "));
                    }
                }
            }
            ProgressEvent::Read { bytes, .. } => {
                let done = read.fetch_add(1, Ordering::Relaxed) + 1;
                listener.inc(bytes);
                let total = total.load(Ordering::Relaxed);
                listener.set_prefix(format!("{done}/{total}"));
            }
        }
    });
    (bar, progress)
}

/// Pretty JSON on stdout.
pub fn print_json(value: &impl Serialize) -> Result<()> {
    out!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub fn fmt_opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// A failed command: the error line on stderr and, with `--json`, as an object on stdout.
pub fn print_error(e: &anyhow::Error, json: bool) {
    let line = error_line(e);
    if json {
        let msg = json!({ "error": line, "detail": format!("{e:#}") });
        out!("{msg}");
    }
    eprintln!("error: {line}");
}

/// The error for operators, on one line: the context chain down to the first engine
/// error, whose message already names the operation, the table or file and the cause.
/// What lies below it (the raw SDK or storage error, with HTTP headers) is only in the
/// debug log and the JSON `detail`.
fn error_line(e: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in e.chain() {
        parts.push(cause.to_string());
        if cause.downcast_ref::<eqdv::Error>().is_some() {
            break;
        }
    }
    parts
        .join(": ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversions_reports_move_its_bar() {
        let (bar, progress) = conversion_progress("converting db.t", false);
        progress.report(ProgressEvent::Reading {
            step: ProgressStep::Scan,
            files: 2,
            bytes: 100,
        });
        progress.report(ProgressEvent::Read {
            step: ProgressStep::Scan,
            bytes: 40,
        });
        // A second key pass reads its files again: the bar grows.
        progress.reading(ProgressStep::Scan, [60, 40].into_iter());
        assert_eq!(bar.length(), Some(200));
        assert_eq!(bar.position(), 40);
        assert_eq!(bar.prefix(), "1/4");
        assert_eq!(bar.message(), "converting db.t: reading key columns");
        bar.finish_and_clear();

        // Quiet (--json): nothing listens.
        let (_, progress) = conversion_progress("converting db.t", true);
        assert_eq!(format!("{progress:?}"), "Progress(off)");
    }
}
