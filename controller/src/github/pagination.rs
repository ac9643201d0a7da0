//! `Link` header handling for complete listings.
//!
//! GitHub answers list endpoints page by page and names the next page in the
//! `Link` header as an absolute URL. We only follow a link that points at
//! the API we are configured for, and turn it back into a relative path,
//! because octocrab attaches credentials only to relative requests (and a
//! link to another host must never receive our token).

use http::Uri;

/// Hard stop for a listing: a loop in `Link` headers must not spin forever.
pub const MAX_PAGES: usize = 1_000;

/// The `rel="next"` target of a `Link` header value, if any.
pub fn next_link(link_header: &str) -> Option<&str> {
    link_header.split(',').find_map(|entry| {
        let mut parts = entry.split(';');
        let target = parts.next()?.trim();
        let target = target.strip_prefix('<')?.strip_suffix('>')?;
        parts
            .any(|param| {
                let param = param.trim();
                param == "rel=\"next\"" || param == "rel=next"
            })
            .then_some(target)
    })
}

/// Why a next-page link cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the next-page link is not a valid URL")]
    Invalid,
    #[error("the next-page link points outside the configured GitHub API ({0})")]
    ForeignHost(String),
}

/// Converts an absolute next-page URL into the path-and-query to request,
/// refusing links to any other scheme, host or API prefix than `api_base`.
pub fn relative_next_path(api_base: &Uri, next: &str) -> Result<String, LinkError> {
    let next: Uri = next.parse().map_err(|_| LinkError::Invalid)?;
    let Some(path_and_query) = next.path_and_query() else {
        return Err(LinkError::Invalid);
    };
    if next.authority().is_none() {
        return Ok(path_and_query.as_str().to_owned());
    }
    let base_prefix = api_base.path().trim_end_matches('/');
    let same_origin =
        next.scheme() == api_base.scheme() && next.authority() == api_base.authority();
    let under_prefix = path_and_query.path() == base_prefix
        || path_and_query
            .path()
            .strip_prefix(base_prefix)
            .is_some_and(|rest| rest.starts_with('/'));
    if !same_origin || !under_prefix {
        return Err(LinkError::ForeignHost(
            next.authority().map(|a| a.to_string()).unwrap_or_default(),
        ));
    }
    Ok(path_and_query.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GITHUB_LINK: &str = "<https://api.github.com/repositories/1/issues?page=2>; rel=\"next\", \
                               <https://api.github.com/repositories/1/issues?page=5>; rel=\"last\"";

    #[test]
    fn next_link_is_found_among_several_relations() {
        assert_eq!(
            next_link(GITHUB_LINK),
            Some("https://api.github.com/repositories/1/issues?page=2")
        );
        let reordered = "<https://x/a?page=1>; rel=\"prev\", <https://x/a?page=3>; rel=\"next\"";
        assert_eq!(next_link(reordered), Some("https://x/a?page=3"));
    }

    #[test]
    fn last_page_has_no_next_link() {
        let last = "<https://api.github.com/r?page=1>; rel=\"first\", \
                    <https://api.github.com/r?page=4>; rel=\"prev\"";
        assert_eq!(next_link(last), None);
        assert_eq!(next_link(""), None);
    }

    #[test]
    fn cursor_links_keep_their_query() {
        let link =
            "<https://api.github.com/app/hook/deliveries?per_page=100&cursor=v1_123>; rel=\"next\"";
        let base: Uri = "https://api.github.com".parse().expect("uri");
        assert_eq!(
            relative_next_path(&base, next_link(link).expect("next")),
            Ok("/app/hook/deliveries?per_page=100&cursor=v1_123".to_owned())
        );
    }

    #[test]
    fn enterprise_links_keep_the_api_prefix() {
        let base: Uri = "https://ghe.example.com/api/v3".parse().expect("uri");
        assert_eq!(
            relative_next_path(
                &base,
                "https://ghe.example.com/api/v3/repos/o/r/pulls?page=2"
            ),
            Ok("/api/v3/repos/o/r/pulls?page=2".to_owned())
        );
        assert!(matches!(
            relative_next_path(&base, "https://ghe.example.com/other/repos?page=2"),
            Err(LinkError::ForeignHost(_))
        ));
    }

    #[test]
    fn links_to_another_host_or_scheme_are_refused() {
        let base: Uri = "https://api.github.com".parse().expect("uri");
        assert_eq!(
            relative_next_path(&base, "https://evil.example/repos?page=2"),
            Err(LinkError::ForeignHost("evil.example".to_owned()))
        );
        assert!(relative_next_path(&base, "http://api.github.com/repos?page=2").is_err());
    }
}
