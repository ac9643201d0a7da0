//! The documentation stays true to the code: `docs/configuration.md`'s
//! reference section is the configuration schema rendered (a key added to
//! the schema without a description, or without regenerating the page,
//! fails here), and the backup and restore commands `docs/operations.md`
//! gives are run against a real journal.

use autoforge_tests::{read_repo_file as read, repo_root};
use serde_json::Value;

const BEGIN: &str = "<!-- config-reference: generated from schemas/config.schema.json -->";
const END: &str = "<!-- /config-reference -->";
/// Set to rewrite the reference section of `docs/configuration.md` in place.
const UPDATE_VAR: &str = "AUTOFORGE_UPDATE_DOCS";

/// One documented key.
struct Key {
    path: String,
    kind: String,
    default: Option<String>,
    description: Option<String>,
    /// The `AUTOFORGE_*` variable, for keys the environment can set.
    var: Option<String>,
}

fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    node.get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(node)
}

fn kind_of(root: &Value, node: &Value) -> String {
    let node = resolve(root, node);
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        return names.join(" \\| ");
    }
    if let Some(variants) = node.get("oneOf").and_then(Value::as_array) {
        let kinds: Vec<String> = variants.iter().map(|v| kind_of(root, v)).collect();
        return kinds.join(" or ");
    }
    match node.get("type") {
        Some(Value::String(kind)) if kind == "array" => {
            let items = node
                .get("items")
                .map_or_else(|| "value".to_owned(), |i| kind_of(root, i));
            format!("list of {items}")
        }
        Some(Value::String(kind)) if kind == "object" && node.get("properties").is_none() => {
            "table".to_owned()
        }
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            kinds.join(" or ")
        }
        _ => "value".to_owned(),
    }
}

fn collect(root: &Value, node: &Value, prefix: &str, settable: bool, out: &mut Vec<Key>) {
    let node = resolve(root, node);
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            let resolved = resolve(root, child);
            let description = child
                .get("description")
                .or_else(|| resolved.get("description"))
                .and_then(Value::as_str)
                .map(|text| text.split_whitespace().collect::<Vec<_>>().join(" "));
            let default = child.get("default").or_else(|| resolved.get("default"));
            let is_section = resolved.get("properties").is_some();
            out.push(Key {
                var: (settable && !is_section)
                    .then(|| format!("AUTOFORGE_{}", path.replace('.', "_").to_ascii_uppercase())),
                kind: if is_section {
                    "section".to_owned()
                } else {
                    kind_of(root, child)
                },
                default: default
                    .filter(|d| !(is_section && d.as_object().is_some_and(|m| m.is_empty())))
                    .map(|d| format!("`{d}`")),
                description,
                path: path.clone(),
            });
            collect(root, child, &path, settable, out);
        }
    }
    if let Some(entries) = node.get("additionalProperties").filter(|a| a.is_object()) {
        collect(root, entries, &format!("{prefix}.<name>"), false, out);
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn render(keys: &[Key]) -> String {
    let mut text = format!("{BEGIN}\n\n");
    text.push_str("| Key | Type | Default | Environment | Meaning |\n|---|---|---|---|---|\n");
    for key in keys {
        text.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            key.path,
            key.kind,
            key.default.as_deref().map(cell).unwrap_or_default(),
            key.var
                .as_deref()
                .map(|v| format!("`{v}`"))
                .unwrap_or_default(),
            key.description.as_deref().map(cell).unwrap_or_default(),
        ));
    }
    text.push('\n');
    text.push_str(END);
    text
}

fn schema_keys() -> Vec<Key> {
    let schema: Value =
        serde_json::from_str(&read("schemas/config.schema.json")).expect("schema parses");
    let mut keys = Vec::new();
    collect(&schema, &schema, "", true, &mut keys);
    keys
}

#[test]
fn every_configuration_key_has_a_description_in_the_schema() {
    let keys = schema_keys();
    assert!(keys.len() > 50, "the walk found {} keys", keys.len());
    let missing: Vec<&str> = keys
        .iter()
        .filter(|key| {
            key.description
                .as_deref()
                .is_none_or(|d| d.split_whitespace().count() < 3)
        })
        .map(|key| key.path.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "keys without a description in schemas/config.schema.json: {missing:?}"
    );
}

#[test]
fn configuration_reference_lists_every_key_of_the_schema() {
    let path = repo_root().join("docs/configuration.md");
    let page = read("docs/configuration.md");
    let (Some(start), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        panic!("docs/configuration.md lacks the {BEGIN} … {END} section");
    };
    let current = &page[start..end + END.len()];
    let wanted = render(&schema_keys());
    if current == wanted {
        return;
    }
    if std::env::var_os(UPDATE_VAR).is_some() {
        let updated = format!("{}{wanted}{}", &page[..start], &page[end + END.len()..]);
        std::fs::write(&path, updated).expect("docs/configuration.md is writable");
        return;
    }
    let stale: Vec<String> = schema_keys()
        .into_iter()
        .map(|key| key.path)
        .filter(|key| !current.contains(&format!("| `{key}` |")))
        .collect();
    panic!(
        "docs/configuration.md's reference is out of date with schemas/config.schema.json \
         (keys missing: {stale:?}); regenerate it with \
         `{UPDATE_VAR}=1 cargo test -p autoforge-tests --test docs` and review the diff"
    );
}

/// The lines of the fenced block tagged `sh backup` in `docs/operations.md`.
fn backup_commands() -> Vec<String> {
    let page = read("docs/operations.md");
    let block = page
        .split("```sh backup\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/operations.md has a ```sh backup block");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_documented_backup_and_restore_commands_bring_back_the_journal() {
    use autoforge_journal::testing::{TestDatabase, issue};
    use autoforge_journal::{InsertOutcome, NewDelivery, NewRun};
    use secrecy::ExposeSecret;

    let source = TestDatabase::fresh().await;
    let run = source
        .journal()
        .create_run(&NewRun {
            repository: "acme/widgets".to_owned(),
            epic: None,
            issue: issue(7),
            phase: "IMPLEMENT".to_owned(),
            state: serde_json::json!({"kept": "across the backup"}),
        })
        .await
        .expect("create a run");
    let delivery = NewDelivery {
        delivery_id: "backup-1".to_owned(),
        event: "issues".to_owned(),
        action: Some("labeled".to_owned()),
        repository: Some("acme/widgets".to_owned()),
        installation_id: Some(1),
        payload: br#"{"action":"labeled"}"#.to_vec(),
    };
    let inserted = source
        .journal()
        .insert_delivery(&delivery)
        .await
        .expect("insert");
    assert!(
        matches!(inserted, InsertOutcome::Inserted(_)),
        "{inserted:?}"
    );

    let target = TestDatabase::fresh_unmigrated().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let commands = backup_commands();
    assert_eq!(commands.len(), 2, "one dump and one restore: {commands:?}");
    for command in &commands {
        let output = std::process::Command::new("sh")
            .args(["-c", command])
            .current_dir(dir.path())
            .env("DATABASE_URL", source.url().expose_secret())
            .env("RESTORE_URL", target.url().expose_secret())
            .output()
            .expect("sh runs");
        assert!(
            output.status.success(),
            "`{command}` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let restored = target.journal();
    assert!(
        restored
            .migrations_current()
            .await
            .expect("read migrations"),
        "schema current after restore"
    );
    assert_eq!(
        restored.get_run(run.id).await.expect("read run"),
        Some(run.clone())
    );
    let again = restored
        .get_delivery("backup-1")
        .await
        .expect("read delivery")
        .expect("delivery restored");
    assert_eq!(again.payload, delivery.payload);
    assert_eq!(
        restored.insert_delivery(&delivery).await.expect("insert"),
        InsertOutcome::Duplicate
    );
    // New rows continue after the restored ones instead of colliding.
    let next = restored
        .create_run(&NewRun {
            repository: "acme/widgets".to_owned(),
            epic: None,
            issue: issue(8),
            phase: "IMPLEMENT".to_owned(),
            state: serde_json::json!({}),
        })
        .await
        .expect("create a run after the restore");
    assert!(next.id > run.id, "{:?} after {:?}", next.id, run.id);
}
