//! Finding and killing what left a launch's process group.
//!
//! A process group is only a convention: a descendant that calls `setsid`
//! (daemons, `nohup setsid …`, some dev servers) is out of reach of
//! `killpg` and would outlive its launch. Every child therefore gets a
//! unique launch tag in its environment, which its descendants inherit
//! across `fork`, `exec` and `setsid`; after the group is gone, the
//! processes of this user whose environment still carries the tag are
//! SIGKILLed.
//!
//! Limits, by design of what is available without privileges: a process
//! that clears or rewrites its own environment before escaping is not
//! found (`PR_SET_CHILD_SUBREAPER` would keep orphans as our children, but
//! it is process-wide and cannot tell concurrent launches apart; cgroups
//! need privileges we do not assume). This closes the accidental escape,
//! not a deliberate one; agents are not a security boundary.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::time::{Instant, sleep};

/// The variable carrying the launch tag. Not a secret, and deliberately
/// outside the `AUTOFORGE_` prefix that the credential check refuses.
pub const LAUNCH_TAG_VAR: &str = "AF_LAUNCH_ID";

const POLL: Duration = Duration::from_millis(25);

/// A fresh tag for one child.
pub fn new_tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// What [`kill_tagged`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EscapedReport {
    /// At least one tagged process was found outside the group and killed.
    pub found: bool,
    /// A tagged process was still there at the deadline.
    pub survived: bool,
}

/// SIGKILLs every live process carrying `tag` and waits up to `deadline`
/// for them to be gone (a zombie no longer exposes its environment, so it
/// counts as gone).
///
/// An empty scan is believed only when the next one, a poll later, is
/// empty too: a process caught inside `execve` has its new memory but not
/// yet its environment on the stack, and reads as untagged for that
/// instant.
pub async fn kill_tagged(tag: &str, deadline: Duration) -> EscapedReport {
    let mut report = EscapedReport::default();
    let until = Instant::now() + deadline;
    let mut empty_scans = 0;
    loop {
        let tagged = tagged_processes(tag);
        if tagged.is_empty() {
            empty_scans += 1;
            if empty_scans == 2 {
                return report;
            }
            sleep(POLL).await;
            continue;
        }
        empty_scans = 0;
        if Instant::now() >= until {
            tracing::error!(
                count = tagged.len(),
                "processes that left their launch survived SIGKILL"
            );
            report.survived = true;
            return report;
        }
        report.found = true;
        for pid in tagged {
            let _ = kill(pid, Signal::SIGKILL);
        }
        sleep(POLL).await;
    }
}

/// Processes (other than this one) whose environment holds the tag.
fn tagged_processes(tag: &str) -> Vec<Pid> {
    let entry = format!("{LAUNCH_TAG_VAR}={tag}");
    let own = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != own)
        .filter(|pid| {
            // Unreadable (another user's, or already gone) is not ours.
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == entry.as_bytes()))
        })
        .filter_map(|pid| i32::try_from(pid).ok().map(Pid::from_raw))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_unique() {
        assert_ne!(new_tag(), new_tag());
    }

    #[tokio::test]
    async fn a_tagged_process_is_found_and_killed_and_an_untagged_one_is_left() {
        let tag = new_tag();
        let spawn = |tag: &str| {
            tokio::process::Command::new("sleep")
                .arg("1000")
                .env(LAUNCH_TAG_VAR, tag)
                .kill_on_drop(true)
                .spawn()
                .expect("spawn sleep")
        };
        let mut tagged = spawn(&tag);
        let mut other = spawn(&new_tag());
        // `spawn` returns while the child may still be inside `execve`; the
        // test is about finding a running process, so wait until it is one.
        let visible = Instant::now() + Duration::from_secs(10);
        while tagged_processes(&tag).is_empty() {
            assert!(
                Instant::now() < visible,
                "the tagged child never showed its tag"
            );
            sleep(POLL).await;
        }
        // Our own child turns into a zombie once killed: reap it meanwhile,
        // and give up well before `sleep` would end on its own.
        let (report, status) = tokio::join!(
            kill_tagged(&tag, Duration::from_secs(5)),
            tokio::time::timeout(Duration::from_secs(30), tagged.wait())
        );
        let status = status.expect("the tagged child outlived the sweep");
        assert!(!status.expect("wait").success());
        assert!(report.found && !report.survived, "{report:?}");
        assert!(
            other.try_wait().expect("try_wait").is_none(),
            "the untagged process was killed"
        );
        other.kill().await.expect("kill");
    }
}
