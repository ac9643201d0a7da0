//! Where the cluster's files are and whether its server lives: the socket
//! directory (short enough for `sun_path`, safe for `pg_ctl`'s shell) and
//! the postmaster recorded in `postmaster.pid`.

use std::fs;
use std::path::{Path, PathBuf};

/// `sun_path` holds 108 bytes including the terminating NUL.
pub(super) const MAX_SOCKET_PATH: usize = 107;

/// `pg_ctl start` runs `exec "postgres" -D "<data>" … >> "<log>"` through
/// `/bin/sh`; inside double quotes these characters would change meaning.
pub(super) fn survives_pg_ctl_quoting(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|s| !s.contains(['"', '$', '`', '\\', '\n', '\r']))
}

/// The postmaster pid recorded in the data directory, if any.
pub(super) fn pid_in(data_dir: &Path) -> Option<i32> {
    let text = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// True when `pid` exists and is neither a zombie nor dead (Linux `/proc`).
pub(super) fn process_is_live(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may
    // itself contain spaces or parentheses.
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z" | "X" | "x"))
}

/// `<root>/run`, or a stable short directory under /tmp when that path is
/// too long for a socket or unsafe to pass through `pg_ctl`'s shell.
pub(super) fn socket_dir_for(data_root: &Path) -> PathBuf {
    let preferred = data_root.join("run");
    let socket_file_len = preferred.as_os_str().len() + "/.s.PGSQL.5432".len();
    let shell_safe = preferred.to_str().is_some_and(|s| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
    });
    if socket_file_len <= MAX_SOCKET_PATH && shell_safe {
        preferred
    } else {
        PathBuf::from(format!(
            "/tmp/autoforge-pg-{:016x}",
            fnv1a(data_root.as_os_str().as_encoded_bytes())
        ))
    }
}

/// A stable (across builds and runs) 64-bit hash; `std`'s hasher is not.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::thread;
    use std::time::{Duration, Instant};

    #[test]
    fn short_plain_root_keeps_its_socket_inside() {
        let root = Path::new("/var/lib/autoforge/postgres");
        assert_eq!(socket_dir_for(root), root.join("run"));
    }

    #[test]
    fn long_root_gets_a_stable_short_socket_dir_under_tmp() {
        let root = PathBuf::from(format!("/srv/{}/postgres", "x".repeat(120)));
        let first = socket_dir_for(&root);
        assert!(
            first.to_string_lossy().starts_with("/tmp/autoforge-pg-"),
            "{}",
            first.display()
        );
        assert!(first.as_os_str().len() + 14 <= MAX_SOCKET_PATH);
        assert_eq!(first, socket_dir_for(&root));
    }

    #[test]
    fn root_with_shell_characters_gets_a_safe_socket_dir() {
        let root = Path::new("/srv/my state/postgres");
        assert!(
            socket_dir_for(root)
                .to_string_lossy()
                .starts_with("/tmp/autoforge-pg-")
        );
    }

    #[test]
    fn this_process_is_live_and_a_reaped_child_is_not() {
        assert!(process_is_live(std::process::id() as i32));
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = child.id() as i32;
        child.wait().expect("wait");
        assert!(!process_is_live(pid));
    }

    #[test]
    fn an_unreaped_child_is_not_live() {
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = child.id() as i32;
        // Until it is waited for, the exited child stays a zombie.
        let deadline = Instant::now() + Duration::from_secs(5);
        while process_is_live(pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!process_is_live(pid));
        child.wait().expect("wait");
    }

    #[test]
    fn paths_a_shell_would_misread_are_refused() {
        assert!(survives_pg_ctl_quoting(Path::new("/srv/my state/postgres")));
        for bad in [
            "/srv/a\"b",
            "/srv/$HOME",
            "/srv/`id`",
            "/srv/a\\b",
            "/srv/a\nb",
        ] {
            assert!(!survives_pg_ctl_quoting(Path::new(bad)), "{bad:?}");
        }
    }
}
