//! Answers of git queries that depend on object ids alone, kept once
//! computed.
//!
//! GitHub renders a pull request's size, mergeability and files, a
//! comparison, or a commit from stored data; fakehub asks git each time,
//! and a fleet of runs reading their pull requests made fakehub's git
//! processes most of the machine's CPU in the scale bench, so the bench
//! measured fakehub rather than the controller. A query whose every input
//! is a full object id (`diff A B`, `merge-base A B`, `cat-file commit A`)
//! has one answer for good, since objects never change or go away in a
//! fakehub repository; those answers are remembered here. A query naming a
//! ref, or one that failed, is never remembered.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

/// Answers kept per query kind before the memo starts over: far more than
/// the bench's thousand runs need, and bounded for a fakehub that serves
/// for days.
const MAX_ENTRIES: usize = 50_000;

/// One query kind's remembered answers, by repository and object ids.
pub(crate) struct Memo<V> {
    answers: Mutex<BTreeMap<String, V>>,
}

impl<V: Clone> Memo<V> {
    pub(crate) const fn new() -> Self {
        Memo {
            answers: Mutex::new(BTreeMap::new()),
        }
    }

    /// The key of a query on `repo` over `ids`, when every one of them is
    /// a full object id (anything else may name something that moves).
    pub(crate) fn key(repo: &Path, ids: &[&str]) -> Option<String> {
        ids.iter().all(|id| is_object_id(id)).then(|| {
            let mut key = repo.display().to_string();
            for id in ids {
                key.push('\0');
                key.push_str(id);
            }
            key
        })
    }

    pub(crate) fn get(&self, key: &str) -> Option<V> {
        self.lock().get(key).cloned()
    }

    pub(crate) fn put(&self, key: String, answer: V) {
        let mut answers = self.lock();
        if answers.len() >= MAX_ENTRIES {
            answers.clear();
        }
        answers.insert(key, answer);
    }

    /// Drops every answer about `repo`: once it is deleted, a repository
    /// created at its path later does not hold its objects.
    pub(crate) fn forget(&self, repo: &Path) {
        let prefix = format!("{}\0", repo.display());
        self.lock().retain(|key, _| !key.starts_with(&prefix));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, V>> {
        // A panic while holding the lock leaves a map that is still whole.
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A full SHA-1 or SHA-256 object id in lowercase hex, as git prints them.
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64)
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "89abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn only_queries_over_full_object_ids_have_a_key() {
        let repo = Path::new("/repos/octo/widgets.git");
        assert!(Memo::<u8>::key(repo, &[A, B]).is_some());
        assert_ne!(
            Memo::<u8>::key(repo, &[A, B]),
            Memo::<u8>::key(repo, &[B, A])
        );
        assert_ne!(
            Memo::<u8>::key(repo, &[A]),
            Memo::<u8>::key(Path::new("/repos/octo/other.git"), &[A])
        );
        // A branch, an abbreviated id, a revision expression or uppercase
        // hex may resolve to something else tomorrow.
        for moving in ["main", &A[..12], "HEAD~1", &A.to_uppercase()] {
            assert!(Memo::<u8>::key(repo, &[A, moving]).is_none(), "{moving}");
        }
    }

    #[test]
    fn an_answer_is_kept_and_the_memo_starts_over_when_full() {
        let memo = Memo::new();
        memo.put("k".to_owned(), 7);
        assert_eq!(memo.get("k"), Some(7));
        for n in 0..MAX_ENTRIES {
            memo.put(n.to_string(), 1);
        }
        assert!(memo.lock().len() <= MAX_ENTRIES);
        assert_eq!(memo.get("k"), None);
    }

    #[test]
    fn a_deleted_repository_loses_its_answers_and_no_other() {
        let (gone, kept) = (Path::new("/r/a.git"), Path::new("/r/a.git2"));
        let memo = Memo::new();
        memo.put(Memo::<u8>::key(gone, &[A]).unwrap(), 1);
        memo.put(Memo::<u8>::key(kept, &[A]).unwrap(), 2);
        memo.forget(gone);
        assert_eq!(memo.get(&Memo::<u8>::key(gone, &[A]).unwrap()), None);
        assert_eq!(memo.get(&Memo::<u8>::key(kept, &[A]).unwrap()), Some(2));
    }
}
