//! Test-only code stays out of a default build, and the binary the tests
//! run has it. A default-feature binary cannot be built from inside the
//! suite without clobbering `target/debug/autoforge`, which the crash tests
//! of the same `cargo test` run (or rebuilding every dependency in a second
//! target directory), so the default side is checked where it is decided:
//! the manifests' default features, and the sources, where the crash-point
//! module and every import of it sit behind the `crash-points` feature, so a
//! build without it has no code that reads `AUTOFORGE_CRASH_AT`.

use std::path::Path;

use crate::common::sources::controller_sources;

const CRASH_ENV: &str = "AUTOFORGE_CRASH_AT";
const GATE: &str = "#[cfg(feature = \"crash-points\")]";

fn manifest(path: &str) -> toml::Table {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&file).expect("read the manifest");
    text.parse().expect("a valid manifest")
}

/// The features a plain build of the package turns on.
fn default_features(manifest: &toml::Table) -> Vec<String> {
    manifest
        .get("features")
        .and_then(|features| features.get("default"))
        .and_then(toml::Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The features a `[dependencies]` entry asks of `name`.
fn features_asked_of(manifest: &toml::Table, name: &str) -> Vec<String> {
    manifest
        .get("dependencies")
        .and_then(|deps| deps.get(name))
        .and_then(|dep| dep.get("features"))
        .and_then(toml::Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_default_build_turns_no_test_only_feature_on() {
    let controller = manifest("Cargo.toml");
    let journal = manifest("../journal/Cargo.toml");
    let declared = controller.get("features").expect("a [features] table");
    assert!(declared.get("crash-points").is_some() && declared.get("test-hooks").is_some());
    assert!(default_features(&controller).is_empty(), "{controller:?}");
    assert!(default_features(&journal).is_empty(), "{journal:?}");
    assert!(
        !features_asked_of(&controller, "autoforge-journal").contains(&"testing".to_owned()),
        "the product's own dependency on the journal must not ask for `testing`"
    );
}

#[test]
fn the_crash_point_code_compiles_only_with_its_feature() {
    let mut gated_imports = 0;
    for file in controller_sources() {
        if file.relative == "effects/crashpoint.rs" {
            continue;
        }
        let text = &file.text;
        assert!(
            !text.contains(CRASH_ENV),
            "{} names {CRASH_ENV}",
            file.path.display()
        );
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let declares = trimmed.starts_with("use ") || trimmed.starts_with("pub mod ");
            if declares && line.contains("crashpoint") {
                let above = index.checked_sub(1).map(|i| lines[i].trim());
                assert_eq!(
                    above,
                    Some(GATE),
                    "{}:{}: `{}` is not behind the crash-points feature",
                    file.path.display(),
                    index + 1,
                    trimmed
                );
                gated_imports += 1;
            }
        }
    }
    // The module declaration and the imports of the effect executor, the
    // run task, its transition commit and the sender of answers outside a
    // run: a call without one of them could not compile.
    assert_eq!(
        gated_imports, 5,
        "the crash point's declaration and imports"
    );
}

#[test]
fn the_binary_the_tests_run_has_crash_points() {
    // The variable's name is in the binary only if the code reading it is.
    let binary = std::fs::read(env!("CARGO_BIN_EXE_autoforge")).expect("read the binary");
    let found = binary
        .windows(CRASH_ENV.len())
        .any(|window| window == CRASH_ENV.as_bytes());
    assert!(found, "the tests' autoforge binary lacks the crash points");
    // Compiles only when the library the tests link has them too.
    assert_eq!(
        autoforge::effects::crashpoint::CRASH_ENV,
        CRASH_ENV,
        "one spelling of the variable"
    );
}

#[test]
fn the_configuration_knows_the_crash_point_variable_of_this_build() {
    // Loading refuses unknown `AUTOFORGE_*` names; the crash tests set this
    // one, so the configuration must spell it as the crash-point module does.
    let home = tempfile::tempdir().expect("a home");
    let env = autoforge::config::Environment::from_pairs([
        ("HOME", home.path().to_str().expect("utf-8")),
        (autoforge::effects::crashpoint::CRASH_ENV, "after_send"),
    ]);
    let loaded = autoforge::config::load(None, None, &env);
    assert!(loaded.is_ok(), "{:?}", loaded.err());
}
