//! The `bench` binary's building blocks: each benchmark is a section that
//! measures one thing side by side with its references and returns markdown
//! plus the charts it drew; `Report` puts the sections into one file.
//!
//! Figures are medians of repeated runs with their spread, because the
//! machine is shared and noisy; nothing here asserts a timing.

pub mod chart;
pub mod cycle;
pub mod economy;
pub mod idle;
pub mod ingest;
pub mod procstat;
pub mod scale;
pub mod stats;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Runs one of the measuring tools (wrk, pgbench, psql, callgrind's) to its end: its
/// standard output, or an error with both streams when it fails. `source`
/// says where the tool comes from, for when it cannot start.
pub(crate) async fn tool_output(
    command: &mut tokio::process::Command,
    source: &str,
) -> anyhow::Result<String> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let output = command
        .output()
        .await
        .with_context(|| format!("starting {program} ({source})"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "{program} failed ({}): {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(stdout)
}

/// The folder beside the report that holds its charts.
pub const CHART_DIR: &str = "benchmarks";

/// How long and how often each measurement runs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Repetitions of each measurement; the report gives their median and spread.
    pub repeats: usize,
    /// Length of one timed load run.
    pub seconds: u64,
    /// A smaller size everywhere, to check that the bench itself works.
    pub quick: bool,
    /// The folder charts are written to (`CHART_DIR` beside the report).
    pub chart_dir: PathBuf,
}

impl BenchOptions {
    /// Where the chart file `name` is written.
    pub fn chart_path(&self, name: &str) -> PathBuf {
        self.chart_dir.join(name)
    }
}

/// One section of the report.
#[derive(Debug, Clone)]
pub struct Section {
    /// The section's heading.
    pub title: String,
    /// Its body: tables and the prose that says what was measured and how.
    pub markdown: String,
    /// Names of the SVG files this section wrote into `CHART_DIR`.
    pub charts: Vec<String>,
}

/// The whole report: a header naming the machine and build, then each section.
#[derive(Debug, Default)]
pub struct Report {
    pub sections: Vec<Section>,
}

impl Report {
    /// Renders the report as markdown, linking each chart by relative path.
    pub fn render(&self, command: &str) -> String {
        let mut out = String::from("# Benchmarks\n\n");
        out.push_str(&format!(
            "Produced by `{command}` on {} ({} cores), {}.\n\
             Every comparison below was measured side by side in the same run.\n\n",
            host_name(),
            std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
            git_head(),
        ));
        for section in &self.sections {
            out.push_str(&format!(
                "## {}\n\n{}\n",
                section.title,
                section.markdown.trim_end()
            ));
            for chart in &section.charts {
                out.push_str(&format!("\n![{chart}]({CHART_DIR}/{chart})\n"));
            }
            out.push('\n');
        }
        out
    }

    /// Writes the rendered report to `path`.
    pub fn write(&self, path: &Path, command: &str) -> anyhow::Result<()> {
        std::fs::write(path, self.render(command))
            .with_context(|| format!("writing the report {}", path.display()))
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "this machine".to_owned())
}

fn git_head() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(crate::repo_root())
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| format!("commit {}", String::from_utf8_lossy(&output.stdout).trim()))
        .unwrap_or_else(|| "an unknown commit".to_owned())
}
