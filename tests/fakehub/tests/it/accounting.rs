//! Rate-limit accounting and the deliveries listing's cursor pages: the
//! points each credential spent (a `304` costs none; every token of an
//! installation counts against the installation), and
//! `/app/hook/deliveries` paged by cursor as GitHub pages it.

use serde_json::{Value, json};

use crate::support::world;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_are_counted_per_installation_and_a_304_costs_none() {
    let w = world().await;
    let url = format!("{}/repos/alice/widgets", w.hub.base_url());
    let scope = format!("installation:{}", w.installation_id);
    let mut etag = String::new();
    for _ in 0..2 {
        // A fresh token each time: both count against the installation.
        let token = w.installation_token().await;
        let answer = w.http.get(&url).bearer_auth(&token).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        etag = answer.headers()["etag"].to_str().unwrap().to_owned();
    }
    let token = w.installation_token().await;
    let cached = w
        .http
        .get(&url)
        .bearer_auth(&token)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), 304);

    let points = w.hub.points_spent();
    assert_eq!(points.get(&scope), Some(&2), "{points:?}");
    let usage: Value = w
        .http
        .get(format!("{}/_fakehub/rate_usage", w.hub.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(usage["points"][&scope], 2, "{usage}");
    let last = w.hub.requests().pop().unwrap();
    assert_eq!((last.rate_scope.as_str(), last.cost), (scope.as_str(), 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deliveries_listing_pages_by_cursor_newest_first() {
    let w = world().await;
    for n in 0..5 {
        let (status, _) = w
            .call(
                "POST",
                "/repos/{owner}/{repo}/issues",
                "/repos/alice/widgets/issues",
                &w.alice,
                Some(json!({"title": format!("issue {n}")})),
            )
            .await;
        assert_eq!(status, 201);
    }
    let jwt = w.jwt();
    let mut next = Some(format!(
        "{}/app/hook/deliveries?per_page=2",
        w.hub.base_url()
    ));
    let mut ids: Vec<u64> = Vec::new();
    let mut pages = 0;
    while let Some(url) = next.take() {
        let answer = w.http.get(&url).bearer_auth(&jwt).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        let link = answer
            .headers()
            .get("link")
            .map(|v| v.to_str().unwrap().to_owned());
        let page: Vec<Value> = answer.json().await.unwrap();
        assert!(page.len() <= 2);
        ids.extend(page.iter().map(|d| d["id"].as_u64().unwrap()));
        pages += 1;
        if let Some(link) = link {
            let numbered = link.contains("?page=") || link.contains("&page=");
            assert!(link.contains("cursor=") && !numbered, "{link}");
            assert!(!link.contains("rel=\"last\""), "{link}");
            let target = link.split(['<', '>']).nth(1).unwrap().to_owned();
            next = Some(target);
        }
    }
    let all: Vec<Value> = w
        .http
        .get(format!(
            "{}/app/hook/deliveries?per_page=100",
            w.hub.base_url()
        ))
        .bearer_auth(&jwt)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let every: Vec<u64> = all.iter().map(|d| d["id"].as_u64().unwrap()).collect();
    assert!(
        every.len() >= 5,
        "one delivery per issue at least: {every:?}"
    );
    assert_eq!(ids, every, "the pages together hold every delivery once");
    assert_eq!(pages, every.len().div_ceil(2));
    let mut sorted = ids.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids, sorted, "newest first, none repeated");
}
