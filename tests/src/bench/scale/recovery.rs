//! Recovery (#19 §5): the single replica is killed with SIGKILL while its
//! runs are active and started again at once. Measured: how long until it
//! is ready, until every run it was working on at the kill (leased, or
//! with an agent launch or an effect unfinished) is leased again by the
//! new process (or has ended), until every launch open at the kill is
//! ended (the agent died with its supervisor), and until every effect
//! those runs had pending (`intended` or `attempted`) is settled; the
//! leases' remaining time at the kill, which no recovery can beat; and the
//! GitHub requests made from the restart until then (recovery's and the
//! ordinary progress of the runs it took back alike).

use std::time::{Duration, Instant};

use sqlx::Row;

use super::fleet::{Fleet, LEASE_SECONDS, Replica};

/// How long recovery may take before the bench reports it as not reached.
const GIVE_UP_AFTER: Duration = Duration::from_secs(LEASE_SECONDS + 60);
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What one kill and restart measured.
#[derive(Debug, Clone)]
pub struct Recovery {
    pub active_runs: i64,
    /// Active runs the killed process was working on: leased, or with an
    /// agent launch or an effect not finished.
    pub in_flight_runs: usize,
    pub leased_runs: i64,
    /// Active runs due but waiting for a free driver, and those sleeping
    /// until a later wake-up (waiting for a webhook or a re-check).
    pub queued_runs: i64,
    pub sleeping_runs: i64,
    pub open_launches: usize,
    pub pending_effects: usize,
    /// The latest lease expiry at the kill, seconds after it.
    pub lease_remaining: f64,
    pub ready_after: f64,
    /// Every run in flight leased again; `None`: not within the limit.
    pub leased_after: Option<f64>,
    /// Every launch open at the kill ended (found lost by the new process).
    pub launches_closed_after: Option<f64>,
    /// Every pending effect settled; `None`: not within the limit.
    pub settled_after: Option<f64>,
    pub reads: u64,
    pub writes: u64,
    pub points: u64,
}

impl Recovery {
    /// All three conditions met, seconds after the restart.
    pub fn recovered_after(&self) -> Option<f64> {
        Some(
            self.leased_after?
                .max(self.launches_closed_after?)
                .max(self.settled_after?),
        )
    }
}

/// What the journal says at the kill.
struct AtKill {
    runs: Vec<i64>,
    tokens: Vec<i64>,
    launches: Vec<i64>,
    effects: Vec<i64>,
    counts: sqlx::postgres::PgRow,
}

async fn at_kill(pool: &sqlx::PgPool) -> anyhow::Result<AtKill> {
    let in_flight = sqlx::query(
        "SELECT r.id, r.fencing_token FROM runs r WHERE r.active AND ( \
             (r.lease_owner IS NOT NULL AND r.lease_expires_at > clock_timestamp()) \
             OR EXISTS (SELECT 1 FROM agent_launches l \
                 WHERE l.run_id = r.id AND l.ended_at IS NULL) \
             OR EXISTS (SELECT 1 FROM effects e \
                 WHERE e.run_id = r.id AND e.stage IN ('intended', 'attempted')))",
    )
    .fetch_all(pool)
    .await?;
    let runs: Vec<i64> = in_flight.iter().map(|row| row.get("id")).collect();
    let tokens = in_flight
        .iter()
        .map(|row| row.get("fencing_token"))
        .collect();
    let launches = sqlx::query_scalar("SELECT id FROM agent_launches WHERE ended_at IS NULL")
        .fetch_all(pool)
        .await?;
    let effects = sqlx::query_scalar(
        "SELECT id FROM effects WHERE run_id = ANY($1) AND stage IN ('intended', 'attempted')",
    )
    .bind(&runs)
    .fetch_all(pool)
    .await?;
    let counts = sqlx::query(
        "SELECT count(*) FILTER (WHERE active) AS active, \
             count(*) FILTER (WHERE active AND lease_expires_at > clock_timestamp()) AS leased, \
             count(*) FILTER (WHERE active AND wake_at <= clock_timestamp() \
                 AND (lease_expires_at IS NULL OR lease_expires_at <= clock_timestamp())) \
                 AS queued, \
             count(*) FILTER (WHERE active AND wake_at > clock_timestamp() \
                 AND (lease_expires_at IS NULL OR lease_expires_at <= clock_timestamp())) \
                 AS sleeping, \
             COALESCE(extract(epoch FROM max(lease_expires_at) \
                 FILTER (WHERE lease_expires_at > clock_timestamp()) - clock_timestamp()), \
                 0)::float8 AS remaining \
         FROM runs",
    )
    .fetch_one(pool)
    .await?;
    Ok(AtKill {
        runs,
        tokens,
        launches,
        effects,
        counts,
    })
}

/// Kills `replica` (the fleet's only one), restarts it and measures.
pub async fn kill_and_restart(fleet: &Fleet, replica: Replica) -> anyhow::Result<Recovery> {
    let kill = at_kill(&fleet.pool).await?;
    replica.kill().await?;
    let requests_before = fleet.hub.requests().len();
    let restarted = Instant::now();
    let _replacement = fleet.start_replica(0).await?;
    let ready_after = restarted.elapsed().as_secs_f64();
    let mut leased_after = None;
    let mut launches_closed_after = None;
    let mut settled_after = None;
    let mut requests_until = None;
    while restarted.elapsed() < GIVE_UP_AFTER {
        let (waiting, open, unsettled): (i64, i64, i64) = sqlx::query_as(
            "SELECT \
                 (SELECT count(*) FROM unnest($1::int8[], $2::int8[]) AS k(id, token) \
                  JOIN runs r ON r.id = k.id WHERE r.fencing_token <= k.token AND r.active), \
                 (SELECT count(*) FROM agent_launches WHERE id = ANY($3) AND ended_at IS NULL), \
                 (SELECT count(*) FROM effects WHERE id = ANY($4) \
                  AND stage IN ('intended', 'attempted'))",
        )
        .bind(&kill.runs)
        .bind(&kill.tokens)
        .bind(&kill.launches)
        .bind(&kill.effects)
        .fetch_one(&fleet.pool)
        .await?;
        let now = Some(restarted.elapsed().as_secs_f64());
        if waiting == 0 {
            leased_after = leased_after.or(now);
        }
        if open == 0 {
            launches_closed_after = launches_closed_after.or(now);
        }
        if unsettled == 0 {
            settled_after = settled_after.or(now);
        }
        if leased_after.is_some() && launches_closed_after.is_some() && settled_after.is_some() {
            requests_until = Some(fleet.hub.requests().len());
            break;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    let requests = fleet.hub.requests();
    let until = requests_until.unwrap_or(requests.len()).min(requests.len());
    let spent = &requests[requests_before.min(until)..until];
    let reads = spent
        .iter()
        .filter(|r| matches!(r.method.as_str(), "GET" | "HEAD"))
        .count() as u64;
    Ok(Recovery {
        active_runs: kill.counts.try_get("active")?,
        in_flight_runs: kill.runs.len(),
        leased_runs: kill.counts.try_get("leased")?,
        queued_runs: kill.counts.try_get("queued")?,
        sleeping_runs: kill.counts.try_get("sleeping")?,
        open_launches: kill.launches.len(),
        pending_effects: kill.effects.len(),
        lease_remaining: kill.counts.try_get("remaining")?,
        ready_after,
        leased_after,
        launches_closed_after,
        settled_after,
        reads,
        writes: spent.len() as u64 - reads,
        points: spent.iter().map(|r| r.cost).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recovery(leased: Option<f64>, settled: Option<f64>) -> Recovery {
        Recovery {
            active_runs: 0,
            in_flight_runs: 0,
            leased_runs: 0,
            queued_runs: 0,
            sleeping_runs: 0,
            open_launches: 0,
            pending_effects: 0,
            lease_remaining: 0.0,
            ready_after: 0.0,
            leased_after: leased,
            launches_closed_after: Some(1.0),
            settled_after: settled,
            reads: 0,
            writes: 0,
            points: 0,
        }
    }

    #[test]
    fn recovery_ends_when_the_leases_the_launches_and_the_effects_are_all_back() {
        assert_eq!(recovery(Some(3.0), Some(5.0)).recovered_after(), Some(5.0));
        assert_eq!(recovery(Some(3.0), None).recovered_after(), None);
    }
}
