//! Complete listings: follow `Link: rel="next"` to the end or fail. Every
//! page is read conditionally, each with its own ETag and cached `Link`.
//!
//! A listing that stops early would let the effect executor conclude "our
//! comment is not there" and post it twice, so a failure on any page fails
//! the whole listing ([`GitHubError::IncompleteListing`]); nothing partial
//! is ever returned.

use super::client::{Conditional, GitHubApi, RawResponse, decode};
use super::error::GitHubError;
use super::pagination::{MAX_PAGES, next_link, relative_next_path};
use http::header::LINK;
use serde::de::DeserializeOwned;

/// Adds `per_page=100` unless the path sets its own page size.
fn with_page_size(path: &str) -> String {
    if path.contains("per_page=") {
        return path.to_owned();
    }
    let separator = if path.contains('?') { '&' } else { '?' };
    format!("{path}{separator}per_page=100")
}

impl GitHubApi {
    /// Every item of a listing whose pages are JSON arrays.
    pub async fn get_all<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, GitHubError> {
        Ok(self.get_all_if_changed(path).await?.into_inner())
    }

    /// Like [`Self::get_all`], and says whether anything changed:
    /// `NotModified` only when every page answered `304` (which costs no
    /// rate limit): an unchanged first page proves nothing about the rest.
    pub async fn get_all_if_changed<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Conditional<Vec<T>>, GitHubError> {
        let mut items = Vec::new();
        let modified = self
            .walk(path, |page_path, response| {
                items.extend(decode::<Vec<T>>(page_path, &response.body)?);
                Ok(())
            })
            .await?;
        Ok(if modified {
            Conditional::Modified(items)
        } else {
            Conditional::NotModified(items)
        })
    }

    /// Every item of a listing whose pages are objects holding the items in
    /// `field` next to a `total_count` (check runs, installation
    /// repositories). A final count that differs from `total_count` is an
    /// error: items moved between pages while we read.
    pub async fn get_all_in<T: DeserializeOwned>(
        &self,
        path: &str,
        field: &str,
    ) -> Result<Vec<T>, GitHubError> {
        let mut items = Vec::new();
        let mut total_count = None;
        self.walk(path, |page_path, response| {
            let mut page: serde_json::Map<String, serde_json::Value> =
                decode(page_path, &response.body)?;
            total_count = page.get("total_count").and_then(serde_json::Value::as_u64);
            let list = page.remove(field).unwrap_or(serde_json::Value::Null);
            let list: Vec<T> =
                serde_json::from_value(list).map_err(|source| GitHubError::Decode {
                    path: page_path.to_owned(),
                    source,
                })?;
            items.extend(list);
            Ok(())
        })
        .await?;
        if let Some(total) = total_count
            && total != items.len() as u64
        {
            return Err(GitHubError::InconsistentListing {
                path: path.to_owned(),
                detail: format!("total_count says {total}, the pages held {}", items.len()),
            });
        }
        Ok(items)
    }

    /// Reads every page conditionally, handing each to `on_page`; returns
    /// whether any page was new.
    async fn walk(
        &self,
        path: &str,
        mut on_page: impl FnMut(&str, &RawResponse) -> Result<(), GitHubError>,
    ) -> Result<bool, GitHubError> {
        self.walk_until(path, |page_path, response| {
            on_page(page_path, response)?;
            Ok(false)
        })
        .await
    }

    /// Like `walk`, but stops after the page for which `on_page` answers
    /// `true` (it found what it was reading back to).
    pub(super) async fn walk_until(
        &self,
        path: &str,
        mut on_page: impl FnMut(&str, &RawResponse) -> Result<bool, GitHubError>,
    ) -> Result<bool, GitHubError> {
        let mut next = Some(with_page_size(path));
        let mut pages_read = 0;
        let mut any_modified = false;
        while let Some(page_path) = next.take() {
            if pages_read == MAX_PAGES {
                return Err(GitHubError::TooManyPages {
                    path: path.to_owned(),
                    max_pages: MAX_PAGES,
                });
            }
            let read_so_far = pages_read;
            let incomplete = move |source: GitHubError| GitHubError::IncompleteListing {
                path: path.to_owned(),
                pages_read: read_so_far,
                source: Box::new(source),
            };
            let (mut response, mut modified) = self
                .read_conditional(&page_path)
                .await
                .map_err(incomplete)?;
            if !modified && next_target(&response).is_none() && page_is_full(&page_path, &response)
            {
                // A full last page from the cache: an item added since
                // starts a next page that the cached `Link` cannot name.
                self.forget_cached(&page_path);
                (response, modified) = self
                    .read_conditional(&page_path)
                    .await
                    .map_err(incomplete)?;
            }
            any_modified |= modified;
            let reached = on_page(&page_path, &response).map_err(incomplete)?;
            pages_read += 1;
            if reached {
                break;
            }
            if let Some(target) = next_target(&response) {
                next = Some(
                    relative_next_path(self.api_base(), &target)
                        .map_err(|e| incomplete(e.into()))?,
                );
            }
        }
        Ok(any_modified)
    }
}

/// The `rel="next"` target of a page's `Link` headers.
fn next_target(response: &RawResponse) -> Option<String> {
    let link = response
        .headers
        .get_all(LINK)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    next_link(&link).map(str::to_owned)
}

/// Whether a page holds as many items as its `per_page` asked for: the
/// items of an array page, or of the one array in an object page.
fn page_is_full(page_path: &str, response: &RawResponse) -> bool {
    let per_page = page_path
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("per_page="))
        .and_then(|n| n.parse::<usize>().ok());
    let Some(per_page) = per_page else {
        return false;
    };
    let items = match serde_json::from_str::<serde_json::Value>(&response.body) {
        Ok(serde_json::Value::Array(items)) => items.len(),
        Ok(serde_json::Value::Object(fields)) => fields
            .values()
            .find_map(serde_json::Value::as_array)
            .map_or(0, Vec::len),
        _ => 0,
    };
    items >= per_page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_added_once() {
        assert_eq!(with_page_size("/a"), "/a?per_page=100");
        assert_eq!(with_page_size("/a?state=all"), "/a?state=all&per_page=100");
        assert_eq!(with_page_size("/a?per_page=5"), "/a?per_page=5");
    }

    fn page(body: &str) -> RawResponse {
        RawResponse {
            status: http::StatusCode::OK,
            headers: http::HeaderMap::new(),
            body: body.to_owned(),
        }
    }

    #[test]
    fn a_page_is_full_when_it_holds_per_page_items() {
        assert!(page_is_full("/a?per_page=2", &page("[1,2]")));
        assert!(!page_is_full("/a?per_page=3", &page("[1,2]")));
        let object = r#"{"total_count":2,"check_runs":[{},{}]}"#;
        assert!(page_is_full("/a?x=1&per_page=2", &page(object)));
        assert!(!page_is_full("/a", &page("[1,2]")));
    }
}
