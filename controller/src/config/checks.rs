//! Checks the schema cannot express. Value checks run on the JSON document,
//! before typed deserialisation, so each failure keeps its key path; cross
//! checks run on the typed settings (roles naming defined profiles, review
//! round ranges covering every round once).

use serde_json::Value;

use super::agents::{ReviewRole, RoundRange, UsagePattern, review_coverage_findings};
use super::env::Provenance;
use super::problem::Problem;
use super::schema::dotted_key;
use super::settings::Settings;

/// Values that must parse as something richer than the schema knows.
pub(crate) fn check_values(doc: &Value, provenance: &Provenance) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut report = |pointer: &str, rule: &str, message: String| {
        problems.push(
            Problem::new(dotted_key(doc, pointer), rule, message)
                .with_env_var(provenance.var_for(pointer)),
        );
    };

    if let Some(listen) = doc.pointer("/server/listen").and_then(Value::as_str)
        && listen.parse::<std::net::SocketAddr>().is_err()
    {
        report(
            "/server/listen",
            "socket-address",
            format!("`{listen}` is not IP:PORT, e.g. 127.0.0.1:8080"),
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
            && let Err(message) = rounds.parse::<RoundRange>()
        {
            report(
                &format!("/agents/roles/review/{index}/rounds"),
                "round-range",
                message,
            );
        }
    }
    problems
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

/// Consistency between sections of the typed settings.
pub(crate) fn check_cross_references(settings: &Settings, provenance: &Provenance) -> Vec<Problem> {
    let mut problems = Vec::new();
    let agents = &settings.agents;
    let roles = [
        ("implement", agents.roles.implement.as_deref()),
        ("fix", agents.roles.fix.as_deref()),
        ("update_epic", agents.roles.update_epic.as_deref()),
    ];
    let mut referenced: Vec<(String, &str)> = roles
        .iter()
        .filter_map(|(role, profile)| {
            profile.map(|profile| (format!("/agents/roles/{role}"), profile))
        })
        .collect();
    match &agents.roles.review {
        Some(ReviewRole::Always(profile)) => {
            referenced.push(("/agents/roles/review".to_owned(), profile))
        }
        Some(ReviewRole::ByRound(routes)) => {
            for (index, route) in routes.iter().enumerate() {
                referenced.push((
                    format!("/agents/roles/review/{index}/profile"),
                    &route.profile,
                ));
            }
            let ranges: Vec<RoundRange> = routes.iter().map(|route| route.rounds).collect();
            for finding in review_coverage_findings(&ranges, settings.limits.review_rounds) {
                problems.push(
                    Problem::new("agents.roles.review", "round-coverage", finding)
                        .with_env_var(provenance.var_for("/agents/roles/review")),
                );
            }
        }
        None => {}
    }
    for (pointer, profile) in referenced {
        if !agents.profiles.contains_key(profile) {
            let known: Vec<&str> = agents.profiles.keys().map(String::as_str).collect();
            let known = if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            };
            problems.push(
                Problem::new(
                    pointer_to_key(&pointer),
                    "profile-defined",
                    format!(
                        "profile `{profile}` is not defined in agents.profiles (defined: {known})"
                    ),
                )
                .with_env_var(provenance.var_for(&pointer)),
            );
        }
    }
    for (name, profile) in &agents.profiles {
        if profile.max_runtime_seconds < profile.idle_timeout_seconds {
            problems.push(Problem::new(
                format!("agents.profiles.{name}.max_runtime_seconds"),
                "runtime-covers-idle-timeout",
                "is shorter than idle_timeout_seconds, so the idle timeout could never fire",
            ));
        }
    }
    problems
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
    warnings
}

/// Pointers built here never contain array indices under objects named like
/// numbers, so a plain join is exact.
fn pointer_to_key(pointer: &str) -> String {
    let mut key = String::new();
    for segment in pointer.split('/').skip(1) {
        if segment.chars().all(|c| c.is_ascii_digit()) {
            key.push_str(&format!("[{segment}]"));
        } else {
            if !key.is_empty() {
                key.push('.');
            }
            key.push_str(segment);
        }
    }
    key
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
    fn unset_roles_draw_one_warning() {
        let warnings = warnings(&Settings::default());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("implement, review, fix, update_epic"));
    }
}
