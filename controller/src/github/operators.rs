//! The operator check with fresh GitHub state (SPEC §2): the pure decision
//! from `commands`, fed with the collaborator permission read right now.

use super::client::GitHubApi;
use super::error::GitHubError;
use super::paths::RepoName;
use crate::commands::{
    Actor, OperatorDecision, OperatorPolicy, Permission, RefusalReason, decide_operator,
};

impl GitHubApi {
    /// Decides whether `actor` may steer runs in `repo`. Bots, the controller's
    /// own account (`own_login`, see [`decide_operator`]) and
    /// allow-listed logins are decided without a request; everyone else's
    /// permission is read from the collaborator-permission endpoint, never
    /// taken from a payload.
    pub async fn operator_decision(
        &self,
        repo: &RepoName,
        actor: &Actor,
        policy: &OperatorPolicy,
        own_login: &str,
    ) -> Result<OperatorDecision, GitHubError> {
        let without_permission = decide_operator(actor, Permission::None, policy, own_login);
        let needs_permission = matches!(
            without_permission,
            OperatorDecision::Refused {
                reason: RefusalReason::InsufficientPermission { .. }
            }
        );
        if !needs_permission {
            return Ok(without_permission);
        }
        let permission = self.collaborator_permission(repo, &actor.login).await?;
        Ok(decide_operator(actor, permission, policy, own_login))
    }
}
