//! What a process has cost, read from `/proc`: CPU time of the process
//! itself apart from its waited-for children (git, bwrap, agents), and its
//! peak resident memory.
//!
//! The cycle, scale and recovery sections read these for the `autoforge
//! serve` process they start, so the controller's own cost is reported
//! apart from the tools it runs.

use std::time::Duration;

use anyhow::{Context, bail};

/// CPU time of one process, split into its own and its reaped children's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// utime + stime: the process's own threads.
    pub own: Duration,
    /// cutime + cstime: children it has waited for (and their children).
    pub children: Duration,
}

impl CpuTimes {
    /// What was spent between `earlier` and `self` (never negative).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            own: self.own.saturating_sub(earlier.own),
            children: self.children.saturating_sub(earlier.children),
        }
    }
}

/// Reads the CPU times of `pid` from `/proc/<pid>/stat`.
pub fn cpu_times(pid: u32) -> anyhow::Result<CpuTimes> {
    parse_stat(&read_proc(pid, "stat")?, CLOCK_TICKS_PER_SECOND)
}

/// CPU time of a server and its live direct children (Postgres: the
/// postmaster and its backends): the server's own and reaped children's
/// time plus each live child's own. A backend that exits meanwhile moves
/// from the second part to the first, so the total only grows.
pub fn server_cpu(pid: u32) -> anyhow::Result<Duration> {
    let server = cpu_times(pid)?;
    let mut total = server.own + server.children;
    for entry in std::fs::read_dir("/proc").context("listing /proc")? {
        let Some(child) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may end between the listing and the read.
        let Ok(text) = read_proc(child, "stat") else {
            continue;
        };
        if parent_in_stat(&text) == Some(pid) {
            total += parse_stat(&text, CLOCK_TICKS_PER_SECOND)?.own;
        }
    }
    Ok(total)
}

/// CPU time the whole machine spent busy so far (every core, every
/// process and the kernel's own threads: the first line of `/proc/stat`,
/// all but idle and iowait). Short-lived processes nobody waits for, and
/// kernel work such as tearing down a sandbox's namespaces, show up here
/// and in no process's times.
pub fn machine_busy() -> anyhow::Result<Duration> {
    let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    parse_machine_busy(&text, CLOCK_TICKS_PER_SECOND)
}

fn parse_machine_busy(text: &str, ticks_per_second: u64) -> anyhow::Result<Duration> {
    let line = text
        .lines()
        .find(|line| line.starts_with("cpu "))
        .context("no cpu line in /proc/stat")?;
    let mut busy = 0u64;
    // user nice system idle iowait irq softirq steal (guest time is
    // already inside user and nice).
    for (index, raw) in line.split_whitespace().skip(1).take(8).enumerate() {
        let ticks: u64 = raw
            .parse()
            .with_context(|| format!("/proc/stat cpu field {raw:?}"))?;
        if !matches!(index, 3 | 4) {
            busy += ticks;
        }
    }
    Ok(Duration::from_millis(busy * 1000 / ticks_per_second))
}

/// Field 4 (the parent's pid) of a stat line.
fn parent_in_stat(text: &str) -> Option<u32> {
    let (_, rest) = text.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Peak and current resident set size of `pid`, in bytes (`VmHWM`, `VmRSS`).
pub fn memory(pid: u32) -> anyhow::Result<Memory> {
    let text = read_proc(pid, "status")?;
    Ok(Memory {
        peak_rss: status_kib(&text, "VmHWM:")? * 1024,
        rss: status_kib(&text, "VmRSS:")? * 1024,
    })
}

/// Resident memory of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// The high-water mark since the process started.
    pub peak_rss: u64,
    /// Now.
    pub rss: u64,
}

/// The text of `/proc/<pid>/<file>`.
fn read_proc(pid: u32, file: &str) -> anyhow::Result<String> {
    let path = format!("/proc/{pid}/{file}");
    std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))
}

/// Linux reports stat times in clock ticks; USER_HZ is 100 on every
/// architecture Linux exposes to user space, so no libc call is needed.
const CLOCK_TICKS_PER_SECOND: u64 = 100;

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses
/// and may hold spaces or parentheses, so fields are counted after the last
/// `)`: utime, stime, cutime, cstime are fields 14–17.
fn parse_stat(text: &str, ticks_per_second: u64) -> anyhow::Result<CpuTimes> {
    let Some((_, rest)) = text.rsplit_once(')') else {
        bail!("no command name in a stat line: {text:?}");
    };
    // `rest` starts at field 3 (state), so field N is at index N - 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |number: usize| -> anyhow::Result<u64> {
        let raw = fields
            .get(number - 3)
            .with_context(|| format!("stat field {number} missing"))?;
        raw.parse::<u64>()
            .with_context(|| format!("stat field {number} is {raw:?}"))
    };
    let ticks = |total: u64| Duration::from_millis(total * 1000 / ticks_per_second);
    Ok(CpuTimes {
        own: ticks(field(14)? + field(15)?),
        children: ticks(field(16)? + field(17)?),
    })
}

fn status_kib(text: &str, key: &str) -> anyhow::Result<u64> {
    let line = text
        .lines()
        .find(|line| line.starts_with(key))
        .with_context(|| format!("no {key} in a status file"))?;
    let value = line[key.len()..].trim().trim_end_matches("kB").trim();
    value
        .parse::<u64>()
        .with_context(|| format!("{key} is {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_busy_time_counts_everything_but_idle_and_iowait() {
        let text = "cpu  100 20 300 5000 70 8 9 10 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        let busy = parse_machine_busy(text, 100).expect("parse");
        assert_eq!(
            busy,
            Duration::from_millis((100 + 20 + 300 + 8 + 9 + 10) * 10)
        );
        assert!(parse_machine_busy("intr 5\n", 100).is_err());
    }

    #[test]
    fn stat_fields_are_counted_after_a_command_name_with_spaces_and_parens() {
        let line = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 150 50 30 20 0 0";
        let times = parse_stat(line, 100).expect("parse");
        assert_eq!(times.own, Duration::from_millis(2000));
        assert_eq!(times.children, Duration::from_millis(500));
    }

    #[test]
    fn the_parent_is_read_after_the_command_name() {
        let line = "42 (a (b) c) S 17 2 3 4 5 6 7 8 9 10 150 50 30 20 0 0";
        assert_eq!(parent_in_stat(line), Some(17));
        assert_eq!(parent_in_stat("42 no name"), None);
    }

    #[test]
    fn a_truncated_stat_line_is_an_error() {
        assert!(parse_stat("42 (x) S 1 2", 100).is_err());
    }

    #[test]
    fn this_process_has_a_peak_rss_at_least_its_current_one() {
        let memory = memory(std::process::id()).expect("read own status");
        assert!(memory.peak_rss >= memory.rss && memory.rss > 0);
    }

    #[test]
    fn cpu_spent_by_this_process_shows_in_its_own_time() {
        let before = cpu_times(std::process::id()).expect("read own stat");
        // Spin until a clock tick is charged (or give up after a minute on
        // a starved machine); the assertion is on accounting, not speed.
        let started = std::time::Instant::now();
        let mut x = 0u64;
        let mut spent = CpuTimes::default();
        while spent.own == Duration::ZERO && started.elapsed() < Duration::from_secs(60) {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            spent = cpu_times(std::process::id())
                .expect("read own stat")
                .since(&before);
        }
        assert!(spent.own > Duration::ZERO, "spent {spent:?}");
    }
}
