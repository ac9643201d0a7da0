//! Protected paths (`merge.protected_paths`): the one prefix rule that
//! decides whether a change touches a path the controller must never
//! publish on its own (CI workflows by default). The driver applies it to
//! a candidate's diff before anything is pushed and to a pull request's
//! files before a merge; the machine words the refusal.

/// Whether `path` lies under one of `prefixes`. A prefix is compared as
/// text (`.github/workflows/` covers every file below it; `.github/` covers
/// more), so an operator protects a directory by ending it with `/`.
pub fn is_protected(path: &str, prefixes: &[String]) -> bool {
    prefixes
        .iter()
        .any(|prefix| path.starts_with(prefix.as_str()))
}

/// The protected ones among `paths`, sorted and each once.
pub fn protected_among<'a>(
    paths: impl IntoIterator<Item = &'a str>,
    prefixes: &[String],
) -> Vec<String> {
    let mut found: Vec<String> = paths
        .into_iter()
        .filter(|path| is_protected(path, prefixes))
        .map(str::to_owned)
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

use crate::inline_code::code_span;

/// How many paths a reason names before it says "and N more".
const NAMED: usize = 3;

/// The paths as a reason names them: the first few as code spans, then
/// how many more there are.
pub(crate) fn describe_paths(paths: &[String]) -> String {
    let named: Vec<String> = paths.iter().take(NAMED).map(|p| code_span(p)).collect();
    let mut text = named.join(", ");
    if paths.len() > NAMED {
        text.push_str(&format!(" and {} more", paths.len() - NAMED));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes() -> Vec<String> {
        vec![".github/workflows/".to_owned(), "deploy/".to_owned()]
    }

    #[test]
    fn a_path_under_a_prefix_is_protected_and_a_sibling_is_not() {
        assert!(is_protected(".github/workflows/ci.yml", &prefixes()));
        assert!(is_protected("deploy/prod/key.toml", &prefixes()));
        assert!(!is_protected(".github/CODEOWNERS", &prefixes()));
        assert!(!is_protected("src/deploy/x.rs", &prefixes()));
        assert!(!is_protected(".github/workflows/ci.yml", &[]));
    }

    #[test]
    fn protected_paths_are_sorted_and_listed_once() {
        let found = protected_among(
            ["deploy/b", "src/a", "deploy/b", ".github/workflows/x.yml"],
            &prefixes(),
        );
        assert_eq!(found, [".github/workflows/x.yml", "deploy/b"]);
    }

    #[test]
    fn a_reason_names_three_paths_then_counts_the_rest() {
        let paths: Vec<String> = (1..=5).map(|n| format!("deploy/{n}")).collect();
        assert_eq!(
            describe_paths(&paths),
            "`deploy/1`, `deploy/2`, `deploy/3` and 2 more"
        );
        assert_eq!(describe_paths(&paths[..1]), "`deploy/1`");
    }

    #[test]
    fn a_backtick_in_a_file_name_cannot_close_its_code_span() {
        assert_eq!(describe_paths(&["a`b".to_owned()]), "``a`b``");
        assert_eq!(describe_paths(&["`x".to_owned()]), "`` `x ``");
    }
}
