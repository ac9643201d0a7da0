//! bench: measures autoforge side by side with its references and writes one
//! markdown report with SVG charts.
//!
//! `cargo run --release -p autoforge-tests --bin bench -- --report docs/benchmarks.md`
//! runs every section; `--only ingest` runs some; `--quick` checks the bench
//! itself at a small size. Charts go to `benchmarks/` (`CHART_DIR`) beside
//! the report.

use std::path::PathBuf;

use anyhow::{Context, bail};
use autoforge_tests::bench::{
    BenchOptions, CHART_DIR, Report, Section, cycle, economy, ingest, scale,
};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "Benchmarks autoforge against its references and writes a report")]
struct Args {
    /// Where the markdown report is written.
    #[arg(long, default_value = "docs/benchmarks.md")]
    report: PathBuf,
    /// Comma-separated sections to run (default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Repetitions of each measurement (the report gives median and spread).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Seconds per timed load run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Small sizes, one repetition: checks that the bench works.
    #[arg(long)]
    quick: bool,
}

/// Every section, in report order.
const SECTIONS: &[&str] = &["ingest", "economy", "cycle", "scale"];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    for name in &args.only {
        if !SECTIONS.contains(&name.as_str()) {
            bail!(
                "unknown section {name:?}; the sections are {}",
                SECTIONS.join(", ")
            );
        }
    }
    let report_dir = args
        .report
        .parent()
        .map(PathBuf::from)
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    let chart_dir = report_dir.join(CHART_DIR);
    std::fs::create_dir_all(&chart_dir)
        .with_context(|| format!("creating {}", chart_dir.display()))?;
    let options = BenchOptions {
        repeats: if args.quick { 1 } else { args.repeats.max(1) },
        seconds: if args.quick { 1 } else { args.seconds.max(1) },
        quick: args.quick,
        chart_dir,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut report = Report::default();
    for &name in SECTIONS {
        if !args.only.is_empty() && !args.only.iter().any(|only| only == name) {
            continue;
        }
        eprintln!("bench: {name}");
        let sections: Vec<Section> = match name {
            "ingest" => vec![runtime.block_on(ingest::run(&options))?],
            "economy" => vec![runtime.block_on(economy::run(&options))?],
            "cycle" => vec![runtime.block_on(cycle::run(&options))?],
            // Scale, recovery and beyond one host share their fleets.
            "scale" => runtime.block_on(scale::run(&options))?,
            other => bail!("section {other} has no runner"),
        };
        report.sections.extend(sections);
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    report.write(&args.report, &command)?;
    eprintln!("bench: wrote {}", args.report.display());
    Ok(())
}
