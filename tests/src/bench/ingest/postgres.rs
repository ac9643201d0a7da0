//! Postgres' own ceiling, and the bench's housekeeping on the same server:
//! pgbench inserting the row `/webhook` stores, one durable commit per row,
//! and psql for what happens between runs (emptying the inbox, a
//! checkpoint, counting rows). Both get the server from libpq's `PG*`
//! variables, so the password never appears on a command line.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};
use tokio::process::Command;

use super::Figures;
use crate::bench::stats::percentile;

/// The statement pgbench repeats: the columns ingress writes, a fresh
/// delivery id each time, the delivery's body as `:payload`.
const INSERT: &str = "INSERT INTO deliveries \
     (delivery_id, event, action, repository, installation_id, payload) \
     VALUES (gen_random_uuid()::text, 'issue_comment', 'created', 'octo/widgets', 42, \
     convert_to(:payload, 'UTF8')) ON CONFLICT (delivery_id) DO NOTHING;\n";

/// How to reach the bench's server, as libpq variables.
pub struct Server {
    env: Vec<(&'static str, String)>,
}

impl Server {
    /// From a `postgres://user:password@host:port/db?host=socket` URL.
    pub fn from_url(url: &SecretString) -> anyhow::Result<Server> {
        let parsed = url::Url::parse(url.expose_secret()).context("the database URL")?;
        let socket = parsed
            .query_pairs()
            .find(|(key, _)| key == "host")
            .map(|(_, value)| value.into_owned());
        let host = socket.unwrap_or_else(|| parsed.host_str().unwrap_or("localhost").to_owned());
        Ok(Server {
            env: vec![
                ("PGHOST", host),
                ("PGPORT", parsed.port().unwrap_or(5432).to_string()),
                ("PGUSER", parsed.username().to_owned()),
                (
                    "PGPASSWORD",
                    parsed.password().unwrap_or_default().to_owned(),
                ),
                (
                    "PGDATABASE",
                    parsed.path().trim_start_matches('/').to_owned(),
                ),
            ],
        })
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// Runs `sql` with psql; its output, trimmed.
    pub async fn psql(&self, sql: &str) -> anyhow::Result<String> {
        let output = crate::bench::tool_output(
            self.command("psql")
                .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql]),
            "Debian's postgresql-client package has it",
        )
        .await
        .with_context(|| format!("psql {sql}"))?;
        Ok(output.trim().to_owned())
    }

    /// An empty inbox and a fresh checkpoint, so each run starts alike.
    pub async fn reset(&self) -> anyhow::Result<()> {
        self.psql("TRUNCATE deliveries").await?;
        self.psql("CHECKPOINT").await?;
        Ok(())
    }

    /// Rows in the inbox.
    pub async fn deliveries(&self) -> anyhow::Result<u64> {
        Ok(self
            .psql("SELECT count(*) FROM deliveries")
            .await?
            .parse()?)
    }

    /// pgbench with `clients` connections for `duration`, each transaction
    /// one insert of `payload` committed on its own (synchronous commit,
    /// as the server is configured); latencies from its per-transaction
    /// log in `scratch`.
    pub async fn pgbench(
        &self,
        clients: usize,
        duration: Duration,
        payload: &str,
        scratch: &Path,
    ) -> anyhow::Result<Figures> {
        let script = scratch.join("insert.sql");
        std::fs::write(&script, INSERT)?;
        let logs = scratch.join(format!("pgbench-{clients}"));
        std::fs::create_dir_all(&logs)?;
        let stdout = crate::bench::tool_output(
            self.command("pgbench")
                .args(["--no-vacuum", "--protocol=prepared"])
                .arg(format!("--client={clients}"))
                .arg(format!("--jobs={}", clients.min(2)))
                .arg(format!("--time={}", duration.as_secs().max(1)))
                .arg(format!("--file={}", script.display()))
                .arg("--log")
                .arg(format!("--log-prefix={}", logs.join("tx").display()))
                .arg(format!("--define=payload={payload}")),
            "Debian's postgresql package has it",
        )
        .await?;
        let mut latencies_ms = Vec::new();
        for entry in std::fs::read_dir(&logs)? {
            let path = entry?.path();
            // Each line: client, transaction, latency (µs), script, epoch s, µs.
            for line in std::fs::read_to_string(&path)?.lines() {
                if let Some(us) = line.split(' ').nth(2).and_then(|f| f.parse::<f64>().ok()) {
                    latencies_ms.push(us / 1000.0);
                }
            }
            std::fs::remove_file(&path)?;
        }
        latencies_ms.sort_by(f64::total_cmp);
        let rate = stdout
            .lines()
            .find_map(|line| {
                let rest = line.strip_prefix("tps = ")?;
                rest.split_whitespace().next()?.parse::<f64>().ok()
            })
            .with_context(|| format!("pgbench printed no tps: {stdout}"))?;
        Ok(Figures {
            requests: latencies_ms.len() as u64,
            rate,
            p50_ms: percentile(&latencies_ms, 0.50).unwrap_or(0.0),
            p99_ms: percentile(&latencies_ms, 0.99).unwrap_or(0.0),
            p999_ms: percentile(&latencies_ms, 0.999).unwrap_or(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_socket_url_becomes_libpq_variables_with_the_password_out_of_argv() {
        let url = SecretString::from(
            "postgres://postgres:abc123@localhost:5433/postgres?host=/tmp/pg sock".to_owned(),
        );
        let server = Server::from_url(&url).unwrap();
        let env: std::collections::BTreeMap<_, _> = server.env.iter().cloned().collect();
        assert_eq!(env["PGHOST"], "/tmp/pg sock");
        assert_eq!(env["PGPORT"], "5433");
        assert_eq!(env["PGUSER"], "postgres");
        assert_eq!(env["PGPASSWORD"], "abc123");
        assert_eq!(env["PGDATABASE"], "postgres");
    }
}
