//! Writing what GitHub returned for the new App: the private key and the
//! webhook secret in files only their owner can read, and an environment
//! file naming them that `serve` (or systemd's `EnvironmentFile=`) takes
//! as is. Files that exist are never overwritten unless asked: they may be
//! the only copy of a working App's key.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use secrecy::{ExposeSecret, SecretString};

/// The App's private key (PEM).
pub const KEY_FILE: &str = "app.pem";
/// The webhook secret.
pub const SECRET_FILE: &str = "webhook-secret";
/// `AUTOFORGE_*` assignments for `serve`.
pub const ENV_FILE: &str = "github-app.env";

/// The files written, by absolute path.
#[derive(Debug, Clone)]
pub struct WrittenCredentials {
    pub dir: PathBuf,
    pub key: PathBuf,
    pub secret: PathBuf,
    pub env: PathBuf,
}

/// What is written.
pub(super) struct NewCredentials<'a> {
    pub app_id: u64,
    pub private_key: &'a SecretString,
    pub webhook_secret: &'a SecretString,
    /// Only when it is not GitHub.com's.
    pub api_url: Option<&'a str>,
}

/// Refuses before anything is created when a file would be overwritten.
pub(super) fn check_free(dir: &Path, force: bool) -> anyhow::Result<()> {
    if force {
        return Ok(());
    }
    for name in [KEY_FILE, SECRET_FILE, ENV_FILE] {
        let path = dir.join(name);
        if path.exists() {
            bail!(
                "{} exists already: it may hold a working App's credentials; \
                 choose another --out directory or pass --force to replace it",
                path.display()
            );
        }
    }
    Ok(())
}

pub(super) fn write(
    dir: &Path,
    new: &NewCredentials<'_>,
    force: bool,
) -> anyhow::Result<WrittenCredentials> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    check_free(&dir, force)?;
    let written = WrittenCredentials {
        key: dir.join(KEY_FILE),
        secret: dir.join(SECRET_FILE),
        env: dir.join(ENV_FILE),
        dir,
    };
    write_private(&written.key, new.private_key.expose_secret(), force)?;
    write_private(&written.secret, new.webhook_secret.expose_secret(), force)?;
    let mut env = format!(
        "AUTOFORGE_GITHUB_APP_ID={}\nAUTOFORGE_GITHUB_PRIVATE_KEY_FILE={}\nAUTOFORGE_WEBHOOK_SECRET_FILE={}\n",
        new.app_id,
        written.key.display(),
        written.secret.display()
    );
    if let Some(url) = new.api_url {
        env.push_str(&format!("AUTOFORGE_GITHUB_API_URL={url}\n"));
    }
    write_private(&written.env, &env, force)?;
    Ok(written)
}

/// Creates the file with mode 0600 from the start (never a moment with a
/// wider mode), refusing an existing one unless `force`.
fn write_private(path: &Path, contents: &str, force: bool) -> anyhow::Result<()> {
    if force && path.exists() {
        std::fs::remove_file(path).with_context(|| format!("cannot replace {}", path.display()))?;
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn sample() -> (SecretString, SecretString) {
        (
            SecretString::from("-----BEGIN PRIVATE KEY-----\nx\n"),
            SecretString::from("s3cret"),
        )
    }

    #[test]
    fn credentials_are_written_owner_only_with_an_env_file_naming_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (key, secret) = sample();
        let new = NewCredentials {
            app_id: 42,
            private_key: &key,
            webhook_secret: &secret,
            api_url: None,
        };
        let written = write(&dir.path().join("app"), &new, false).expect("written");
        for path in [&written.key, &written.secret, &written.env] {
            let mode = std::fs::metadata(path)
                .expect("exists")
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
        let env = std::fs::read_to_string(&written.env).expect("env file");
        assert!(env.contains("AUTOFORGE_GITHUB_APP_ID=42\n"));
        assert!(env.contains(&format!(
            "AUTOFORGE_GITHUB_PRIVATE_KEY_FILE={}",
            written.key.display()
        )));
        assert!(
            !env.contains("s3cret"),
            "the env file names the secret's file, not the secret"
        );
        assert_eq!(
            std::fs::read_to_string(&written.secret).expect("secret"),
            "s3cret"
        );
    }

    #[test]
    fn existing_credentials_are_kept_unless_forced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (key, secret) = sample();
        let new = NewCredentials {
            app_id: 1,
            private_key: &key,
            webhook_secret: &secret,
            api_url: None,
        };
        write(dir.path(), &new, false).expect("first write");
        let error = write(dir.path(), &new, false).expect_err("second write refused");
        assert!(error.to_string().contains("--force"), "{error}");
        let again = NewCredentials { app_id: 2, ..new };
        let written = write(dir.path(), &again, true).expect("forced");
        assert!(
            std::fs::read_to_string(written.env)
                .expect("env")
                .contains("APP_ID=2")
        );
    }
}
