//! Checks the schema cannot express. Value checks run on the JSON document,
//! before typed deserialisation, so each failure keeps its key path; cross
//! checks run on the typed settings through the same conversion into the
//! agent catalog that the runtime uses (roles naming defined profiles,
//! review round ranges covering every round once, profile rules).

use serde_json::Value;

use super::agents::pointer_to_key;
use super::env::Provenance;
use super::problem::Problem;
use super::schema::dotted_key;
use super::settings::{PlanMode, ServerSettings, Settings};
use crate::agents::profile::{OutputFormat, OutputKind, RoundRange, UsagePattern};

/// Values that must parse as something richer than the schema knows.
pub(crate) fn check_values(doc: &Value, provenance: &Provenance) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut report = |pointer: &str, rule: &str, message: String| {
        problems.push(
            Problem::new(dotted_key(doc, pointer), rule, message)
                .with_env_var(provenance.var_for(pointer)),
        );
    };

    for (pointer, example) in [
        ("/server/listen", "127.0.0.1:8080"),
        ("/server/admin_listen", "127.0.0.1:8081"),
    ] {
        if let Some(listen) = doc.pointer(pointer).and_then(Value::as_str)
            && listen.parse::<std::net::SocketAddr>().is_err()
        {
            report(
                pointer,
                "socket-address",
                format!("`{listen}` is not IP:PORT, e.g. {example}"),
            );
        }
    }
    if let Some(path) = doc.pointer("/webhook/path").and_then(Value::as_str)
        && let Some(taken) = route_served_by_serve(path)
    {
        report(
            "/webhook/path",
            "free-path",
            format!("`{path}` is where serve answers {taken}; pick another path"),
        );
    }
    if let Some(url) = doc.pointer("/github/api_url").and_then(Value::as_str)
        && let Err(message) = check_http_url(url)
    {
        report("/github/api_url", "http-url", message);
    }
    if let Some(filter) = doc.pointer("/logging/filter").and_then(Value::as_str)
        && let Err(error) = tracing_subscriber::EnvFilter::builder().parse(filter)
    {
        report("/logging/filter", "log-filter", error.to_string());
    }
    let profiles = doc.pointer("/agents/profiles").and_then(Value::as_object);
    for (name, profile) in profiles.into_iter().flatten() {
        if let Some(pattern) = profile.get("usage_pattern").and_then(Value::as_str)
            && let Err(message) = UsagePattern::parse(pattern)
        {
            let name = name.replace('~', "~0").replace('/', "~1");
            report(
                &format!("/agents/profiles/{name}/usage_pattern"),
                "regex",
                message,
            );
        }
    }
    let routes = doc
        .pointer("/agents/roles/review")
        .and_then(Value::as_array);
    for (index, route) in routes.into_iter().flatten().enumerate() {
        if let Some(rounds) = route.get("rounds").and_then(Value::as_str)
            && let Err(error) = rounds.parse::<RoundRange>()
        {
            report(
                &format!("/agents/roles/review/{index}/rounds"),
                "round-range",
                error.to_string(),
            );
        }
    }
    problems
}

/// What `serve` already answers at `path` (health, readiness, metrics, the
/// dashboard), so the webhook cannot be put there; `None` when it is free.
fn route_served_by_serve(path: &str) -> Option<&'static str> {
    let path = path.trim_end_matches('/');
    match path {
        "" => Some("the dashboard"),
        "/healthz" => Some("health checks"),
        "/readyz" => Some("readiness checks"),
        "/metrics" => Some("metrics"),
        _ if path == "/runs" || path.starts_with("/runs/") => Some("the dashboard's runs"),
        _ => None,
    }
}

fn check_http_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) if uri.query().is_none() => Ok(()),
        _ => Err(format!(
            "`{url}` is not an absolute http(s) URL without a query"
        )),
    }
}

/// Consistency between keys of the typed settings: the two listeners must
/// not share a socket, and the agent section must convert into the runtime
/// catalog, for the configured round cap.
pub(crate) fn check_cross_references(settings: &Settings, provenance: &Provenance) -> Vec<Problem> {
    let mut found = Vec::new();
    if let Some(message) = listeners_collide(&settings.server) {
        found.push((
            "/server/admin_listen".to_owned(),
            "distinct-listeners",
            message,
        ));
    }
    if let Err(problems) = settings
        .agents
        .catalog_pointed(settings.limits.review_rounds)
    {
        found.extend(problems);
    }
    if settings.plan.mode != PlanMode::Off && settings.agents.roles.plan.is_none() {
        found.push((
            "/agents/roles/plan".to_owned(),
            "plan-role",
            format!(
                "plan.mode is `{}` but no profile plays the plan role; name a read-only \
                 profile in agents.roles.plan, or set plan.mode = \"off\"",
                settings.plan.mode
            ),
        ));
    }
    found
        .into_iter()
        .map(|(pointer, rule, message)| {
            Problem::new(pointer_to_key(&pointer), rule, message)
                .with_env_var(provenance.var_for(&pointer))
        })
        .collect()
}

/// Why the webhook and admin listeners cannot both be bound, if they
/// cannot: the same port on the same address, or on an address that
/// includes the other (`0.0.0.0`, `[::]`). Port 0 lets the system pick a
/// free port for each, so it never collides.
fn listeners_collide(server: &ServerSettings) -> Option<String> {
    let (webhook, admin) = (server.listen, server.admin_listen);
    let overlapping =
        webhook.ip() == admin.ip() || webhook.ip().is_unspecified() || admin.ip().is_unspecified();
    (webhook.port() != 0 && webhook.port() == admin.port() && overlapping).then(|| {
        format!(
            "the admin listener `{admin}` would share a socket with the webhook listener \
             `{webhook}` (server.listen); give it its own port, so that what publishes \
             /webhook does not also publish the dashboard and /metrics"
        )
    })
}

/// Warnings about settings that are valid but leave features unusable.
pub(crate) fn warnings(settings: &Settings) -> Vec<String> {
    let roles = &settings.agents.roles;
    let unset: Vec<&str> = [
        ("implement", roles.implement.is_none()),
        ("review", roles.review.is_none()),
        ("fix", roles.fix.is_none()),
        ("update_epic", roles.update_epic.is_none()),
    ]
    .iter()
    .filter(|(_, unset)| *unset)
    .map(|(role, _)| *role)
    .collect();
    let mut warnings = Vec::new();
    if !unset.is_empty() {
        warnings.push(format!(
            "agents.roles: no profile for {}; runs cannot enter those phases",
            unset.join(", ")
        ));
    }
    if let Some(limit) = settings.limits.tokens_per_run {
        warnings.extend(silent_profiles(settings, limit));
    }
    if let Some(limit) = settings.limits.cost_per_run {
        warnings.extend(unpriced_profiles(settings, limit));
    }
    warnings
}

/// Under a cost limit, one explanation per profile whose launches can never
/// have an estimated cost: no price table, or no usage counts apart.
fn unpriced_profiles(settings: &Settings, limit: f64) -> Vec<String> {
    settings
        .agents
        .profiles
        .iter()
        .filter_map(|(name, profile)| {
            let why = if profile.price.is_none() {
                "it has no [price] table"
            } else if profile.output.format == OutputKind::Text {
                "only usage reported apart (input_tokens, output_tokens, cached_tokens) is \
                 priced, and its output format is text"
            } else {
                return None;
            };
            Some(format!(
                "agents.profiles.{name}: {why}, so its launches have no estimated cost and \
                 count nothing against limits.cost_per_run = {limit}"
            ))
        })
        .collect()
}

/// Under a token limit, one explanation per profile whose output can never
/// report usage: its launches count nothing against the limit, so the
/// limit does not hold for the runs they work on.
fn silent_profiles(settings: &Settings, limit: u64) -> Vec<String> {
    settings
        .agents
        .profiles
        .iter()
        .filter(|(_, profile)| {
            let spec = profile.to_spec();
            OutputFormat::from_spec(spec.output, spec.usage_pattern.as_deref())
                .is_ok_and(|format| !format.reports_usage())
        })
        .map(|(name, profile)| {
            let how = match profile.output.format {
                OutputKind::Text => {
                    "its output format is text and it has no usage_pattern".to_owned()
                }
                format => format!(
                    "its output format is {} but it names none of input_tokens, \
                     output_tokens, cached_tokens",
                    format.as_str()
                ),
            };
            format!(
                "agents.profiles.{name}: {how}, so its launches report no token usage and \
                 count nothing against limits.tokens_per_run = {limit}; declare where the \
                 CLI prints its usage (docs/agents.md shows it for Claude Code, Codex and \
                 OpenCode)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cross(doc: Value) -> Vec<Problem> {
        let settings: Settings = serde_json::from_value(doc).expect("valid settings");
        check_cross_references(&settings, &Provenance::default())
    }

    #[test]
    fn a_profile_without_a_price_is_explained_under_a_cost_limit() {
        let settings: Settings = serde_json::from_value(json!({
            "limits": {"cost_per_run": 5.0},
            "agents": {"profiles": {
                "unpriced": {"command": ["x"], "output": {"format": "json",
                    "input_tokens": "/usage/input_tokens"}},
                "text": {"command": ["y"], "usage_pattern": "t=(\\d+)",
                    "price": {"input": 1.0}},
                "priced": {"command": ["z"], "output": {"format": "json",
                    "input_tokens": "/usage/input_tokens"}, "price": {"input": 3.0, "output": 15.0}},
            }},
        }))
        .expect("valid settings");
        let found = warnings(&settings);
        let about = |name: &str| {
            found
                .iter()
                .find(|w| w.starts_with(&format!("agents.profiles.{name}:")))
                .cloned()
        };
        let unpriced = about("unpriced").expect("unpriced is explained");
        assert!(
            unpriced.contains("no [price] table") && unpriced.contains("= 5"),
            "{unpriced}"
        );
        assert!(
            about("text")
                .expect("text is explained")
                .contains("format is text")
        );
        assert_eq!(about("priced"), None);
        assert_eq!(settings.limits.cost_per_run_micros(), Some(5_000_000));
    }

    #[test]
    fn a_profile_that_reports_no_usage_is_explained_under_a_token_limit() {
        let settings = |limit: Option<u64>| -> Settings {
            serde_json::from_value(json!({
                "limits": {"tokens_per_run": limit},
                "agents": {"profiles": {
                    "plain": {"command": ["x"]},
                    "fields": {"command": ["y"], "output": {"format": "json", "message": "/result"}},
                    "counted": {"command": ["z"], "output": {"format": "json-lines",
                        "input_tokens": "/usage/input_tokens"}},
                    "pattern": {"command": ["w"], "usage_pattern": "t=(\\d+)"},
                }},
            }))
            .expect("valid settings")
        };
        let found = warnings(&settings(Some(1000)));
        let about = |name: &str| {
            found
                .iter()
                .find(|w| w.starts_with(&format!("agents.profiles.{name}:")))
                .cloned()
        };
        let plain = about("plain").expect("plain is explained");
        assert!(
            plain.contains("no usage_pattern") && plain.contains("= 1000"),
            "{plain}"
        );
        let fields = about("fields").expect("fields is explained");
        assert!(fields.contains("format is json but"), "{fields}");
        assert_eq!(about("counted"), None);
        assert_eq!(about("pattern"), None);
        let unlimited = warnings(&settings(None));
        assert!(!unlimited.iter().any(|w| w.starts_with("agents.profiles.")));
    }

    #[test]
    fn listen_address_must_be_ip_and_port() {
        let problems = check_values(
            &json!({"server": {"listen": "localhost"}}),
            &Provenance::default(),
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "server.listen");
        assert_eq!(problems[0].rule, "socket-address");
    }

    #[test]
    fn admin_listen_address_must_be_ip_and_port() {
        let problems = check_values(
            &json!({"server": {"admin_listen": "admin:8081"}}),
            &Provenance::default(),
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "server.admin_listen");
        assert_eq!(problems[0].rule, "socket-address");
    }

    #[test]
    fn the_admin_listener_cannot_share_the_webhook_listeners_socket() {
        let refused = |listen: &str, admin: &str| {
            let problems = cross(json!({"server": {"listen": listen, "admin_listen": admin}}));
            problems
                .iter()
                .any(|p| p.key == "server.admin_listen" && p.rule == "distinct-listeners")
        };
        assert!(refused("127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(refused("0.0.0.0:9000", "127.0.0.1:9000"));
        assert!(refused("127.0.0.1:9000", "[::]:9000"));
        assert!(!refused("127.0.0.1:8080", "127.0.0.1:8081"));
        assert!(!refused("0.0.0.0:8080", "127.0.0.1:8081"));
        assert!(!refused("10.0.0.1:8080", "127.0.0.1:8080"));
        assert!(!refused("127.0.0.1:0", "127.0.0.1:0"));
        assert!(cross(json!({})).is_empty(), "the defaults differ");
    }

    #[test]
    fn malformed_log_filter_is_a_config_problem() {
        let problems = check_values(
            &json!({"logging": {"filter": "info,[x"}}),
            &Provenance::default(),
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "logging.filter");
        assert_eq!(problems[0].rule, "log-filter");
    }

    #[test]
    fn api_url_accepts_github_ghes_and_local_doubles() {
        for url in [
            "https://api.github.com",
            "https://ghe.example.com/api/v3",
            "http://127.0.0.1:8181",
        ] {
            assert!(check_http_url(url).is_ok(), "{url}");
        }
        for url in ["api.github.com", "ftp://x", "https://x/?a=b", "not a url"] {
            assert!(check_http_url(url).is_err(), "{url}");
        }
    }

    #[test]
    fn usage_pattern_is_compiled_at_check_time() {
        let doc =
            json!({"agents": {"profiles": {"p": {"command": ["x"], "usage_pattern": "(oops"}}}});
        let problems = check_values(&doc, &Provenance::default());
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "agents.profiles.p.usage_pattern");
        assert_eq!(problems[0].rule, "regex");
    }

    #[test]
    fn reversed_round_range_is_named_by_index() {
        let doc = json!({"agents": {"roles": {"review": [{"rounds": "5-2", "profile": "p"}]}}});
        let problems = check_values(&doc, &Provenance::default());
        assert_eq!(problems[0].key, "agents.roles.review[0].rounds");
    }

    #[test]
    fn role_naming_an_undefined_profile_is_refused() {
        let problems = cross(json!({
            "agents": {"profiles": {"claude": {"command": ["claude"]}}, "roles": {"implement": "claude", "fix": "codex"}}
        }));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "agents.roles.fix");
        assert_eq!(problems[0].rule, "profile-defined");
        assert!(problems[0].message.contains("`codex`"));
    }

    #[test]
    fn overlapping_review_ranges_are_refused() {
        let problems = cross(json!({
            "agents": {
                "profiles": {"a": {"command": ["a"]}, "b": {"command": ["b"]}},
                "roles": {"review": [{"rounds": "1-3", "profile": "a"}, {"rounds": "2+", "profile": "b"}]}
            }
        }));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].rule, "round-coverage");
        assert!(problems[0].message.contains("overlap"));
    }

    #[test]
    fn review_route_with_an_undefined_profile_is_named_by_index() {
        let problems = cross(json!({
            "agents": {
                "profiles": {"a": {"command": ["a"]}},
                "roles": {"review": [{"rounds": "1", "profile": "a"}, {"rounds": "2+", "profile": "zz"}]}
            }
        }));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "agents.roles.review[1].profile");
    }

    #[test]
    fn a_plan_mode_without_a_plan_profile_is_refused_naming_the_role() {
        let problems = cross(json!({"plan": {"mode": "approve"}}));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "agents.roles.plan");
        assert_eq!(problems[0].rule, "plan-role");
        let planned = cross(json!({
            "plan": {"mode": "post"},
            "agents": {"profiles": {"a": {"command": ["a"]}}, "roles": {"plan": "a"}}
        }));
        assert!(planned.is_empty(), "{planned:?}");
        assert!(cross(json!({"plan": {"mode": "off"}})).is_empty());
    }

    #[test]
    fn unset_roles_draw_one_warning() {
        let warnings = warnings(&Settings::default());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("implement, review, fix, update_epic"));
    }
}
