//! What waiting costs, read from fakehub's rate-limit accounting: the
//! points the controller's credentials (installation tokens and the App's
//! JWT) spent over a number of poll intervals, with the requests behind
//! them, and the idle repositories a cost scenario adds.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{OWNER, REPO, Running};
use crate::common::POLL_SECONDS;

/// The controller's requests over one measured stretch.
#[derive(Debug, Clone, Default)]
pub struct Spent {
    /// Rate-limit points charged (a `304` costs none).
    pub points: u64,
    /// Requests made, charged or not.
    pub requests: usize,
    /// Requests answered `304 Not Modified`.
    pub conditional_hits: usize,
    /// Points per `METHOD route`, to say what cost them.
    pub by_route: BTreeMap<String, u64>,
    /// Requests per `METHOD route`, charged or not.
    pub requests_by_route: BTreeMap<String, usize>,
}

impl Spent {
    /// Requests made to `GET route`.
    pub fn reads_of(&self, route: &str) -> usize {
        let key = format!("GET {route}");
        self.requests_by_route.get(&key).copied().unwrap_or(0)
    }
}

/// Whether a rate scope is one of the controller's own credentials (the
/// scenario's people act with personal tokens, `user:<id>`).
fn is_controller(scope: &str) -> bool {
    scope.starts_with("installation:") || scope.starts_with("app:")
}

impl Running {
    /// One poll interval of the serve process.
    pub fn poll_interval(&self) -> Duration {
        Duration::from_secs(POLL_SECONDS)
    }

    /// Waits `intervals` poll intervals and reports what the controller's
    /// requests in that time cost.
    pub async fn spent_over(&self, intervals: u32) -> Spent {
        let mark = self.world.hub.requests().len();
        tokio::time::sleep(self.poll_interval() * intervals).await;
        let requests = self.world.hub.requests();
        let mut spent = Spent::default();
        for record in requests.iter().skip(mark) {
            if !is_controller(&record.rate_scope) {
                continue;
            }
            spent.requests += 1;
            spent.conditional_hits += usize::from(record.conditional_hit);
            spent.points += record.cost;
            let key = format!("{} {}", record.method, record.route);
            if record.cost > 0 {
                *spent.by_route.entry(key.clone()).or_default() += record.cost;
            }
            *spent.requests_by_route.entry(key).or_default() += 1;
        }
        spent
    }

    /// Points the controller's credentials spent since fakehub started,
    /// from its accounting (which no request log trimming can lose).
    pub fn controller_points(&self) -> u64 {
        self.world
            .hub
            .points_spent()
            .iter()
            .filter(|(scope, _)| is_controller(scope))
            .map(|(_, points)| points)
            .sum()
    }

    /// Adds `count` repositories (`idle-1`…) of the owner to the App's
    /// installation, with nothing labelled in them.
    pub async fn add_idle_repositories(&self, count: usize) {
        let mut names = vec![REPO.to_owned()];
        for index in 1..=count {
            let name = format!("idle-{index}");
            let files = BTreeMap::from([("README.md".to_owned(), "idle\n".to_owned())]);
            self.world
                .hub
                .create_repo(&fakehub::RepoSpec {
                    owner: OWNER.into(),
                    name: name.clone(),
                    default_branch: "main".into(),
                    private: true,
                    files,
                    required_checks: vec![],
                })
                .await
                .expect("create an idle repository");
            names.push(name);
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        self.world.set_installation_repositories(&names);
    }
}
