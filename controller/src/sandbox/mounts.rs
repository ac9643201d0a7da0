//! What a sandboxed process sees of the filesystem.
//!
//! The fixed part ([`system_mounts`]): the system directories read-only, of
//! `/etc` only what name resolution, TLS, users and the dynamic linker need
//! (never `shadow`, SSH host keys, `ssl/private` or service configs), a
//! fresh `/dev`, a `/proc` of the sandbox's own PID namespace and an empty
//! `/tmp`. Everything else is added by the caller: the worktree, and of git
//! only what committing in that worktree needs ([`git_mounts`]).
//!
//! Every bind keeps the host path, so paths in prompts, in the worktree's
//! `.git` link and in git's own files mean the same inside and outside.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// One entry of the sandbox's filesystem, applied in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// The host path at the same place. `optional` skips a missing source.
    Bind {
        path: PathBuf,
        access: Access,
        optional: bool,
    },
    /// An empty, private, writable directory.
    Tmpfs(PathBuf),
    /// An empty directory on the (read-only) root, so that a path spelled
    /// `a/b/../c` resolves inside as it does outside.
    Dir(PathBuf),
    /// A symlink `link` → `target` (merged-`/usr` systems link `/bin`).
    Symlink { target: PathBuf, link: PathBuf },
    /// A minimal `/dev` (null, zero, random, tty, pts…).
    Dev(PathBuf),
    /// `/proc` of the sandbox's own PID namespace.
    Proc(PathBuf),
}

impl Mount {
    pub fn bind(path: &Path, access: Access) -> Self {
        Self::Bind {
            path: path.to_owned(),
            access,
            optional: false,
        }
    }

    pub fn bind_if_present(path: &Path, access: Access) -> Self {
        Self::Bind {
            path: path.to_owned(),
            access,
            optional: true,
        }
    }

    pub(super) fn push_args(&self, args: &mut Vec<OsString>) {
        let mut two = |flag: &str, a: &Path, b: &Path| {
            args.push(flag.into());
            args.push(a.as_os_str().to_owned());
            args.push(b.as_os_str().to_owned());
        };
        match self {
            Self::Bind {
                path,
                access,
                optional,
            } => {
                let flag = match (access, optional) {
                    (Access::ReadOnly, false) => "--ro-bind",
                    (Access::ReadOnly, true) => "--ro-bind-try",
                    (Access::ReadWrite, false) => "--bind",
                    (Access::ReadWrite, true) => "--bind-try",
                };
                two(flag, path, path);
            }
            Self::Symlink { target, link } => two("--symlink", target, link),
            Self::Tmpfs(path) | Self::Dir(path) | Self::Dev(path) | Self::Proc(path) => {
                let flag = match self {
                    Self::Tmpfs(_) => "--tmpfs",
                    Self::Dir(_) => "--dir",
                    Self::Dev(_) => "--dev",
                    _ => "--proc",
                };
                args.push(flag.into());
                args.push(path.as_os_str().to_owned());
            }
        }
    }
}

impl fmt::Display for Mount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bind {
                path,
                access,
                optional,
            } => {
                let kind = match access {
                    Access::ReadOnly => "read-only ",
                    Access::ReadWrite => "read-write",
                };
                let note = if *optional { " (if present)" } else { "" };
                write!(f, "{kind} {}{note}", path.display())
            }
            Self::Tmpfs(path) => write!(f, "empty      {}", path.display()),
            Self::Dir(path) => write!(f, "directory  {}", path.display()),
            Self::Symlink { target, link } => {
                write!(f, "symlink    {} -> {}", link.display(), target.display())
            }
            Self::Dev(path) => write!(f, "devices    {}", path.display()),
            Self::Proc(path) => write!(f, "proc       {} (own PID namespace)", path.display()),
        }
    }
}

/// System directories shown read-only (or as the symlinks they are).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The parts of `/etc` programs need: name resolution, TLS roots, user and
/// group names, the dynamic linker's cache, time zone, `alternatives`
/// (Debian's `/usr/bin` links point there). Nothing else: `/etc` also holds
/// `shadow`, SSH host keys, TLS private keys and service configuration.
const ETC_FILES: &[&str] = &[
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust/extracted",
    "/etc/crypto-policies",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/hostname",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/networks",
    "/etc/passwd",
    "/etc/group",
    "/etc/shells",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/terminfo",
    "/etc/inputrc",
];

/// The fixed view every sandbox starts with.
pub fn system_mounts() -> Vec<Mount> {
    let mut mounts = Vec::new();
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    mounts.push(Mount::Symlink {
                        target,
                        link: path.to_owned(),
                    });
                }
            }
            Ok(meta) if meta.is_dir() => mounts.push(Mount::bind(path, Access::ReadOnly)),
            _ => {}
        }
    }
    mounts.extend(
        ETC_FILES
            .iter()
            .map(|file| Mount::bind_if_present(Path::new(file), Access::ReadOnly)),
    );
    mounts.push(Mount::Dev("/dev".into()));
    mounts.push(Mount::Proc("/proc".into()));
    // Before any bind below /tmp (test state directories live there), so
    // those binds land on top of the empty /tmp rather than under it.
    mounts.push(Mount::Tmpfs("/tmp".into()));
    mounts.push(Mount::Tmpfs("/var/tmp".into()));
    mounts
}

/// Why the git view of a worktree could not be worked out.
#[derive(Debug, thiserror::Error)]
pub enum GitViewError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a `gitdir:` link", .0.display())]
    NotALink(PathBuf),
}

/// The git directories a process working in `workdir` needs, and no more.
///
/// A linked worktree (`.git` is a file naming `<common>/worktrees/<name>`):
/// the common directory read-only with its `worktrees/` emptied, then the
/// worktree's own admin directory and `objects/` with `access`, and
/// `objects/info` read-only again (an `alternates` file there would point
/// the controller's git at objects of the agent's choosing). A commit on the
/// detached HEAD writes only the admin directory and new objects; `config`,
/// `hooks/`, `info/` and the refs stay read-only, and no other worktree of
/// the mirror is visible.
///
/// A plain repository inside the worktree: its `config`, `hooks/` and
/// `info/` are covered read-only. No `.git`: nothing.
pub fn git_mounts(workdir: &Path, access: Access) -> Result<Vec<Mount>, GitViewError> {
    let dotgit = workdir.join(".git");
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| GitViewError::Read {
            path: path.to_owned(),
            source,
        })
    };
    match std::fs::symlink_metadata(&dotgit) {
        Ok(meta) if meta.is_file() => {
            let link = read(&dotgit)?;
            let admin = link
                .trim_end()
                .strip_prefix("gitdir: ")
                .map(|target| workdir.join(target))
                .ok_or_else(|| GitViewError::NotALink(dotgit.clone()))?;
            let commondir = admin.join("commondir");
            let common = admin.join(read(&commondir)?.trim_end());
            let common = normalize(&common);
            let objects_info = common.join("objects").join("info");
            // git creates it at init; without it an agent could create it
            // inside the writable objects directory.
            std::fs::create_dir_all(&objects_info).map_err(|source| GitViewError::Read {
                path: objects_info.clone(),
                source,
            })?;
            let mut mounts = vec![
                Mount::bind(&common, Access::ReadOnly),
                Mount::Tmpfs(common.join("worktrees")),
                Mount::bind(&normalize(&admin), access),
                Mount::bind(&common.join("objects"), access),
            ];
            if access == Access::ReadWrite {
                mounts.push(Mount::bind(&objects_info, Access::ReadOnly));
            }
            Ok(mounts)
        }
        Ok(meta) if meta.is_dir() && access == Access::ReadWrite => Ok(["config", "hooks", "info"]
            .iter()
            .map(|part| Mount::bind_if_present(&dotgit.join(part), Access::ReadOnly))
            .collect()),
        _ => Ok(Vec::new()),
    }
}

/// The directories a lexical path such as `/x/controller/../tests/a.sh`
/// walks through before each `..` (here `/x/controller`), which must exist
/// inside for the path to resolve there.
pub fn dot_dot_dirs(path: &Path) -> Vec<Mount> {
    use std::path::Component;
    let mut dirs = Vec::new();
    let mut walked = PathBuf::new();
    let components: Vec<Component<'_>> = path.components().collect();
    for (index, component) in components.iter().enumerate() {
        walked.push(component);
        if components.get(index + 1) == Some(&Component::ParentDir) && walked.is_absolute() {
            dirs.push(Mount::Dir(walked.clone()));
        }
    }
    dirs
}

/// `a/b/../c` → `a/c` without touching the filesystem (git writes
/// `commondir` as `../..`).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_components_are_folded() {
        assert_eq!(
            normalize(Path::new("/s/repos/o/r.git/worktrees/7/../..")),
            PathBuf::from("/s/repos/o/r.git")
        );
    }

    #[test]
    fn a_path_through_dot_dot_needs_the_directories_before_each() {
        assert_eq!(
            dot_dot_dirs(Path::new("/r/controller/../tests/agents/a.sh")),
            [Mount::Dir("/r/controller".into())]
        );
        assert!(dot_dot_dirs(Path::new("/r/tests/a.sh")).is_empty());
    }

    #[test]
    fn secrets_of_etc_are_not_in_the_fixed_view() {
        let shown: Vec<String> = system_mounts().iter().map(ToString::to_string).collect();
        for secret in [
            "/etc/shadow",
            "/etc/ssh",
            "/etc/ssl/private",
            "/etc/postgresql",
        ] {
            assert!(
                !shown.iter().any(|line| line.contains(secret)),
                "{secret} in {shown:?}"
            );
        }
        assert!(shown.iter().any(|line| line.contains("/etc/resolv.conf")));
    }
}
