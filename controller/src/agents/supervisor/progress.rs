//! What a running launch tells its observer, as it happens: that its
//! process started (with its pid), how it is getting on (a heartbeat every
//! [`LaunchEvents::every`]: elapsed time, output so far, tokens so far
//! where the output format reports them), and how it ended. The driver
//! turns these into the launch's journal row (`agents::journal`), so the
//! row exists from the start and a crash leaves a row without an end.
//!
//! The channel is unbounded and never waits: a slow journal must not slow
//! the supervision loop that reads the agent's output and enforces its
//! limits. Heartbeats are few (one per interval), so it stays small.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

use super::LaunchRecord;
use super::process::Heartbeat;
use crate::agents::profile::PriceTable;
use crate::machine::AgentPhase;

/// One thing a launch reports.
#[derive(Debug, Clone, PartialEq)]
pub enum LaunchEvent {
    /// The process exists; the first heartbeat gave its pid.
    Started {
        profile: String,
        role: AgentPhase,
        pid: u32,
        log_dir: PathBuf,
        price: Option<PriceTable>,
    },
    /// A heartbeat of the process `Started` announced.
    Progress(Heartbeat),
    /// The process `Started` announced has ended (its group is gone).
    Finished(Box<LaunchRecord>),
}

/// Where launches send their [`LaunchEvent`]s, and how often they beat.
#[derive(Debug, Clone)]
pub struct LaunchEvents {
    sender: mpsc::UnboundedSender<LaunchEvent>,
    every: Duration,
}

impl LaunchEvents {
    /// A channel for launches that beat every `every` (at least 1 ms).
    pub fn channel(every: Duration) -> (Self, mpsc::UnboundedReceiver<LaunchEvent>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let every = every.max(Duration::from_millis(1));
        (Self { sender, every }, receiver)
    }

    /// How often a running launch reports its progress.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Sends `event`; an observer that went away loses it, which only
    /// means nobody records the launch's progress any more.
    pub fn send(&self, event: LaunchEvent) {
        let _ = self.sender.send(event);
    }
}
