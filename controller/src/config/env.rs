//! Environment overrides: every key of the schema's sections can be set as
//! `AUTOFORGE_<SECTION>_<KEY>`. Scalars are parsed per the key's type, lists
//! of scalars are comma-separated, and richer values (maps, lists of lists,
//! the review routes) are written as JSON. The variables are written into
//! the JSON document before schema validation, so a bad value from the
//! environment is reported exactly like one from the file, naming the variable.
//! An `AUTOFORGE_*` variable that is neither a key nor one of the secret and
//! test-hook variables is an error too: a misspelt name would otherwise
//! leave the default silently in place.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use super::problem::Problem;
use super::schema;

/// Prefix shared by every autoforge environment variable.
pub const ENV_PREFIX: &str = "AUTOFORGE_";
/// Path of the config file when `--config` is not given.
pub const CONFIG_FILE_VAR: &str = "AUTOFORGE_CONFIG";
/// The webhook HMAC secret itself.
pub const WEBHOOK_SECRET_VAR: &str = "AUTOFORGE_WEBHOOK_SECRET";
/// A file holding the webhook HMAC secret.
pub const WEBHOOK_SECRET_FILE_VAR: &str = "AUTOFORGE_WEBHOOK_SECRET_FILE";
/// A GitHub token (PAT or similar).
pub const GITHUB_TOKEN_VAR: &str = "AUTOFORGE_GITHUB_TOKEN";
/// A file holding a GitHub token.
pub const GITHUB_TOKEN_FILE_VAR: &str = "AUTOFORGE_GITHUB_TOKEN_FILE";
/// A PEM file holding the GitHub App private key.
pub const GITHUB_PRIVATE_KEY_FILE_VAR: &str = "AUTOFORGE_GITHUB_PRIVATE_KEY_FILE";
/// The dashboard's access token (required on a non-loopback listener).
pub const DASHBOARD_TOKEN_VAR: &str = "AUTOFORGE_DASHBOARD_TOKEN";
/// A file holding the dashboard's access token.
pub const DASHBOARD_TOKEN_FILE_VAR: &str = "AUTOFORGE_DASHBOARD_TOKEN_FILE";
/// Postgres connection URL; wins over `database.url`.
pub const DATABASE_URL_VAR: &str = "DATABASE_URL";

/// `AUTOFORGE_*` variables that are not config keys. Every such variable
/// the product reads must be listed here: loading refuses any other
/// `AUTOFORGE_*` name as unknown.
const NON_KEY_VARS: &[&str] = &[
    CONFIG_FILE_VAR,
    WEBHOOK_SECRET_VAR,
    WEBHOOK_SECRET_FILE_VAR,
    GITHUB_TOKEN_VAR,
    GITHUB_TOKEN_FILE_VAR,
    GITHUB_PRIVATE_KEY_FILE_VAR,
    DASHBOARD_TOKEN_VAR,
    DASHBOARD_TOKEN_FILE_VAR,
    // Set for the test suite (the real agent CLIs' cache, and their skip switch).
    "AUTOFORGE_AGENT_CLI_CACHE",
    "AUTOFORGE_REAL_AGENTS",
];

/// A snapshot of environment variables. Loading reads only this snapshot, so
/// tests can give exact inputs without touching the process environment.
/// `Debug` lists names only: values may be secrets.
#[derive(Clone, Default)]
pub struct Environment {
    vars: BTreeMap<String, String>,
    not_unicode: Vec<String>,
}

impl Environment {
    /// The current process environment. Variables whose name or value is not
    /// UTF-8 are left out; `AUTOFORGE_*` ones among them draw a warning.
    pub fn from_process() -> Self {
        let mut env = Self::default();
        for (name, value) in std::env::vars_os() {
            match (name.into_string(), value.into_string()) {
                (Ok(name), Ok(value)) => {
                    env.vars.insert(name, value);
                }
                (Ok(name), Err(_)) if name.starts_with(ENV_PREFIX) || name == DATABASE_URL_VAR => {
                    env.not_unicode.push(name);
                }
                _ => {}
            }
        }
        env
    }

    /// An environment holding exactly `pairs`.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            not_unicode: Vec::new(),
        }
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The value of `name` if set and not empty: an empty variable counts as unset.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|value| !value.is_empty())
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.vars.keys().map(String::as_str)
    }
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Environment")
            .field("names", &self.vars.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// How a variable's text becomes a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
    String,
    Integer,
    Boolean,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    One(Scalar),
    /// Comma-separated items, or a JSON array.
    List(Scalar),
    /// A string, or JSON when the text starts with `[` or `{`.
    StringOrJson,
    /// JSON text.
    Json,
}

/// A key that can be set from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvKey {
    pub var: String,
    pub path: Vec<String>,
    shape: Shape,
}

/// Every key settable from the environment, derived from the schema so the
/// two can never disagree.
pub(crate) fn env_keys() -> Vec<EnvKey> {
    let root = schema::schema();
    let mut keys = Vec::new();
    collect_keys(root, root, &mut Vec::new(), &mut keys);
    keys
}

fn collect_keys(root: &Value, node: &Value, path: &mut Vec<String>, out: &mut Vec<EnvKey>) {
    let Some(properties) = node.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, child) in properties {
        let child = resolve_ref(root, child);
        path.push(name.clone());
        if child.get("properties").is_some() {
            collect_keys(root, child, path, out);
        } else {
            out.push(EnvKey {
                var: format!("{ENV_PREFIX}{}", path.join("_").to_ascii_uppercase()),
                path: path.clone(),
                shape: shape_of(root, child),
            });
        }
        path.pop();
    }
}

fn resolve_ref<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    node.get("$ref")
        .and_then(Value::as_str)
        .and_then(|reference| reference.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(node)
}

fn scalar_of(root: &Value, node: &Value) -> Option<Scalar> {
    let node = resolve_ref(root, node);
    if node.get("enum").is_some() {
        return Some(Scalar::String);
    }
    match node.get("type").and_then(Value::as_str) {
        Some("string") => Some(Scalar::String),
        Some("integer") => Some(Scalar::Integer),
        Some("boolean") => Some(Scalar::Boolean),
        _ => None,
    }
}

fn shape_of(root: &Value, node: &Value) -> Shape {
    if let Some(scalar) = scalar_of(root, node) {
        return Shape::One(scalar);
    }
    // A key that accepts either a string or something richer (the review
    // role) takes the string as is and anything else as JSON.
    let variants = node.get("oneOf").and_then(Value::as_array);
    if variants.is_some_and(|variants| {
        variants
            .iter()
            .any(|variant| scalar_of(root, variant) == Some(Scalar::String))
    }) {
        return Shape::StringOrJson;
    }
    if node.get("type").and_then(Value::as_str) == Some("array")
        && let Some(scalar) = node.get("items").and_then(|items| scalar_of(root, items))
    {
        return Shape::List(scalar);
    }
    Shape::Json
}

/// JSON text, or the text as a string for the schema to reject by type.
fn parse_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Text that does not parse as the key's type stays a string, so the schema
/// reports the type error with the key path and the variable's name.
fn convert(text: &str, scalar: Scalar) -> Value {
    let text = text.trim();
    match scalar {
        Scalar::String => Value::String(text.to_owned()),
        Scalar::Integer => text
            .parse::<i64>()
            .map_or_else(|_| Value::String(text.to_owned()), Value::from),
        Scalar::Boolean => match text.to_ascii_lowercase().as_str() {
            "true" | "1" => Value::Bool(true),
            "false" | "0" => Value::Bool(false),
            _ => Value::String(text.to_owned()),
        },
    }
}

/// Which environment variable supplied the value at a JSON pointer.
#[derive(Debug, Default, Clone)]
pub(crate) struct Provenance {
    by_pointer: BTreeMap<String, String>,
}

impl Provenance {
    /// The variable that set `pointer` or one of its ancestors.
    pub fn var_for(&self, pointer: &str) -> Option<&str> {
        self.by_pointer
            .iter()
            .find(|(set, _)| {
                pointer == set.as_str()
                    || pointer
                        .strip_prefix(set.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .map(|(_, var)| var.as_str())
    }

    pub fn contains(&self, pointer: &str) -> bool {
        self.by_pointer.contains_key(pointer)
    }
}

/// Writes every `AUTOFORGE_<SECTION>_<KEY>` variable of `env` into `doc`.
/// An empty variable unsets a scalar key (its default applies) and makes a
/// list key empty.
pub(crate) fn apply_overrides(doc: &mut Value, env: &Environment) -> Provenance {
    let mut provenance = Provenance::default();
    for key in env_keys() {
        let Some(text) = env.get(&key.var) else {
            continue;
        };
        let Some((leaf, parents)) = key.path.split_last() else {
            continue;
        };
        // A section that is not a table in the file is left alone: the schema
        // reports that type error, which is the real problem.
        let Some(section) = object_at(doc, parents) else {
            continue;
        };
        let value = match key.shape {
            Shape::One(_) | Shape::StringOrJson | Shape::Json if text.trim().is_empty() => {
                section.remove(leaf);
                continue;
            }
            Shape::One(scalar) => convert(text, scalar),
            Shape::StringOrJson if !text.trim_start().starts_with(['[', '{']) => {
                convert(text, Scalar::String)
            }
            Shape::StringOrJson | Shape::Json => parse_json(text.trim()),
            Shape::List(_) if text.trim_start().starts_with('[') => parse_json(text.trim()),
            Shape::List(scalar) => Value::Array(
                text.split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(|item| convert(item, scalar))
                    .collect(),
            ),
        };
        section.insert(leaf.clone(), value);
        provenance
            .by_pointer
            .insert(format!("/{}", key.path.join("/")), key.var);
    }
    provenance
}

fn object_at<'a>(doc: &'a mut Value, path: &[String]) -> Option<&'a mut Map<String, Value>> {
    let mut node = doc;
    for segment in path {
        node = node
            .as_object_mut()?
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    node.as_object_mut()
}

/// Variables that only builds with a test feature read. In a build without
/// the feature they are unknown like any other name: setting one there
/// would silently do nothing.
fn test_hook_vars() -> &'static [&'static str] {
    // The crash-point variable, spelt from parts: only its own module names
    // it whole, and configuration does not depend on the effect executor.
    // `cli::build_features` checks the two spellings agree.
    #[cfg(feature = "crash-points")]
    return &[concat!("AUTOFORGE_", "CRASH_AT")];
    #[cfg(not(feature = "crash-points"))]
    return &[];
}

/// Every `AUTOFORGE_*` name this build reads.
fn known_variables() -> Vec<String> {
    let mut known: Vec<String> = env_keys().into_iter().map(|key| key.var).collect();
    known.extend(NON_KEY_VARS.iter().map(|var| (*var).to_owned()));
    known.extend(test_hook_vars().iter().map(|var| (*var).to_owned()));
    known
}

/// An error for every `AUTOFORGE_*` variable this build does not read, e.g.
/// a misspelt `AUTOFORGE_SERVER_LISTNE`: a typo must not silently leave the
/// default in place. Each names the variable and, when one is close, the
/// known name it was probably meant to be. Values are never shown.
pub(crate) fn unknown_variable_problems(env: &Environment) -> Vec<Problem> {
    let known = known_variables();
    env.names()
        .filter(|name| name.starts_with(ENV_PREFIX))
        .filter(|name| !known.iter().any(|known| known == name))
        .map(|name| {
            let hint = closest(name, &known)
                .map_or_else(String::new, |near| format!("; did you mean {near}?"));
            Problem::new(
                name,
                "unknown-variable",
                format!("autoforge reads no variable of this name{hint}"),
            )
        })
        .collect()
}

/// The known name within a small edit distance of `name`, if any.
fn closest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    let budget = (name.len() / 5).clamp(2, 4);
    known
        .iter()
        .map(|candidate| (strsim::levenshtein(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= budget)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate.as_str())
}

/// Warnings about `AUTOFORGE_*` variables whose value is not UTF-8: they
/// cannot be read at all.
pub(crate) fn unknown_variable_warnings(env: &Environment) -> Vec<String> {
    let mut warnings = Vec::new();
    if !env.not_unicode.is_empty() {
        warnings.push(format!(
            "ignoring environment variables whose value is not UTF-8: {}",
            env.not_unicode.join(", ")
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn var_names() -> Vec<String> {
        env_keys().into_iter().map(|key| key.var).collect()
    }

    #[test]
    fn issue_examples_are_settable_from_the_environment() {
        let names = var_names();
        for var in [
            "AUTOFORGE_SERVER_LISTEN",
            "AUTOFORGE_GITHUB_API_URL",
            "AUTOFORGE_STATE_DIR",
            "AUTOFORGE_POLL_INTERVAL_SECONDS",
            "AUTOFORGE_MERGE_PROTECTED_PATHS",
            "AUTOFORGE_AGENTS_ROLES_REVIEW",
            "AUTOFORGE_LABELS_STATUS",
            "AUTOFORGE_AGENTS_PROFILES",
            "AUTOFORGE_VALIDATION_COMMANDS",
        ] {
            assert!(names.iter().any(|name| name == var), "{var} missing");
        }
    }

    #[test]
    fn env_var_names_are_unique_and_never_shadow_secret_variables() {
        let mut names = var_names();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count);
        for secret in NON_KEY_VARS {
            assert!(!names.iter().any(|name| name == secret), "{secret}");
        }
    }

    #[test]
    fn overrides_are_typed_by_the_schema() {
        let env = Environment::from_pairs([
            ("AUTOFORGE_POLL_INTERVAL_SECONDS", "30"),
            ("AUTOFORGE_LABELS_STATUS", "true"),
            ("AUTOFORGE_GITHUB_REPOSITORIES", "acme/a, acme/b"),
            ("AUTOFORGE_SERVER_LISTEN", "0.0.0.0:9000"),
        ]);
        let mut doc = json!({"server": {"listen": "127.0.0.1:1"}});
        let provenance = apply_overrides(&mut doc, &env);
        assert_eq!(doc["poll"]["interval_seconds"], json!(30));
        assert_eq!(doc["labels"]["status"], json!(true));
        assert_eq!(doc["github"]["repositories"], json!(["acme/a", "acme/b"]));
        assert_eq!(doc["server"]["listen"], json!("0.0.0.0:9000"));
        assert_eq!(
            provenance.var_for("/github/repositories/1"),
            Some("AUTOFORGE_GITHUB_REPOSITORIES")
        );
        assert_eq!(provenance.var_for("/github/api_url"), None);
    }

    #[test]
    fn structured_keys_are_set_with_json() {
        let env = Environment::from_pairs([
            (
                "AUTOFORGE_VALIDATION_COMMANDS",
                r#"["make check, twice", ["cargo", "test"]]"#,
            ),
            ("AUTOFORGE_AGENTS_PROFILES", r#"{"a": {"command": ["a"]}}"#),
            (
                "AUTOFORGE_AGENTS_ROLES_REVIEW",
                r#"[{"rounds": "1+", "profile": "a"}]"#,
            ),
            ("AUTOFORGE_AGENTS_ROLES_IMPLEMENT", "a"),
            ("AUTOFORGE_MERGE_PROTECTED_PATHS", r#"["a,b/"]"#),
        ]);
        let mut doc = json!({});
        apply_overrides(&mut doc, &env);
        assert_eq!(
            doc["validation"]["commands"],
            json!(["make check, twice", ["cargo", "test"]])
        );
        assert_eq!(doc["agents"]["profiles"], json!({"a": {"command": ["a"]}}));
        assert_eq!(
            doc["agents"]["roles"]["review"],
            json!([{"rounds": "1+", "profile": "a"}])
        );
        assert_eq!(doc["agents"]["roles"]["implement"], json!("a"));
        assert_eq!(doc["merge"]["protected_paths"], json!(["a,b/"]));
    }

    #[test]
    fn the_admin_listener_has_its_own_variable() {
        let env = Environment::from_pairs([("AUTOFORGE_SERVER_ADMIN_LISTEN", "127.0.0.1:9091")]);
        let mut doc = json!({});
        let provenance = apply_overrides(&mut doc, &env);
        assert_eq!(doc["server"]["admin_listen"], json!("127.0.0.1:9091"));
        assert_eq!(doc["server"].get("listen"), None);
        assert_eq!(
            provenance.var_for("/server/admin_listen"),
            Some("AUTOFORGE_SERVER_ADMIN_LISTEN")
        );
    }

    #[test]
    fn ipv6_listen_address_is_not_mistaken_for_json() {
        let env = Environment::from_pairs([("AUTOFORGE_SERVER_LISTEN", "[::1]:8080")]);
        let mut doc = json!({});
        apply_overrides(&mut doc, &env);
        assert_eq!(doc["server"]["listen"], json!("[::1]:8080"));
    }

    #[test]
    fn malformed_json_stays_text_for_the_schema_to_reject() {
        let env = Environment::from_pairs([("AUTOFORGE_AGENTS_PROFILES", "{oops")]);
        let mut doc = json!({});
        apply_overrides(&mut doc, &env);
        assert_eq!(doc["agents"]["profiles"], json!("{oops"));
    }

    #[test]
    fn unparsable_integer_stays_text_for_the_schema_to_reject() {
        let env = Environment::from_pairs([("AUTOFORGE_POLL_INTERVAL_SECONDS", "soon")]);
        let mut doc = json!({});
        apply_overrides(&mut doc, &env);
        assert_eq!(doc["poll"]["interval_seconds"], json!("soon"));
    }

    #[test]
    fn empty_variable_unsets_a_scalar_and_empties_a_list() {
        let env = Environment::from_pairs([
            ("AUTOFORGE_GITHUB_APP_ID", ""),
            ("AUTOFORGE_MERGE_PROTECTED_PATHS", ""),
        ]);
        let mut doc = json!({"github": {"app_id": 5}});
        apply_overrides(&mut doc, &env);
        assert_eq!(doc["github"], json!({}));
        assert_eq!(doc["merge"]["protected_paths"], json!([]));
    }

    #[test]
    fn every_unknown_autoforge_variable_is_an_error_naming_it_and_its_likely_meaning() {
        let env = Environment::from_pairs([
            ("AUTOFORGE_SERVER_LISTNE", "x"),
            ("AUTOFORGE_WEBHOOK_SECRET", "s"),
            ("AUTOFORGE_GITHUB_TOKEN", "t"),
            ("AUTOFORGE_DASHBOARD_TOKEN", "d"),
            ("AUTOFORGE_SERVER_LISTEN", "127.0.0.1:1"),
            ("AUTOFORGE_UNRELATED_THING", "y"),
            ("OTHER_TOOL_SETTING", "z"),
        ]);
        let problems = unknown_variable_problems(&env);
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 2, "{shown:#?}");
        assert!(
            shown[0].starts_with("AUTOFORGE_SERVER_LISTNE: ")
                && shown[0].contains("did you mean AUTOFORGE_SERVER_LISTEN?")
                && shown[0].ends_with("[rule: unknown-variable]"),
            "{shown:#?}"
        );
        assert!(
            shown[1].starts_with("AUTOFORGE_UNRELATED_THING: ") && !shown[1].contains("mean"),
            "{shown:#?}"
        );
        assert!(!shown.iter().any(|line| line.contains("127.0.0.1")));
    }

    #[test]
    fn test_hooks_are_known_exactly_when_built_in() {
        // Spelt from parts: only the crash-point module names it whole.
        let env = Environment::from_pairs([(format!("{ENV_PREFIX}CRASH_AT"), "after_send")]);
        let unknown = unknown_variable_problems(&env);
        assert_eq!(
            unknown.is_empty(),
            cfg!(feature = "crash-points"),
            "{unknown:?}"
        );
    }

    #[test]
    fn debug_of_environment_shows_names_not_values() {
        let env = Environment::from_pairs([("AUTOFORGE_GITHUB_TOKEN", "ghp_verysecretvalue")]);
        let text = format!("{env:?}");
        assert!(text.contains("AUTOFORGE_GITHUB_TOKEN"));
        assert!(!text.contains("ghp_verysecretvalue"));
    }
}
