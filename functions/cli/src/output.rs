//! Human output: aligned summary tables and progress spinners (hidden when stderr is
//! not a terminal or `--json` is given).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

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
        println!("{}", self.title);
        println!("{}", "-".repeat(self.title.len().max(8)));
        for (k, v) in &self.rows {
            println!("  {k:<width$}  {v}");
        }
        println!();
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
        println!("  {}", parts.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in rows {
        line(row.clone());
    }
    println!();
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
