//! Cycle cost measured on `autoforge serve` alone: a small fleet (see
//! `scale::fleet`) whose runs are all carried to their end by one serve
//! process of this build, its own CPU time and its children's read from
//! `/proc` (fakehub and Postgres are other processes here), and, under
//! callgrind, the instructions it executed split by component.
//!
//! The split attributes each function's own instructions (not its
//! callees') to the component its symbol belongs to: the journal's code
//! and sqlx; the GitHub client with its HTTP stack and the JSON it decodes;
//! the effects and the machine; git and workspaces; agents, sandbox and
//! validation (starting and watching processes); rendering; the async
//! runtime; and the rest (allocator, libc, the standard library), which
//! every component calls. Callgrind runs serve about fifty times slower,
//! so only its instruction counts are used, never its times.

use std::time::{Duration, Instant};

use crate::bench::procstat::cpu_times;
use crate::bench::scale::fleet::{Fleet, Size};
use crate::bench::tool_output;

/// Per run, one serve process alone.
#[derive(Debug, Clone, Copy)]
pub struct ServeCycle {
    pub own_ms: f64,
    pub children_ms: f64,
    pub wall_ms: f64,
}

/// Carries `size`'s runs to their end and divides serve's costs by them.
pub async fn serve_alone(size: Size) -> anyhow::Result<ServeCycle> {
    let fleet = Fleet::seed(size).await?;
    let replica = fleet.start_replica(0).await?;
    let before = cpu_times(replica.pid)?;
    let started = Instant::now();
    fleet.label_all().await?;
    fleet.wait_all_ended(Duration::from_secs(900)).await?;
    let wall = started.elapsed();
    let spent = cpu_times(replica.pid)?.since(&before);
    replica.terminate().await?;
    let runs = fleet.issues.len();
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / runs.max(1) as f64;
    Ok(ServeCycle {
        own_ms: per(spent.own),
        children_ms: per(spent.children),
        wall_ms: per(wall),
    })
}

/// Components, each with the symbol fragments that name it; the first
/// component whose fragment a function's name holds gets its cost.
const COMPONENTS: &[(&str, &[&str])] = &[
    ("journal (Postgres client)", &["autoforge_journal", "sqlx"]),
    (
        "cryptography (App JWT, webhook HMAC, database SCRAM)",
        &[
            "sha2::",
            "aws_lc",
            "bn_",
            "hmac",
            "rsa",
            "ring::",
            "jsonwebtoken",
        ],
    ),
    (
        "rendering (publish, texts)",
        &[
            "autoforge::publish",
            "autoforge::effects::texts",
            "pulldown_cmark",
            "maud",
        ],
    ),
    (
        "GitHub client (HTTP, its JSON)",
        &[
            "autoforge::github",
            "hyper",
            "reqwest",
            "h2::",
            "http::",
            "octocrab",
            "tower",
        ],
    ),
    (
        "effects and machine",
        &["autoforge::effects", "autoforge::machine"],
    ),
    ("git and workspaces", &["autoforge::workspace"]),
    (
        "agents, sandbox, validation",
        &[
            "autoforge::agents",
            "autoforge::sandbox",
            "autoforge::validation",
        ],
    ),
    ("JSON and schemas", &["serde", "jsonschema"]),
    ("async runtime", &["tokio", "mio"]),
    ("rest of the controller", &["autoforge"]),
];
const UNATTRIBUTED: &str = "allocator, libc, standard library";

/// Instructions per component, in the report's order, their total, and
/// the functions with the most instructions of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub components: Vec<(&'static str, u64)>,
    pub total: u64,
    pub hottest: Vec<(String, u64)>,
}

/// How many of the hottest functions the report lists.
const HOTTEST: usize = 12;

/// Runs `size`'s runs under callgrind (instrumentation switched on once
/// serve is ready, so start-up is left out) and splits the instructions.
/// `None` when valgrind is not installed.
pub async fn callgrind_split(size: Size) -> anyhow::Result<Option<Split>> {
    if which("valgrind").is_none() || which("callgrind_annotate").is_none() {
        return Ok(None);
    }
    let fleet = Fleet::seed(size).await?;
    let out = fleet.state_path("callgrind.out");
    let wrapper = vec![
        "valgrind".to_owned(),
        "--tool=callgrind".to_owned(),
        "--instr-atstart=no".to_owned(),
        format!("--callgrind-out-file={}", out.display()),
    ];
    let replica = fleet
        .start_replica_under(0, &wrapper, Duration::from_secs(600))
        .await?;
    tool_output(
        tokio::process::Command::new("callgrind_control")
            .args(["--instr=on", &replica.pid.to_string()]),
        "Debian's valgrind package has it",
    )
    .await?;
    fleet.label_all().await?;
    fleet.wait_all_ended(Duration::from_secs(1800)).await?;
    replica.terminate().await?;
    let annotated = tool_output(
        tokio::process::Command::new("callgrind_annotate")
            .args(["--threshold=100", "--inclusive=no"])
            .arg(&out),
        "Debian's valgrind package has it",
    )
    .await?;
    Ok(Some(split(&annotated)))
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

/// Splits callgrind_annotate's per-function lines
/// (`1,234 (0.50%)  file:function [object]`) into components.
fn split(annotated: &str) -> Split {
    let mut totals: Vec<(&'static str, u64)> = COMPONENTS
        .iter()
        .map(|(name, _)| (*name, 0))
        .chain(std::iter::once((UNATTRIBUTED, 0)))
        .collect();
    let mut total = 0;
    let mut functions = Vec::new();
    for line in annotated.lines() {
        let Some((count, function)) = function_line(line) else {
            continue;
        };
        total += count;
        functions.push((function.to_owned(), count));
        let index = COMPONENTS
            .iter()
            .position(|(_, fragments)| fragments.iter().any(|f| function.contains(f)))
            .unwrap_or(COMPONENTS.len());
        totals[index].1 += count;
    }
    functions.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    functions.truncate(HOTTEST);
    Split {
        components: totals,
        total,
        hottest: functions,
    }
}

/// The instruction count and function name of one per-function line.
fn function_line(line: &str) -> Option<(u64, &str)> {
    let line = line.trim_start();
    let (count, rest) = line.split_once(' ')?;
    let count: u64 = count.replace(',', "").parse().ok()?;
    let rest = rest.trim_start();
    // The share in parentheses, when present.
    let rest = match rest.strip_prefix('(') {
        Some(after) => after.split_once(')')?.1.trim_start(),
        None => rest,
    };
    if rest.starts_with("PROGRAM TOTALS") || rest.is_empty() {
        return None;
    }
    // `file:function [object]`: the object is dropped, and the file ends at
    // the first single colon (Rust paths hold `::`).
    let rest = rest.rsplit_once(" [").map_or(rest, |(name, _)| name);
    let bytes = rest.as_bytes();
    let colon = (0..bytes.len()).find(|&i| {
        bytes[i] == b':' && bytes.get(i + 1) != Some(&b':') && (i == 0 || bytes[i - 1] != b':')
    })?;
    Some((count, &rest[colon + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_function_line_goes_to_the_first_component_its_name_holds() {
        let annotated = "\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
1,000 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir          file:function
--------------------------------------------------------------------------------
400 (40.00%)  ./malloc/malloc.c:_int_malloc [/usr/lib/x86_64-linux-gnu/libc.so.6]
300 (30.00%)  ???:sqlx_postgres::connection::PgConnection::run [/x/autoforge]
200 (20.00%)  /src/journal/src/effects.rs:autoforge_journal::effects::Journal::commit [/x/autoforge]
100 (10.00%)  ???:<serde_json::de::Deserializer<R>>::parse_str [/x/autoforge]
";
        let Split {
            components,
            total,
            hottest,
        } = split(annotated);
        assert_eq!(total, 1000);
        assert_eq!(hottest[0], ("_int_malloc".to_owned(), 400));
        let of = |name: &str| components.iter().find(|(n, _)| *n == name).map(|(_, c)| *c);
        assert_eq!(of("journal (Postgres client)"), Some(500));
        assert_eq!(of("JSON and schemas"), Some(100));
        assert_eq!(of(UNATTRIBUTED), Some(400));
    }
}
