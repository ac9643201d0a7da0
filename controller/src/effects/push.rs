//! `push`: the exact candidate SHA to `refs/heads/autoforge/<n>` (SPEC §6
//! rule 6).
//!
//! Guards, all in code: the ref must be under `refs/heads/autoforge/` and
//! must not be the default branch; the push carries a lease on the expected
//! old value (`--force-with-lease=<ref>:<old>`, empty = must not exist) and
//! never `--force`; and because a lease alone would allow a non-fast-forward,
//! the mirror proves locally that the old value is an ancestor of the new
//! one before anything is sent. Nothing here deletes a ref. The token goes
//! to git only through the workspace module's environment-only mechanism.

use std::ffi::OsStr;

use autoforge_journal::{Effect, EffectKind, NewEffect};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::EffectError;
use super::executor::{EffectExecutor, PushTransport};
use super::planning::{Draft, PlanError};
use super::protocol::{Observation, Sent, read_failed};
use super::row::{Row, payload};
use crate::github::encode_path;
use crate::redact::Redactor;
use crate::workspace::CommitSha;

/// The only ref namespace the executor pushes to.
pub const PUSH_NAMESPACE: &str = "refs/heads/autoforge/";

/// The commit to push and the tip the lease expects (`None`: no branch).
#[derive(Serialize, Deserialize)]
struct PushPayload {
    sha: CommitSha,
    expected_old: Option<CommitSha>,
}

/// The tip the branch must still have when the push is sent.
#[derive(Serialize, Deserialize)]
struct PushPrecondition {
    expected_old: Option<CommitSha>,
}

/// Read-back must show the branch at `sha`.
#[derive(Serialize, Deserialize)]
struct PushCompletion {
    sha: CommitSha,
    write: String,
}

/// `sha` to `refs/heads/<branch>`, leased on `expected_old`. A ref the
/// executor may not push to is refused before anything is journalled.
pub(crate) fn plan(
    draft: Draft<'_>,
    branch: &str,
    sha: &CommitSha,
    expected_old: Option<&CommitSha>,
) -> Result<NewEffect, PlanError> {
    let ref_name = format!("refs/heads/{branch}");
    if let Some(refusal) = refused_ref(&ref_name, draft.ctx.default_branch) {
        return Err(PlanError::Refused(refusal));
    }
    let expected_old = expected_old.cloned();
    let row = Row {
        target: ref_name,
        precondition: PushPrecondition {
            expected_old: expected_old.clone(),
        },
        payload: PushPayload {
            sha: sha.clone(),
            expected_old,
        },
        completion: PushCompletion {
            sha: sha.clone(),
            write: draft.write.clone(),
        },
    };
    draft.finish(EffectKind::Push, row)
}

/// Why a ref may not be pushed to, or `None` when it may.
pub fn refused_ref(ref_name: &str, default_branch: &str) -> Option<String> {
    let Some(branch) = ref_name.strip_prefix("refs/heads/") else {
        return Some(format!("`{ref_name}` is not a branch ref"));
    };
    if branch == default_branch {
        return Some(format!("`{ref_name}` is the default branch"));
    }
    let Some(rest) = ref_name.strip_prefix(PUSH_NAMESPACE) else {
        return Some(format!("`{ref_name}` is outside {PUSH_NAMESPACE}"));
    };
    let well_formed = !rest.is_empty()
        && rest.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && !part.ends_with(".lock")
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
        && !rest.contains("..");
    (!well_formed).then(|| format!("`{ref_name}` is not a ref name the controller derives"))
}

fn transport<'a>(
    executor: &'a EffectExecutor,
    effect: &Effect,
) -> Result<&'a PushTransport, EffectError> {
    executor.push.as_ref().ok_or(EffectError::Missing {
        kind: effect.kind,
        what: "a git push transport",
    })
}

/// The branch tip GitHub shows, or `None` when the branch does not exist.
async fn remote_tip(
    executor: &EffectExecutor,
    ref_name: &str,
) -> Result<Option<CommitSha>, EffectError> {
    #[derive(Deserialize)]
    struct Object {
        sha: CommitSha,
    }
    #[derive(Deserialize)]
    struct GitRef {
        object: Object,
    }
    let short = ref_name.trim_start_matches("refs/");
    let path = executor
        .repo
        .api_path(&format!("/git/ref/{}", encode_path(short)));
    match executor.api.get_json::<GitRef>(&path).await {
        Ok(found) => Ok(Some(found.object.sha)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(read_failed(error)),
    }
}

pub(crate) async fn reconcile(
    executor: &EffectExecutor,
    effect: &Effect,
) -> Result<Observation, EffectError> {
    let wanted: PushPayload = payload(effect)?;
    let transport = transport(executor, effect)?;
    let ref_name = effect.target.as_str();
    if let Some(refusal) = refused_ref(ref_name, &transport.default_branch) {
        return Ok(Observation::Blocked(format!("push refused: {refusal}")));
    }
    let tip = remote_tip(executor, ref_name).await?;
    if tip.as_ref() == Some(&wanted.sha) {
        return Ok(Observation::Present(
            json!({ "ref": ref_name, "sha": wanted.sha }),
        ));
    }
    if tip != wanted.expected_old {
        return Ok(Observation::Conflict(format!(
            "{ref_name} is at {} but the push expected {}; it is never forced",
            tip.as_ref().map_or("nothing", CommitSha::as_str),
            wanted
                .expected_old
                .as_ref()
                .map_or("no branch", CommitSha::as_str),
        )));
    }
    if let Some(old) = &wanted.expected_old {
        let new = &wanted.sha;
        let mirror = &transport.mirror;
        mirror
            .fetch_shas(std::slice::from_ref(old), Some(&transport.credential))
            .await
            .map_err(|e| EffectError::Git(e.to_string()))?;
        let fast_forward = mirror
            .is_ancestor(old, new)
            .await
            .map_err(|e| EffectError::Git(e.to_string()))?;
        if !fast_forward {
            return Ok(Observation::Conflict(format!(
                "{new} does not descend from {old}; {ref_name} would not fast-forward"
            )));
        }
    }
    Ok(Observation::Absent)
}

pub(crate) async fn send(executor: &EffectExecutor, effect: &Effect) -> Result<Sent, EffectError> {
    let wanted: PushPayload = payload(effect)?;
    let transport = transport(executor, effect)?;
    let ref_name = effect.target.as_str();
    // Checked again right before the send: this is the last line of defence.
    if let Some(refusal) = refused_ref(ref_name, &transport.default_branch) {
        return Ok(Sent::Refused(refusal));
    }
    let new = &wanted.sha;
    let lease = format!(
        "--force-with-lease={ref_name}:{}",
        wanted.expected_old.as_ref().map_or("", CommitSha::as_str)
    );
    let refspec = format!("{new}:{ref_name}");
    let mirror = &transport.mirror;
    let args = [
        OsStr::new("--git-dir"),
        mirror.path().as_os_str(),
        OsStr::new("push"),
        OsStr::new("--porcelain"),
        OsStr::new("--no-verify"),
        OsStr::new(&lease),
        OsStr::new(&transport.url),
        OsStr::new(&refspec),
    ];
    let output = mirror
        .git()
        .output(mirror.path(), &args, Some(&transport.credential))
        .await
        .map_err(|e| EffectError::Git(e.to_string()))?;
    if output.status.success() {
        return Ok(Sent::Answered);
    }
    let redactor = Redactor::new().with_secret(transport.credential.clone());
    let said = format!(
        "{} {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let said = redactor
        .redact(said.trim())
        .chars()
        .take(2000)
        .collect::<String>();
    // The server's refusals are definitive; anything else (no answer, a
    // dropped connection) may or may not have moved the ref.
    let refused = [
        "[rejected]",
        "[remote rejected]",
        "stale info",
        "non-fast-forward",
    ]
    .iter()
    .any(|sign| said.contains(sign));
    Ok(if refused {
        Sent::Refused(format!("git push was rejected: {said}"))
    } else {
        Sent::Unknown(format!("git push failed: {said}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_controller_branches_other_than_the_default_may_be_pushed() {
        assert_eq!(refused_ref("refs/heads/autoforge/12", "main"), None);
        for bad in [
            "refs/heads/main",
            "refs/heads/feature",
            "refs/tags/autoforge/1",
            "autoforge/1",
            "refs/heads/autoforge/",
            "refs/heads/autoforge/../main",
            "refs/heads/autoforge/x.lock",
        ] {
            assert!(refused_ref(bad, "main").is_some(), "{bad}");
        }
        assert!(refused_ref("refs/heads/autoforge/1", "autoforge/1").is_some());
    }
}
