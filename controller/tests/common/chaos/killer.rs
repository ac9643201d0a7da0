//! The random kills of a chaos run: a seeded generator picks when the
//! next kill comes and what it hits (the `autoforge serve` process, which
//! is then started again on the same database, port and state directory;
//! the process tree of a running agent; or the Postgres server, which is
//! started again on its data directory after a moment down), and every
//! kill is logged with its moment, so a failing run can be replayed with
//! its seed.

use std::time::{Duration, Instant};

use crate::common::World;
use crate::common::cluster::TestCluster;

/// `AUTOFORGE_CHAOS_SEED`: the seed of a run to replay.
pub const SEED_ENV: &str = "AUTOFORGE_CHAOS_SEED";
/// `AUTOFORGE_CHAOS_KILLS`: how many serve kills the full run deals in total.
pub const KILLS_ENV: &str = "AUTOFORGE_CHAOS_KILLS";

/// SplitMix64: small, seedable and the same on every platform, which is
/// all a replayable kill schedule needs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A duration drawn uniformly from `[low, high]`, in milliseconds.
    pub fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let low_ms = u64::try_from(low.as_millis()).unwrap_or(u64::MAX);
        let high_ms = u64::try_from(high.as_millis()).unwrap_or(u64::MAX);
        let span = high_ms.saturating_sub(low_ms).saturating_add(1);
        Duration::from_millis(low_ms + self.next_u64() % span)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// The seed from `AUTOFORGE_CHAOS_SEED`, or a fresh one from the clock.
pub fn seed_from_env() -> u64 {
    if let Some(seed) = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        return seed;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_nanos() % u128::from(u64::MAX)).unwrap_or(1)
}

/// What one kill hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// SIGKILL of `autoforge serve`, then a restart on the same state.
    Serve,
    /// SIGKILL of every process of one running agent launch.
    Agent,
    /// SIGKILL of the Postgres server (its postmaster), then a restart on
    /// the same data directory.
    Postgres,
}

/// One kill: when (since the run began) and what.
#[derive(Debug, Clone)]
pub struct Kill {
    pub at: Duration,
    pub target: Target,
}

/// The kill schedule of one chaos run.
pub struct Killer {
    pub seed: u64,
    rng: Rng,
    /// Serve kills to deal; the run is crash-free once they are dealt.
    serve_kills: usize,
    agent_kills: bool,
    /// Whether the workload's Postgres is killed too (it then runs on a
    /// cluster of its own, see [`Killer::kills_postgres`]).
    postgres_kills: bool,
    began: Instant,
    next: Instant,
    pub kills: Vec<Kill>,
    /// Extra environment of every restarted serve process.
    env: Vec<(String, String)>,
    /// An agent kill is due: the next launch seen before this moment is
    /// killed (scripted agents live for a fraction of a second, so the
    /// killer lies in wait for one); after it, serve is killed instead.
    agent_wait_until: Option<Instant>,
}

impl Killer {
    pub fn new(seed: u64, serve_kills: usize, agent_kills: bool) -> Self {
        let mut rng = Rng::new(seed);
        let began = Instant::now();
        let next = began + rng.between(Duration::from_secs(2), Duration::from_secs(8));
        eprintln!("chaos: seed {seed} ({SEED_ENV}={seed}), {serve_kills} serve kills");
        Self {
            seed,
            rng,
            serve_kills,
            agent_kills,
            postgres_kills: false,
            began,
            next,
            kills: Vec::new(),
            env: Vec::new(),
            agent_wait_until: None,
        }
    }

    /// Also SIGKILLs the Postgres server now and then.
    pub fn with_postgres_kills(mut self) -> Self {
        self.postgres_kills = true;
        self
    }

    /// Whether this schedule kills Postgres: the workload then needs a
    /// cluster of its own to hand to [`Killer::tick`].
    pub fn kills_postgres(&self) -> bool {
        self.postgres_kills
    }

    /// Environment every restarted serve process gets.
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    pub fn serve_kills(&self) -> usize {
        self.count(Target::Serve)
    }

    pub fn agent_kills(&self) -> usize {
        self.count(Target::Agent)
    }

    pub fn postgres_kills(&self) -> usize {
        self.count(Target::Postgres)
    }

    fn count(&self, target: Target) -> usize {
        self.kills.iter().filter(|k| k.target == target).count()
    }

    /// The seed and every kill, for a failure message.
    pub fn describe(&self) -> String {
        let kills: Vec<String> = self
            .kills
            .iter()
            .map(|k| format!("{:?}@{:.1}s", k.target, k.at.as_secs_f64()))
            .collect();
        format!(
            "seed {} (replay with {SEED_ENV}={}), kills: {}",
            self.seed,
            self.seed,
            kills.join(" ")
        )
    }

    /// Kills something when its moment has come. `agent_kill_safe` says
    /// that no run is retrying a failed step: an agent is killed only then,
    /// so kills never exhaust a phase's retry bound (that would park the
    /// run for `/autoforge retry`, a different outcome, not a bug).
    /// `cluster` is the workload's own Postgres when it is killed too.
    pub async fn tick(
        &mut self,
        world: &mut World,
        cluster: Option<&mut TestCluster>,
        agent_kill_safe: bool,
    ) {
        if self.serve_kills() >= self.serve_kills || Instant::now() < self.next {
            return;
        }
        let at = self.began.elapsed();
        if let Some(cluster) = cluster
            && self.agent_wait_until.is_none()
            && self.postgres_due()
        {
            self.kill_postgres(cluster, at).await;
            return;
        }
        let agent_allowed = self.agent_kills && agent_kill_safe;
        if self.agent_wait_until.is_none() && agent_allowed && self.rng.chance(30) {
            self.agent_wait_until = Some(Instant::now() + Duration::from_secs(15));
        }
        if let Some(until) = self.agent_wait_until {
            let killed = kill_agent_trees(world.serve_pid());
            if killed == 0 && agent_allowed && Instant::now() < until {
                return;
            }
            self.agent_wait_until = None;
            if killed > 0 {
                self.kills.push(Kill {
                    at,
                    target: Target::Agent,
                });
                eprintln!("chaos: {at:.1?} SIGKILL of an agent ({killed} processes)");
                self.next = Instant::now()
                    + self
                        .rng
                        .between(Duration::from_millis(500), Duration::from_secs(4));
                return;
            }
        }
        let status = world.kill_serve();
        eprintln!("chaos: {at:.1?} SIGKILL of serve ({status})");
        self.kills.push(Kill {
            at,
            target: Target::Serve,
        });
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        world.restart_serve(&env).await;
        self.schedule_next();
    }

    /// The next kill: half the time after the dead process's lease ran
    /// out (5 s), so the run moves between kills, half the time inside it,
    /// during recovery.
    fn schedule_next(&mut self) {
        self.next = Instant::now()
            + self
                .rng
                .between(Duration::from_secs(1), Duration::from_secs(9));
    }

    /// Whether this kill hits Postgres: about one in seven, and at least
    /// one once half the serve kills are dealt, so every chaos run that
    /// asks for them has one.
    fn postgres_due(&mut self) -> bool {
        if !self.postgres_kills {
            return false;
        }
        let none_yet = self.postgres_kills() == 0 && self.serve_kills() * 2 >= self.serve_kills;
        self.rng.chance(15) || none_yet
    }

    /// SIGKILLs Postgres, leaves it down for a moment (serve's deliveries
    /// are refused meanwhile and its queries fail), and starts it again.
    async fn kill_postgres(&mut self, cluster: &mut TestCluster, at: Duration) {
        let down = self
            .rng
            .between(Duration::from_millis(200), Duration::from_secs(3));
        cluster.kill().await;
        eprintln!("chaos: {at:.1?} SIGKILL of Postgres (down for {down:.1?})");
        self.kills.push(Kill {
            at,
            target: Target::Postgres,
        });
        tokio::time::sleep(down).await;
        cluster.start_again().await;
        self.schedule_next();
    }
}

/// The parent of each process, from `/proc/<pid>/stat`.
fn processes() -> Vec<(u32, u32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name is in parentheses and may hold spaces.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let ppid = after
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if let Some(ppid) = ppid {
            found.push((pid, ppid, cmdline));
        }
    }
    found
}

/// Every descendant of `root`.
fn descendants(all: &[(u32, u32, String)], root: u32) -> Vec<u32> {
    let mut tree = vec![root];
    let mut index = 0;
    while index < tree.len() {
        let parent = tree[index];
        tree.extend(all.iter().filter(|p| p.1 == parent).map(|p| p.0));
        index += 1;
    }
    tree.remove(0);
    tree
}

/// SIGKILLs the process tree of one running scripted agent under `serve`
/// (the script and everything below it); how many processes were hit.
/// Validation commands are left alone: a killed validation is a failed
/// one, which a crash-free run never sees.
pub fn kill_agent_trees(serve: u32) -> usize {
    let all = processes();
    let below = descendants(&all, serve);
    let Some(agent) = all
        .iter()
        .filter(|p| below.contains(&p.0))
        .find(|p| p.2.contains("/tests/agents/phase_"))
    else {
        return 0;
    };
    let mut victims = vec![agent.0];
    victims.extend(descendants(&all, agent.0));
    for pid in &victims {
        if let Ok(pid) = i32::try_from(*pid) {
            let _sent = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    victims.len()
}
