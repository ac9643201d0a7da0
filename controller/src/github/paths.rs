//! Building request paths from untrusted names: repositories, branch names,
//! file paths and logins are percent-encoded so a `#`, `?` or `..` in a
//! branch or file name can never change which endpoint we call.

use std::fmt;
use std::str::FromStr;

/// `owner/name` of a repository, checked against GitHub's naming rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoName {
    owner: String,
    name: String,
}

/// A repository name that is not `owner/name` with GitHub's characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a repository name of the form owner/name")]
pub struct InvalidRepoName(pub String);

impl RepoName {
    pub fn new(owner: &str, name: &str) -> Result<Self, InvalidRepoName> {
        let valid = |part: &str| {
            !part.is_empty()
                && part.len() <= 100
                && part != "."
                && part != ".."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        if valid(owner) && valid(name) {
            Ok(RepoName {
                owner: owner.to_owned(),
                name: name.to_owned(),
            })
        } else {
            Err(InvalidRepoName(format!("{owner}/{name}")))
        }
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/repos/{owner}/{name}` followed by `rest` (which starts with `/`).
    pub fn api_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.owner, self.name)
    }
}

impl FromStr for RepoName {
    type Err = InvalidRepoName;

    fn from_str(full_name: &str) -> Result<Self, Self::Err> {
        let (owner, name) = full_name
            .split_once('/')
            .ok_or_else(|| InvalidRepoName(full_name.to_owned()))?;
        RepoName::new(owner, name).map_err(|_| InvalidRepoName(full_name.to_owned()))
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// Percent-encodes one path segment or query value: everything except
/// RFC 3986 unreserved characters.
pub fn encode_component(raw: &str) -> String {
    encode(raw, false)
}

/// Percent-encodes a slash-separated path (a file path in a repository),
/// keeping the separators.
pub fn encode_path(raw: &str) -> String {
    encode(raw, true)
}

fn encode(raw: &str, keep_slash: bool) -> String {
    let mut encoded = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        if byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && byte == b'/')
        {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_follow_github_rules() {
        let repo: RepoName = "octo-org/hello.world_2".parse().expect("valid");
        assert_eq!(repo.owner(), "octo-org");
        assert_eq!(
            repo.api_path("/issues/3"),
            "/repos/octo-org/hello.world_2/issues/3"
        );
        for bad in ["noslash", "a/b/c", "../x", "a/..", "a/b c", "/b", "a/"] {
            assert!(bad.parse::<RepoName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn components_cannot_smuggle_separators_or_queries() {
        assert_eq!(
            encode_component("feat/x#1?a=b&c"),
            "feat%2Fx%231%3Fa%3Db%26c"
        );
        assert_eq!(encode_component("é"), "%C3%A9");
        assert_eq!(
            encode_path(".github/autoforge.toml"),
            ".github/autoforge.toml"
        );
        assert_eq!(encode_path("dir/a b.md"), "dir/a%20b.md");
    }
}
