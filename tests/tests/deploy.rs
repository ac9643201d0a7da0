//! The deployment files in `deploy/` hold up without a container engine or
//! a cluster: every file parses, the Dockerfile, compose file, Helm chart and
//! systemd unit say what `docs/operations.md` promises (non-root, health
//! checks, secrets by reference, the options the agent sandbox needs), and
//! the systemd hardening is checked against what bubblewrap really tolerates
//! on this kernel.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use autoforge_tests::{read_repo_file as read, repo_root};
use serde_json::Value;

fn yaml(relative: &str) -> Value {
    serde_norway::from_str(&read(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn files_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("deploy/ is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files_under(&path, found);
        } else {
            found.push(path);
        }
    }
}

/// The port of an `IP:PORT` default in the configuration schema.
fn default_port(schema: &Value, key: &str) -> String {
    let address = schema["properties"]["server"]["properties"][key]["default"]
        .as_str()
        .unwrap_or_else(|| panic!("server.{key} has a default"));
    address.rsplit(':').next().expect("IP:PORT").to_owned()
}

#[test]
fn every_json_yaml_and_toml_file_in_deploy_parses() {
    let mut files = Vec::new();
    files_under(&repo_root().join("deploy"), &mut files);
    let mut parsed = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("deploy files are text");
        let name = path.display();
        // Helm templates are Go templates that render to YAML; the chart
        // tests below check them.
        if path.components().any(|c| c.as_os_str() == "templates") {
            continue;
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => {
                serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            Some("yaml" | "yml") => {
                serde_norway::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            Some("toml") => {
                toml::from_str::<toml::Table>(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            _ => continue,
        }
        parsed += 1;
    }
    // manifest.json, compose.yaml, Chart.yaml, values.yaml at least.
    assert!(parsed >= 4, "only {parsed} files parsed");
}

#[test]
fn dockerfile_runs_as_an_unprivileged_user_with_the_sandbox_git_and_a_health_check() {
    let dockerfile = read("deploy/Dockerfile");
    let runtime = dockerfile
        .split("AS runtime")
        .nth(1)
        .and_then(|rest| rest.split("AS with-agents").next())
        .expect("a `runtime` stage before `with-agents`");
    for package in ["bubblewrap", "git", "ca-certificates"] {
        assert!(
            runtime.contains(package),
            "runtime stage installs {package}"
        );
    }
    let user = runtime
        .lines()
        .filter_map(|line| line.strip_prefix("USER "))
        .next_back()
        .expect("the runtime stage sets USER");
    assert!(
        !user.starts_with("root") && !user.starts_with('0'),
        "USER {user}"
    );
    assert!(runtime.contains("HEALTHCHECK") && runtime.contains("/healthz"));
    assert!(runtime.contains(r#"CMD ["serve"]"#));

    let schema: Value = serde_json::from_str(&read("schemas/config.schema.json")).expect("schema");
    let expose: BTreeSet<&str> = runtime
        .lines()
        .filter_map(|line| line.strip_prefix("EXPOSE "))
        .flat_map(str::split_whitespace)
        .collect();
    let defaults = [
        default_port(&schema, "listen"),
        default_port(&schema, "admin_listen"),
    ];
    for port in &defaults {
        assert!(
            expose.contains(port.as_str()),
            "EXPOSE lists the default port {port}"
        );
    }
    // The agent CLIs stage pins the versions the real-agent tests run.
    let pinned = read("scripts/install-agent-clis.sh");
    let agents = dockerfile
        .split("AS with-agents")
        .nth(1)
        .expect("with-agents stage");
    for spec in [
        "@anthropic-ai/claude-code@",
        "@openai/codex@",
        "opencode-ai@",
    ] {
        let version = pinned
            .split(spec)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("install-agent-clis.sh pins {spec}"));
        assert!(
            agents.contains(&format!("{spec}{version}")),
            "{spec}{version}"
        );
    }
}

#[test]
fn compose_runs_postgres_16_and_autoforge_with_health_checks_and_secrets_by_file() {
    let compose = yaml("deploy/compose.yaml");
    let services = &compose["services"];
    let postgres = &services["postgres"];
    assert!(
        postgres["image"]
            .as_str()
            .is_some_and(|image| image.starts_with("postgres:16"))
    );
    assert!(postgres["healthcheck"]["test"].is_array());
    let autoforge = &services["autoforge"];
    assert_eq!(
        autoforge["depends_on"]["postgres"]["condition"],
        "service_healthy"
    );
    assert!(
        autoforge["healthcheck"]["test"]
            .to_string()
            .contains("/readyz")
    );
    let options: Vec<&str> = autoforge["security_opt"]
        .as_array()
        .expect("security_opt")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for option in [
        "seccomp=unconfined",
        "apparmor=unconfined",
        "systempaths=unconfined",
    ] {
        assert!(options.contains(&option), "the sandbox needs {option}");
    }
    let environment = autoforge["environment"]
        .as_object()
        .expect("environment map");
    for (var, _) in environment {
        assert!(
            ![
                "AUTOFORGE_WEBHOOK_SECRET",
                "AUTOFORGE_GITHUB_TOKEN",
                "AUTOFORGE_DASHBOARD_TOKEN"
            ]
            .contains(&var.as_str()),
            "{var}: secrets come from files, not the environment"
        );
    }
    for (var, secret) in [
        ("AUTOFORGE_WEBHOOK_SECRET_FILE", "webhook-secret"),
        ("AUTOFORGE_GITHUB_PRIVATE_KEY_FILE", "app-private-key"),
        ("AUTOFORGE_DASHBOARD_TOKEN_FILE", "dashboard-token"),
    ] {
        assert_eq!(environment[var], format!("/run/secrets/{secret}"));
        assert!(
            compose["secrets"][secret]["file"].is_string(),
            "secret {secret}"
        );
    }
    // The admin listener (dashboard, /metrics) is published on loopback only.
    let ports = autoforge["ports"].to_string();
    assert!(ports.contains("127.0.0.1:8081:8081"), "{ports}");
}

/// `.Values.a.b` paths a template uses.
fn value_paths(template: &str) -> BTreeSet<String> {
    let pattern = regex::Regex::new(r"\.Values\.([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)")
        .expect("pattern compiles");
    pattern
        .captures_iter(template)
        .map(|c| c[1].to_owned())
        .collect()
}

#[test]
fn helm_templates_use_only_values_the_chart_defines_and_close_every_block() {
    let values = yaml("deploy/helm/autoforge/values.yaml");
    let chart = yaml("deploy/helm/autoforge/Chart.yaml");
    assert_eq!(chart["apiVersion"], "v2");
    let mut templates = Vec::new();
    files_under(
        &repo_root().join("deploy/helm/autoforge/templates"),
        &mut templates,
    );
    assert!(
        templates.len() >= 5,
        "deployment, service, configmap, pvc, helpers"
    );
    let opening = regex::Regex::new(r"\{\{-?\s*(if|with|range|define)\b").expect("pattern");
    let closing = regex::Regex::new(r"\{\{-?\s*end\s*-?\}\}").expect("pattern");
    for path in &templates {
        let text = std::fs::read_to_string(path).expect("template");
        let name = path.display();
        assert_eq!(
            text.matches("{{").count(),
            text.matches("}}").count(),
            "{name}"
        );
        assert_eq!(
            opening.find_iter(&text).count(),
            closing.find_iter(&text).count(),
            "{name}: every if/with/range/define has its end"
        );
        for value in value_paths(&text) {
            let pointer = format!("/{}", value.replace('.', "/"));
            assert!(
                values.pointer(&pointer).is_some(),
                "{name} uses .Values.{value}, not in values.yaml"
            );
        }
    }
}

#[test]
fn helm_deployment_probes_health_reads_secrets_by_reference_and_allows_the_sandbox() {
    let deployment = read("deploy/helm/autoforge/templates/deployment.yaml");
    for needle in [
        "kind: Deployment",
        "replicas: {{ .Values.replicaCount }}",
        "livenessProbe:",
        "path: /healthz",
        "readinessProbe:",
        "path: /readyz",
        "secretKeyRef:",
        "AUTOFORGE_WEBHOOK_SECRET_FILE",
        "AUTOFORGE_GITHUB_PRIVATE_KEY_FILE",
        "AUTOFORGE_DASHBOARD_TOKEN_FILE",
        "persistentVolumeClaim:",
        "toYaml .Values.securityContext",
    ] {
        assert!(
            deployment.contains(needle),
            "deployment template lacks {needle:?}"
        );
    }
    let values = yaml("deploy/helm/autoforge/values.yaml");
    let security = &values["securityContext"];
    assert_eq!(security["seccompProfile"]["type"], "Unconfined");
    assert_eq!(security["appArmorProfile"]["type"], "Unconfined");
    assert_eq!(security["procMount"], "Unmasked");
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(values["podSecurityContext"]["runAsNonRoot"], true);
    assert_ne!(values["podSecurityContext"]["runAsUser"], 0);
    // No secret value in the chart, only the names of keys in a Secret.
    let text = read("deploy/helm/autoforge/values.yaml");
    assert!(
        !text.contains("BEGIN RSA") && !text.contains("password"),
        "values.yaml holds no secret"
    );
}

/// Options the unit must not set: each one breaks bubblewrap (the first two
/// are shown on this kernel by the test below).
const OPTIONS_THAT_BREAK_THE_SANDBOX: &[&str] = &[
    "ProtectKernelTunables",
    "ProtectKernelLogs",
    "RestrictNamespaces",
    "SystemCallFilter",
    "MemoryDenyWriteExecute=yes",
];

#[test]
fn systemd_unit_verifies_and_sets_only_options_the_sandbox_tolerates() {
    let unit = read("deploy/systemd/autoforge.service");
    let settings: Vec<&str> = unit
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#') && line.contains('='))
        .collect();
    for forbidden in OPTIONS_THAT_BREAK_THE_SANDBOX {
        assert!(
            !settings.iter().any(|line| line.starts_with(forbidden)),
            "the unit sets {forbidden}, which breaks bubblewrap"
        );
    }
    for required in [
        "User=autoforge",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "StateDirectory=autoforge",
        "ExecStart=/usr/local/bin/autoforge serve",
    ] {
        assert!(settings.contains(&required), "the unit lacks {required}");
    }

    let Ok(analyze) = which("systemd-analyze") else {
        eprintln!("systemd-analyze is not installed: the unit's syntax is not verified here");
        return;
    };
    // `verify` also checks that ExecStart exists; point it at a binary that does.
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("autoforge.service");
    std::fs::write(&copy, unit.replace("/usr/local/bin/autoforge", "/bin/true")).expect("copy");
    let output = Command::new(analyze)
        .arg("verify")
        .arg(&copy)
        .output()
        .expect("systemd-analyze runs");
    let complaints = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && complaints.trim().is_empty(),
        "systemd-analyze verify: {complaints}"
    );
}

fn which(program: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or(())
}

/// What the sandbox does at every launch, as the unprivileged `nobody`:
/// new namespaces and a fresh /proc.
const SANDBOXED_TRUE: &str = "setpriv --reuid 65534 --regid 65534 --clear-groups --no-new-privs \
     --bounding-set -all --inh-caps -all bwrap --unshare-user --unshare-pid --unshare-ipc \
     --unshare-uts --unshare-net --unshare-cgroup-try --ro-bind / / --proc /proc --dev /dev true";

/// Runs `setup`, then the sandboxed `true`, in a private mount namespace.
fn sandbox_after(setup: &str) -> bool {
    let script = format!("mount --make-rprivate / && {setup} && {SANDBOXED_TRUE}");
    Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .status()
        .expect("unshare runs")
        .success()
}

#[test]
fn bubblewrap_tolerates_the_units_hardening_and_refuses_an_over_mounted_proc() {
    // Mount namespaces need root; CI runs as root. The agent side runs as
    // `nobody` with no capabilities, as under the unit.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false);
    if !root || which("bwrap").is_err() || which("setpriv").is_err() {
        eprintln!("needs root, bwrap and setpriv: not checked here");
        return;
    }
    // NoNewPrivileges and an empty capability bounding set, nothing else.
    assert!(
        sandbox_after("true"),
        "the sandbox works as an unprivileged user"
    );
    // ProtectSystem=strict: the file systems read-only (the API file systems
    // /proc, /sys and /dev stay as they are).
    assert!(sandbox_after("mount -o remount,bind,ro /"));
    // PrivateTmp / PrivateDevices: fresh tmpfs mounts.
    assert!(sandbox_after(
        "mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /dev/shm"
    ));
    // ProtectKernelTunables: /proc/sys over-mounted read-only. Refused.
    assert!(!sandbox_after(
        "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys"
    ));
    // ProtectKernelLogs: /proc/kmsg masked. Refused.
    if Path::new("/proc/kmsg").exists() {
        assert!(!sandbox_after("mount --bind /dev/null /proc/kmsg"));
    }
}
