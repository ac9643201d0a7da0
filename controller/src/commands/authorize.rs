//! Who may steer a run: the pure operator decision.
//!
//! The caller fetches the actor's repository permission from GitHub at
//! decision time and passes it in; the payload's `author_association` is a
//! snapshot taken when the event fired and may be stale by the time we act. Bots can never be operators, whatever their permission:
//! otherwise an App with write access, or autoforge itself, could start or
//! approve work with no human involved.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Repository permission levels, ordered from least to most privileged as
/// GitHub ranks them. The one permission type of the crate: the config's
/// `operators.min_permission` and the collaborator-permission endpoint both
/// use it (`none` only ever comes from the endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    None,
    Read,
    Triage,
    Write,
    Maintain,
    Admin,
}

/// A permission name that GitHub or the configuration used and we do not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown repository permission `{0}` (expected none, read, triage, write, maintain or admin)"
)]
pub struct UnknownPermission(pub String);

impl FromStr for Permission {
    type Err = UnknownPermission;

    /// Accepts both the `permission` and the `role_name` vocabulary of the
    /// collaborator-permission endpoint (`pull`/`push` are legacy aliases).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Permission::None),
            "read" | "pull" => Ok(Permission::Read),
            "triage" => Ok(Permission::Triage),
            "write" | "push" => Ok(Permission::Write),
            "maintain" => Ok(Permission::Maintain),
            "admin" => Ok(Permission::Admin),
            _ => Err(UnknownPermission(name.to_owned())),
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Permission::None => "none",
            Permission::Read => "read",
            Permission::Triage => "triage",
            Permission::Write => "write",
            Permission::Maintain => "maintain",
            Permission::Admin => "admin",
        })
    }
}

/// GitHub account types that matter for authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ActorKind {
    User,
    Bot,
}

/// The account that wrote a command or added the trigger label.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Actor {
    pub login: String,
    pub kind: ActorKind,
}

/// `operators.*` from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorPolicy {
    /// Minimum repository permission that makes a person an operator.
    pub min_permission: Permission,
    /// Logins that are operators regardless of their permission.
    pub allow: Vec<String>,
}

impl Default for OperatorPolicy {
    fn default() -> Self {
        OperatorPolicy {
            min_permission: Permission::Write,
            allow: Vec::new(),
        }
    }
}

/// Why an actor is not an operator; `Display` is the reply text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefusalReason {
    #[error("bot accounts cannot operate autoforge")]
    BotAccount,
    #[error("autoforge does not take commands from itself")]
    TheAppItself,
    #[error("`{login}` has `{actual}` permission; operators need at least `{required}`")]
    InsufficientPermission {
        login: String,
        actual: Permission,
        required: Permission,
    },
}

/// Why an actor is an operator, recorded with the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowedBy {
    AllowList,
    Permission(Permission),
}

/// Whether `login` is the controller's own account `own_login` (see
/// [`decide_operator`]): the login itself, or the App's slug with or without
/// the `[bot]` suffix. An empty `own_login` matches nobody.
pub fn is_own_login(login: &str, own_login: &str) -> bool {
    let own = own_login.to_ascii_lowercase();
    if own.is_empty() {
        return false;
    }
    let base = own.strip_suffix("[bot]").unwrap_or(&own);
    let login = login.to_ascii_lowercase();
    login == own || login == base || login == format!("{base}[bot]")
}

/// The outcome of [`decide_operator`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorDecision {
    Allowed { by: AllowedBy },
    Refused { reason: RefusalReason },
}

impl OperatorDecision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, OperatorDecision::Allowed { .. })
    }

    /// Refused because the actor is the controller's own account.
    pub fn is_the_app_itself(&self) -> bool {
        matches!(
            self,
            OperatorDecision::Refused {
                reason: RefusalReason::TheAppItself
            }
        )
    }
}

/// Decides whether `actor`, holding `permission` on the repository, is an
/// operator under `policy`. `own_login` is the controller's own account:
/// `<slug>[bot]` for an App (the bare slug is accepted too), the token's
/// user with a personal token, whose comments must never count as a
/// person's. GitHub logins are case-insensitive, so comparisons are.
pub fn decide_operator(
    actor: &Actor,
    permission: Permission,
    policy: &OperatorPolicy,
    own_login: &str,
) -> OperatorDecision {
    if is_own_login(&actor.login, own_login) {
        return refused(RefusalReason::TheAppItself);
    }
    let login = actor.login.to_ascii_lowercase();
    if actor.kind == ActorKind::Bot || login.ends_with("[bot]") {
        return refused(RefusalReason::BotAccount);
    }
    if policy
        .allow
        .iter()
        .any(|allowed| allowed.eq_ignore_ascii_case(&actor.login))
    {
        return OperatorDecision::Allowed {
            by: AllowedBy::AllowList,
        };
    }
    if permission >= policy.min_permission {
        return OperatorDecision::Allowed {
            by: AllowedBy::Permission(permission),
        };
    }
    refused(RefusalReason::InsufficientPermission {
        login: actor.login.clone(),
        actual: permission,
        required: policy.min_permission,
    })
}

fn refused(reason: RefusalReason) -> OperatorDecision {
    OperatorDecision::Refused { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(login: &str) -> Actor {
        Actor {
            login: login.to_owned(),
            kind: ActorKind::User,
        }
    }

    fn decide(actor: &Actor, permission: Permission, policy: &OperatorPolicy) -> OperatorDecision {
        decide_operator(actor, permission, policy, "autoforge")
    }

    #[test]
    fn permissions_are_ordered_by_privilege() {
        use Permission::*;
        assert!(None < Read && Read < Triage && Triage < Write);
        assert!(Write < Maintain && Maintain < Admin);
    }

    #[test]
    fn serde_names_equal_the_display_names() {
        use Permission::*;
        for level in [None, Read, Triage, Write, Maintain, Admin] {
            let json = serde_json::to_string(&level).expect("serialises");
            assert_eq!(json, format!("\"{level}\""));
            assert_eq!(serde_json::from_str::<Permission>(&json).ok(), Some(level));
        }
    }

    #[test]
    fn permission_names_from_both_vocabularies_parse() {
        assert_eq!("admin".parse(), Ok(Permission::Admin));
        assert_eq!("push".parse(), Ok(Permission::Write));
        assert_eq!("pull".parse(), Ok(Permission::Read));
        assert_eq!("Maintain".parse(), Ok(Permission::Maintain));
        assert_eq!(
            "owner".parse::<Permission>(),
            Err(UnknownPermission("owner".to_owned()))
        );
    }

    #[test]
    fn writer_is_an_operator_under_the_default_policy() {
        let decision = decide(
            &user("alice"),
            Permission::Write,
            &OperatorPolicy::default(),
        );
        assert_eq!(
            decision,
            OperatorDecision::Allowed {
                by: AllowedBy::Permission(Permission::Write)
            }
        );
    }

    #[test]
    fn triager_is_refused_with_both_levels_named() {
        let decision = decide(&user("bob"), Permission::Triage, &OperatorPolicy::default());
        let OperatorDecision::Refused { reason } = decision else {
            panic!("triage must not be enough");
        };
        assert_eq!(
            reason.to_string(),
            "`bob` has `triage` permission; operators need at least `write`"
        );
    }

    #[test]
    fn raised_minimum_refuses_writers() {
        let policy = OperatorPolicy {
            min_permission: Permission::Maintain,
            allow: vec![],
        };
        assert!(!decide(&user("alice"), Permission::Write, &policy).is_allowed());
        assert!(decide(&user("alice"), Permission::Admin, &policy).is_allowed());
    }

    #[test]
    fn allow_list_admits_a_reader_case_insensitively() {
        let policy = OperatorPolicy {
            min_permission: Permission::Write,
            allow: vec!["Carol".to_owned()],
        };
        assert_eq!(
            decide(&user("carol"), Permission::Read, &policy),
            OperatorDecision::Allowed {
                by: AllowedBy::AllowList
            }
        );
    }

    #[test]
    fn bot_account_is_never_an_operator_even_as_admin_or_allow_listed() {
        let bot = Actor {
            login: "helper".to_owned(),
            kind: ActorKind::Bot,
        };
        let policy = OperatorPolicy {
            min_permission: Permission::Write,
            allow: vec!["helper".to_owned()],
        };
        assert_eq!(
            decide(&bot, Permission::Admin, &policy),
            OperatorDecision::Refused {
                reason: RefusalReason::BotAccount
            }
        );
    }

    #[test]
    fn bot_suffixed_login_is_refused_even_when_typed_as_user() {
        assert_eq!(
            decide(
                &user("dependabot[bot]"),
                Permission::Admin,
                &OperatorPolicy::default()
            ),
            OperatorDecision::Refused {
                reason: RefusalReason::BotAccount
            }
        );
    }

    #[test]
    fn a_personal_tokens_own_user_is_never_an_operator_even_as_admin() {
        let policy = OperatorPolicy {
            min_permission: Permission::Write,
            allow: vec!["robot-account".to_owned()],
        };
        assert_eq!(
            decide_operator(
                &user("Robot-Account"),
                Permission::Admin,
                &policy,
                "robot-account"
            ),
            OperatorDecision::Refused {
                reason: RefusalReason::TheAppItself
            }
        );
        assert!(
            decide_operator(
                &user("someone"),
                Permission::Admin,
                &policy,
                "robot-account"
            )
            .is_allowed()
        );
        assert!(!is_own_login("anyone", ""));
    }

    #[test]
    fn the_app_itself_is_refused_by_slug_and_bot_login() {
        for login in ["autoforge[bot]", "AutoForge"] {
            assert_eq!(
                decide(&user(login), Permission::Admin, &OperatorPolicy::default()),
                OperatorDecision::Refused {
                    reason: RefusalReason::TheAppItself
                },
                "{login}"
            );
        }
    }
}
