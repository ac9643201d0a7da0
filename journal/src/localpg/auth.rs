//! Password authentication for the managed cluster. The superuser gets a
//! random password, kept in `<data root>/password` (0600, readable by the
//! controller only), and `pg_hba.conf` admits nothing but SCRAM-SHA-256 over
//! the Unix socket: reaching the socket is not enough to connect.
//!
//! A cluster made by an earlier version trusted the socket and has no
//! password file. It is migrated in place: with the server stopped, a
//! single-user backend (which needs no connection and so no authentication)
//! sets the new password, then the password file and `pg_hba.conf` are
//! written. Its data stays as it was.

use std::fs;
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::unistd::chown;
use secrecy::{ExposeSecret, SecretString};

use super::LocalPgError;
use super::account::RunAs;

/// The controller's copy of the superuser password, in the data root.
pub(super) const PASSWORD_FILE: &str = "password";

/// Where initdb reads the first password from; removed right after.
const INITDB_PASSWORD_FILE: &str = "initdb-password";

/// The whole of `pg_hba.conf`: no `trust`, no TCP.
pub(super) const HBA: &str = "# Written by autoforge; rewritten on every start.\n\
     # Password (SCRAM-SHA-256) over the Unix socket only.\n\
     local all all scram-sha-256\n";

fn io_error(action: String) -> impl FnOnce(std::io::Error) -> LocalPgError {
    move |source| LocalPgError::Io { action, source }
}

/// 32 random bytes as hex: URL-safe, quote-safe, 256 bits.
pub(super) fn generate_password() -> Result<SecretString, LocalPgError> {
    let mut bytes = [0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(io_error("read /dev/urandom".to_owned()))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    bytes.fill(0);
    Ok(SecretString::from(hex))
}

/// The stored password, `None` when the file does not exist.
pub(super) fn read_password(data_root: &Path) -> Result<Option<SecretString>, LocalPgError> {
    let path = data_root.join(PASSWORD_FILE);
    match fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Ok(Some(SecretString::from(text.trim().to_owned()))),
        Ok(_) => Ok(None),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io_error(format!("read {}", path.display()))(error)),
    }
}

/// Writes `text` to `path` as a new 0600 file owned by `owner` (or us),
/// replacing any old one by rename so nothing ever sees half of it.
fn write_private(path: &Path, text: &str, owner: Option<RunAs>) -> Result<(), LocalPgError> {
    let fresh = PathBuf::from(format!("{}.new", path.display()));
    match fs::remove_file(&fresh) {
        Err(error) if error.kind() != ErrorKind::NotFound => {
            return Err(io_error(format!("remove {}", fresh.display()))(error));
        }
        _ => {}
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .map_err(io_error(format!("create {}", fresh.display())))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_error(format!("write {}", fresh.display())))?;
    drop(file);
    if let Some(owner) = owner {
        chown(&fresh, Some(owner.uid), Some(owner.gid)).map_err(|source| LocalPgError::Os {
            action: format!("give {} to the server's user", fresh.display()),
            source,
        })?;
    }
    fs::rename(&fresh, path).map_err(io_error(format!("replace {}", path.display())))
}

/// Stores the password for the controller (owned by us, never the server).
pub(super) fn write_password(
    data_root: &Path,
    password: &SecretString,
) -> Result<(), LocalPgError> {
    let text = format!("{}\n", password.expose_secret());
    write_private(&data_root.join(PASSWORD_FILE), &text, None)
}

/// Rewrites `pg_hba.conf` unless it is exactly [`HBA`]; true when it did.
pub(super) fn pin_hba(data_dir: &Path, run_as: Option<RunAs>) -> Result<bool, LocalPgError> {
    let hba = data_dir.join("pg_hba.conf");
    if fs::read_to_string(&hba).ok().as_deref() == Some(HBA) {
        return Ok(false);
    }
    write_private(&hba, HBA, run_as)?;
    Ok(true)
}

/// A file initdb reads the first password from (`--pwfile`), owned by the
/// server's user because initdb runs as it. Call
/// [`remove_initdb_password`] once initdb is done, whatever its outcome.
pub(super) fn initdb_password_file(
    data_root: &Path,
    password: &SecretString,
    run_as: Option<RunAs>,
) -> Result<PathBuf, LocalPgError> {
    let path = data_root.join(INITDB_PASSWORD_FILE);
    write_private(&path, &format!("{}\n", password.expose_secret()), run_as)?;
    Ok(path)
}

pub(super) fn remove_initdb_password(path: &Path) {
    if let Err(error) = fs::remove_file(path)
        && error.kind() != ErrorKind::NotFound
    {
        tracing::warn!(%error, file = %path.display(), "could not remove initdb's password file");
    }
}

/// Sets the superuser's password through a single-user backend on the
/// stopped cluster in `data_dir`. `command` is `postgres` prepared to run
/// as the server's user.
pub(super) fn set_password_offline(
    mut command: Command,
    data_dir: &Path,
    password: &SecretString,
) -> Result<(), LocalPgError> {
    command
        .arg("--single")
        .arg("-D")
        .arg(data_dir)
        .args(["-c", "listen_addresses=", "-c", "log_statement=none"])
        .arg("postgres")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(io_error("run postgres --single".to_owned()))?;
    let statement = format!(
        "ALTER ROLE postgres WITH PASSWORD '{}'\n",
        password.expose_secret()
    );
    let written = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin pipe"))
        .and_then(|mut stdin| stdin.write_all(statement.as_bytes()));
    drop(statement);
    let output = child
        .wait_with_output()
        .map_err(io_error("run postgres --single".to_owned()))?;
    written.map_err(io_error("talk to postgres --single".to_owned()))?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    if output.status.success() && !text.contains("ERROR") && !text.contains("FATAL") {
        return Ok(());
    }
    // A failed statement is echoed in the server's messages.
    let text = text.replace(password.expose_secret(), "[redacted]");
    Err(LocalPgError::CommandFailed {
        program: "postgres --single",
        status: output.status.to_string(),
        output: super::tail(&text),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn passwords_are_long_random_and_stored_private() {
        let first = generate_password().unwrap();
        let second = generate_password().unwrap();
        assert_eq!(first.expose_secret().len(), 64);
        assert_ne!(first.expose_secret(), second.expose_secret());

        let dir = tempfile::tempdir().unwrap();
        assert!(read_password(dir.path()).unwrap().is_none());
        write_password(dir.path(), &first).unwrap();
        let mode = fs::metadata(dir.path().join(PASSWORD_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let read = read_password(dir.path()).unwrap().unwrap();
        assert_eq!(read.expose_secret(), first.expose_secret());
    }

    #[test]
    fn the_hba_file_trusts_nobody() {
        assert!(!HBA.contains("trust"));
        assert!(!HBA.contains("host"));
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("pg_hba.conf"), "local all all trust\n").unwrap();
        assert!(pin_hba(dir.path(), None).unwrap());
        assert!(!pin_hba(dir.path(), None).unwrap());
        assert_eq!(
            fs::read_to_string(dir.path().join("pg_hba.conf")).unwrap(),
            HBA
        );
    }
}
