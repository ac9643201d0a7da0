//! Issue references by identity: `owner/repo#n` compared case-insensitively
//! on owner and repository and exactly on the number; and the web host the
//! controller's own issue and PR links point at.

use autoforge_journal::IssueNumber;
use std::fmt;

/// One issue (or PR) of one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueRef {
    pub owner: String,
    pub repo: String,
    pub number: IssueNumber,
}

/// The longest URL we parse; longer ones are refused before parsing.
pub const MAX_URL_CHARS: usize = 512;

impl IssueRef {
    /// Parses `https://<host>/<owner>/<repo>/issues/<n>` (`pull` when
    /// `allow_pull`). A number with a leading zero is refused: `#07` is not
    /// the same reference as `#7` as far as we are willing to trust.
    pub fn parse_url(url: &str, allow_pull: bool) -> Option<Self> {
        if url.chars().count() > MAX_URL_CHARS {
            return None;
        }
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))?;
        let mut parts = rest.split('/');
        let host = parts.next()?;
        let owner = parts.next()?;
        let repo = parts.next()?;
        let kind = parts.next()?;
        let number = parts.next()?;
        if parts.next().is_some() || host.is_empty() || !is_name(owner) || !is_name(repo) {
            return None;
        }
        if kind != "issues" && !(allow_pull && kind == "pull") {
            return None;
        }
        Some(Self {
            owner: owner.into(),
            repo: repo.into(),
            number: parse_number(number)?,
        })
    }

    /// Whether `other` names the same issue of the same repository.
    pub fn same_as(&self, other: &IssueRef) -> bool {
        self.number == other.number && self.same_repository(other)
    }

    /// Whether `other` is in the same repository.
    pub fn same_repository(&self, other: &IssueRef) -> bool {
        self.owner.eq_ignore_ascii_case(&other.owner) && self.repo.eq_ignore_ascii_case(&other.repo)
    }

    /// Whether a reference as GitHub links it in text (`#n`, `GH-n`,
    /// `owner/repo#n` or an issue URL) names this issue.
    pub fn is_named_by(&self, reference: &str) -> bool {
        if let Some(n) = reference.strip_prefix('#') {
            return parse_number(n) == Some(self.number);
        }
        if reference.len() > 3 && reference[..3].eq_ignore_ascii_case("gh-") {
            return parse_number(&reference[3..]) == Some(self.number);
        }
        if reference.contains("://") {
            return IssueRef::parse_url(reference, false).is_some_and(|r| self.same_as(&r));
        }
        if reference.len() > 4 && reference[..4].eq_ignore_ascii_case("www.") {
            let url = format!("https://{reference}");
            return IssueRef::parse_url(&url, false).is_some_and(|r| self.same_as(&r));
        }
        let Some((repo_path, n)) = reference.split_once('#') else {
            return false;
        };
        let Some((owner, repo)) = repo_path.split_once('/') else {
            return false;
        };
        parse_number(n) == Some(self.number)
            && owner.eq_ignore_ascii_case(&self.owner)
            && repo.eq_ignore_ascii_case(&self.repo)
    }
}

impl fmt::Display for IssueRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}#{}", self.owner, self.repo, self.number)
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_number(s: &str) -> Option<IssueNumber> {
    if s.is_empty() || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The web host markers link to, from the REST API URL:
/// `https://api.github.com` → `https://github.com`, a GHES
/// `https://ghe.example/api/v3` → `https://ghe.example`.
pub fn html_base(api_url: &str) -> String {
    let trimmed = api_url.trim_end_matches('/');
    if let Some(host) = trimmed.strip_suffix("/api/v3") {
        return host.to_owned();
    }
    trimmed.replacen("://api.", "://", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> IssueRef {
        IssueRef {
            owner: "Acme".into(),
            repo: "Widgets".into(),
            number: autoforge_journal::testing::issue(7),
        }
    }

    #[test]
    fn parses_issue_urls_and_pull_urls_only_when_allowed() {
        let r =
            IssueRef::parse_url("https://github.com/acme/widgets/issues/7", false).expect("url");
        assert!(own().same_as(&r));
        assert!(IssueRef::parse_url("https://github.com/acme/widgets/pull/7", false).is_none());
        assert!(IssueRef::parse_url("https://github.com/acme/widgets/pull/7", true).is_some());
        assert!(IssueRef::parse_url("https://github.com/acme/widgets/issues/07", false).is_none());
        assert!(IssueRef::parse_url("https://github.com/acme/widgets/issues/7/x", false).is_none());
    }

    #[test]
    fn text_references_name_the_issue_by_identity() {
        let own = own();
        for yes in [
            "#7",
            "GH-7",
            "acme/widgets#7",
            "https://github.com/ACME/widgets/issues/7",
            "www.github.com/acme/widgets/issues/7",
        ] {
            assert!(own.is_named_by(yes), "{yes}");
        }
        for no in [
            "#07",
            "#8",
            "other/widgets#7",
            "https://github.com/acme/widgets/pull/7",
            "www.github.com/acme/widgets/issues/8",
        ] {
            assert!(!own.is_named_by(no), "{no}");
        }
    }

    #[test]
    fn marker_links_point_at_the_web_host_of_the_api() {
        assert_eq!(html_base("https://api.github.com"), "https://github.com");
        assert_eq!(
            html_base("https://ghe.example/api/v3/"),
            "https://ghe.example"
        );
    }
}
