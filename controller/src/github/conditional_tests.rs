//! Every GET is conditional, and a `304` must stand for exactly the facts
//! the `200` gave: reads of unchanged answers cost no rate limit, a full
//! last page from the cache is asked again (an item added since would start
//! a page its cached `Link` cannot name), a pull request whose mergeability
//! is still being computed is never answered from the cache, and the App's
//! deliveries listing stops at the newest delivery an earlier pass saw.
#![allow(clippy::unwrap_used)]

use super::http_tests::{Hub, repo, serve, test_token_client};
use super::*;
use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const ISSUE_ROUTE: &str = "/repos/{owner}/{repo}/issues/{number}";
const COMMENTS_ROUTE: &str = "/repos/{owner}/{repo}/issues/{number}/comments";

/// Points fakehub charged for `route`, and how many reads it answered `304`.
fn charged(hub: &Hub, route: &str) -> (u64, usize) {
    let records = hub.hub.requests();
    let mine = records
        .iter()
        .filter(|r| r.method == "GET" && r.route == route);
    mine.fold((0, 0), |(points, hits), r| {
        (points + r.cost, hits + usize::from(r.conditional_hit))
    })
}

#[tokio::test]
async fn plain_reads_of_an_unchanged_answer_are_free_after_the_first() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    for _ in 0..3 {
        assert_eq!(hub.api.issue(&repo(), issue).await.unwrap().number, issue);
    }
    assert_eq!(charged(&hub, ISSUE_ROUTE), (1, 2));
}

#[tokio::test]
async fn a_full_last_page_from_the_cache_is_asked_again_so_a_new_item_is_seen() {
    let hub = Hub::start().await;
    let issue = hub.issue().await;
    hub.comments(issue, 100).await;
    assert_eq!(
        hub.api.issue_comments(&repo(), issue).await.unwrap().len(),
        100
    );
    // Oldest first: the 101st comment leaves page 1's body as it was and
    // only adds a `next` link that the cached answer does not have.
    hub.comments(issue, 1).await;
    let comments = hub.api.issue_comments(&repo(), issue).await.unwrap();
    assert_eq!(comments.len(), 101);
    // Page 1 now names page 2, so both are trusted from the cache: free.
    let (before, _) = charged(&hub, COMMENTS_ROUTE);
    assert_eq!(
        hub.api.issue_comments(&repo(), issue).await.unwrap().len(),
        101
    );
    let (after, _) = charged(&hub, COMMENTS_ROUTE);
    assert_eq!(after, before, "both pages answered 304");
}

/// A server answering one PR with an ETag, `mergeable: null` until
/// `computed` reads were made, and `304` to a matching `If-None-Match`.
fn pull_server(
    computed_after: usize,
    seen: Arc<AtomicUsize>,
    conditional: Arc<AtomicUsize>,
) -> Router {
    Router::new().route(
        "/repos/o/r/pulls/7",
        get(move |headers: HeaderMap| {
            let (seen, conditional) = (Arc::clone(&seen), Arc::clone(&conditional));
            async move {
                let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                let mergeable = (n > computed_after).then_some(true);
                let etag = format!("\"{}\"", mergeable.is_some());
                if headers.get("if-none-match").is_some() {
                    conditional.fetch_add(1, Ordering::SeqCst);
                    if headers["if-none-match"].to_str().unwrap() == etag {
                        return StatusCode::NOT_MODIFIED.into_response();
                    }
                }
                let body = json!({
                    "number": 7, "state": "open", "title": "t", "body": null,
                    "html_url": "https://example/pull/7",
                    "user": {"login": "bot", "id": 1, "type": "Bot"},
                    "head": {"ref": "autoforge/7", "sha": "a".repeat(40), "repo": null},
                    "base": {"ref": "main", "sha": "b".repeat(40), "repo": null},
                    "merged_at": null, "merge_commit_sha": null,
                    "mergeable": mergeable, "mergeable_state": "unknown",
                });
                ([("etag", etag)], axum::Json(body)).into_response()
            }
        }),
    )
}

#[tokio::test]
async fn a_pull_request_still_computing_mergeability_is_never_answered_from_the_cache() {
    let (seen, conditional) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let app = pull_server(2, Arc::clone(&seen), Arc::clone(&conditional));
    let api = test_token_client(&serve(app).await);
    let repo: RepoName = "o/r".parse().unwrap();
    assert_eq!(
        api.pull_request(&repo, autoforge_journal::testing::pull(7))
            .await
            .unwrap()
            .mergeable,
        None
    );
    assert_eq!(
        api.pull_request(&repo, autoforge_journal::testing::pull(7))
            .await
            .unwrap()
            .mergeable,
        None
    );
    assert_eq!(
        conditional.load(Ordering::SeqCst),
        0,
        "a null answer is not kept"
    );
    assert_eq!(
        api.pull_request(&repo, autoforge_journal::testing::pull(7))
            .await
            .unwrap()
            .mergeable,
        Some(true)
    );
    // Now final: kept, and the next read is a conditional one.
    let again = api
        .pull_request_if_changed(&repo, autoforge_journal::testing::pull(7))
        .await
        .unwrap();
    assert!(!again.is_modified());
    assert_eq!(again.into_inner().mergeable, Some(true));
    assert_eq!(
        (
            seen.load(Ordering::SeqCst),
            conditional.load(Ordering::SeqCst)
        ),
        (4, 1)
    );
}

/// Deliveries `1..=total`, newest first, paged by a `cursor` as GitHub
/// pages them; counts the pages served.
fn deliveries_server(total: u64, pages: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/app/hook/deliveries",
        get(move |Query(query): Query<HashMap<String, String>>| {
            let pages = Arc::clone(&pages);
            async move {
                pages.fetch_add(1, Ordering::SeqCst);
                let per_page: u64 = query["per_page"].parse().unwrap();
                let from: u64 = query.get("cursor").map_or(total, |c| c.parse().unwrap());
                let ids: Vec<u64> = (1..=from).rev().take(per_page as usize).collect();
                let body: Vec<_> = ids
                    .iter()
                    .map(|id| json!({
                        "id": id, "guid": format!("g{id}"), "delivered_at": "2026-01-01T00:00:00Z",
                        "redelivery": false, "status": "OK", "status_code": 202,
                        "event": "issues", "action": null, "installation_id": 1,
                        "repository_id": 1,
                    }))
                    .collect();
                let mut headers = HeaderMap::new();
                if let Some(next) = ids.last().filter(|last| **last > 1) {
                    let link = format!(
                        "</app/hook/deliveries?per_page={per_page}&cursor={}>; rel=\"next\"",
                        next - 1
                    );
                    headers.insert("link", link.parse().unwrap());
                }
                (headers, axum::Json(body)).into_response()
            }
        }),
    )
}

#[tokio::test]
async fn the_deliveries_listing_reads_back_only_to_the_newest_delivery_seen() {
    let pages = Arc::new(AtomicUsize::new(0));
    let api = test_token_client(&serve(deliveries_server(250, Arc::clone(&pages))).await);
    let first = api.hook_deliveries_since(None).await.unwrap();
    assert_eq!(first.len(), 100, "a fresh process reads the first page");
    assert_eq!(first[0].id, 250);
    let since = api.hook_deliveries_since(Some(120)).await.unwrap();
    assert_eq!(since.len(), 200, "two pages reach delivery 120");
    assert!(since.iter().any(|d| d.id == 120));
    assert_eq!(pages.load(Ordering::SeqCst), 3);
}
