//! A bounded ETag cache that makes every GET conditional.
//!
//! A `304 Not Modified` costs no rate limit, so the poller can look at every
//! labelled issue each minute and a waiting run can re-read its facts for
//! free. It is bounded twice: by entries and by the bytes of the bodies it
//! keeps, the least recently used entry leaving first. We keep our own small cache instead of
//! octocrab's `HttpCacheLayer`: that one is unbounded, is shared by every
//! installation, and turns a 304 into a 200, hiding the one fact the poller
//! wants ("nothing changed, skip the work").

use super::ratelimit::RateScope;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Bodies larger than this are not cached (they would crowd out the rest).
pub const MAX_CACHED_BODY_BYTES: usize = 1024 * 1024;

/// All cached bodies together stay under this.
pub const MAX_CACHED_TOTAL_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone)]
struct Entry {
    etag: String,
    answer: CachedAnswer,
    last_used: u64,
}

/// What a `304` stands for: the body and `Link` header of the last `200`
/// (GitHub's 304 carries neither, and pagination needs the link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedAnswer {
    pub body: Arc<[u8]>,
    pub link: Option<String>,
}

/// Cache of the last `200` body and ETag per (scope, request path).
#[derive(Debug)]
pub struct EtagCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<(RateScope, String), Entry>,
    clock: u64,
    /// Sum of the cached bodies' lengths.
    bytes: usize,
}

impl Inner {
    fn remove(&mut self, key: &(RateScope, String)) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.answer.body.len();
        }
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, entry)| entry.last_used)
            .map(|(key, _)| key.clone());
        if let Some(oldest) = oldest {
            self.remove(&oldest);
        }
    }
}

impl EtagCache {
    pub fn new(capacity: usize) -> Self {
        EtagCache {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The ETag to send as `If-None-Match`, if we hold a body for it.
    pub fn etag(&self, scope: RateScope, path: &str) -> Option<String> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let entry = inner.entries.get_mut(&(scope, path.to_owned()))?;
        entry.last_used = now;
        Some(entry.etag.clone())
    }

    /// The answer stored with the ETag, for a `304`.
    pub fn answer(&self, scope: RateScope, path: &str) -> Option<CachedAnswer> {
        self.lock()
            .entries
            .get(&(scope, path.to_owned()))
            .map(|entry| entry.answer.clone())
    }

    /// Stores a `200` answer; the least recently used entry makes room.
    pub fn store(&self, scope: RateScope, path: &str, etag: &str, link: Option<&str>, body: &[u8]) {
        if self.capacity == 0 || body.len() > MAX_CACHED_BODY_BYTES {
            return;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let key = (scope, path.to_owned());
        inner.remove(&key);
        while !inner.entries.is_empty()
            && (inner.entries.len() >= self.capacity
                || inner.bytes + body.len() > MAX_CACHED_TOTAL_BYTES)
        {
            inner.evict_oldest();
        }
        let last_used = inner.clock;
        inner.bytes += body.len();
        inner.entries.insert(
            key,
            Entry {
                etag: etag.to_owned(),
                answer: CachedAnswer {
                    body: Arc::from(body),
                    link: link.map(str::to_owned),
                },
                last_used,
            },
        );
    }

    /// Forgets a path, e.g. when a `304` arrived but the body is gone.
    pub fn forget(&self, scope: RateScope, path: &str) {
        self.lock().remove(&(scope, path.to_owned()));
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Entries are replaced whole; a panic elsewhere cannot leave one torn.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCOPE: RateScope = RateScope::Installation(7);

    #[test]
    fn stored_answer_yields_its_etag_body_and_link() {
        let cache = EtagCache::new(4);
        assert_eq!(cache.etag(SCOPE, "/a"), None);
        cache.store(SCOPE, "/a", "\"abc\"", Some("<x>; rel=\"next\""), b"[1]");
        assert_eq!(cache.etag(SCOPE, "/a").as_deref(), Some("\"abc\""));
        let answer = cache.answer(SCOPE, "/a").expect("stored");
        assert_eq!(&answer.body[..], b"[1]");
        assert_eq!(answer.link.as_deref(), Some("<x>; rel=\"next\""));
    }

    #[test]
    fn scopes_do_not_share_entries() {
        let cache = EtagCache::new(4);
        cache.store(SCOPE, "/a", "\"abc\"", None, b"[1]");
        assert_eq!(cache.etag(RateScope::Installation(8), "/a"), None);
    }

    #[test]
    fn least_recently_used_entry_is_evicted_at_capacity() {
        let cache = EtagCache::new(2);
        cache.store(SCOPE, "/a", "1", None, b"a");
        cache.store(SCOPE, "/b", "2", None, b"b");
        assert!(cache.etag(SCOPE, "/a").is_some()); // touch /a so /b is older
        cache.store(SCOPE, "/c", "3", None, b"c");
        assert_eq!(cache.len(), 2);
        assert!(cache.etag(SCOPE, "/b").is_none());
        assert!(cache.etag(SCOPE, "/a").is_some());
        assert!(cache.etag(SCOPE, "/c").is_some());
    }

    #[test]
    fn replacing_an_entry_does_not_evict_another() {
        let cache = EtagCache::new(2);
        cache.store(SCOPE, "/a", "1", None, b"a");
        cache.store(SCOPE, "/b", "2", None, b"b");
        cache.store(SCOPE, "/a", "3", None, b"a2");
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.etag(SCOPE, "/a").as_deref(), Some("3"));
    }

    #[test]
    fn oversized_bodies_and_zero_capacity_are_not_cached() {
        let cache = EtagCache::new(2);
        cache.store(
            SCOPE,
            "/big",
            "1",
            None,
            &vec![0; MAX_CACHED_BODY_BYTES + 1],
        );
        assert!(cache.is_empty());
        let disabled = EtagCache::new(0);
        disabled.store(SCOPE, "/a", "1", None, b"a");
        assert!(disabled.is_empty());
    }

    #[test]
    fn total_bytes_stay_under_the_budget() {
        let cache = EtagCache::new(1000);
        let body = vec![0; MAX_CACHED_BODY_BYTES];
        let fit = MAX_CACHED_TOTAL_BYTES / MAX_CACHED_BODY_BYTES;
        for n in 0..fit + 3 {
            cache.store(SCOPE, &format!("/{n}"), "1", None, &body);
        }
        assert_eq!(cache.len(), fit);
        assert!(cache.etag(SCOPE, "/0").is_none(), "the oldest left first");
        assert!(cache.etag(SCOPE, &format!("/{}", fit + 2)).is_some());
    }

    #[test]
    fn forgotten_path_is_unconditional_again() {
        let cache = EtagCache::new(2);
        cache.store(SCOPE, "/a", "1", None, b"a");
        cache.forget(SCOPE, "/a");
        assert_eq!(cache.etag(SCOPE, "/a"), None);
    }
}
