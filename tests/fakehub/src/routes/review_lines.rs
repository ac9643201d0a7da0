//! The inline comments of a review being created, checked the way GitHub
//! checks them: each names a file of the pull request's diff at the
//! review's `commit_id` and a `line` (and optional `start_line`) that one
//! hunk of that file shows on the comment's `side`; anything else is the
//! 422 GitHub answers (`Line could not be resolved`).

use serde_json::Value;

use crate::http::ApiError;
use crate::world::ReviewComment;

/// One hunk of a file's patch: its text, and the lines it shows on each side.
struct Hunk {
    text: String,
    left: Vec<u32>,
    right: Vec<u32>,
}

/// The hunks of GitHub's `patch` of one file.
fn hunks(patch: &str) -> Vec<Hunk> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let (mut old, mut new) = (0u32, 0u32);
    for line in patch.lines() {
        if let Some(header) = line.strip_prefix("@@ ") {
            let mut sides = header.split_whitespace();
            let start = |part: Option<&str>, sign: char| -> u32 {
                part.and_then(|p| p.strip_prefix(sign))
                    .and_then(|p| p.split(',').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            };
            old = start(sides.next(), '-');
            new = start(sides.next(), '+');
            hunks.push(Hunk {
                text: line.to_string(),
                left: Vec::new(),
                right: Vec::new(),
            });
            continue;
        }
        let Some(hunk) = hunks.last_mut() else {
            continue;
        };
        hunk.text.push('\n');
        hunk.text.push_str(line);
        match line.chars().next() {
            Some('+') => {
                hunk.right.push(new);
                new += 1;
            }
            Some('-') => {
                hunk.left.push(old);
                old += 1;
            }
            Some('\\') => {}
            _ => {
                hunk.left.push(old);
                hunk.right.push(new);
                old += 1;
                new += 1;
            }
        }
    }
    hunks
}

fn unresolved(what: &str) -> ApiError {
    ApiError::Unprocessable {
        errors: vec![format!("{what} could not be resolved")],
    }
}

fn side_of(comment: &Value, field: &str) -> Result<String, ApiError> {
    match comment.get(field) {
        None | Some(Value::Null) => Ok("RIGHT".to_string()),
        Some(Value::String(side)) if side == "LEFT" || side == "RIGHT" => Ok(side.clone()),
        Some(_) => Err(ApiError::validation(
            "PullRequestReviewComment",
            field,
            "invalid",
        )),
    }
}

fn line_of(comment: &Value, field: &str) -> Result<Option<u32>, ApiError> {
    match comment.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| ApiError::validation("PullRequestReviewComment", field, "invalid")),
    }
}

/// Checks the request's `comments` against `patches` (path → GitHub's
/// patch, `None` for a file without one) and returns them as stored; `ids`
/// hands out each comment's id.
pub fn checked_comments(
    body: &Value,
    patches: &[(String, Option<String>)],
    mut ids: impl FnMut() -> u64,
) -> Result<Vec<ReviewComment>, ApiError> {
    let Some(requested) = body.get("comments").filter(|c| !c.is_null()) else {
        return Ok(Vec::new());
    };
    let requested = requested
        .as_array()
        .ok_or_else(|| ApiError::validation("PullRequestReview", "comments", "invalid"))?;
    let mut stored = Vec::new();
    for comment in requested {
        let text = |field: &str| {
            comment
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| ApiError::validation("PullRequestReviewComment", field, "missing"))
        };
        let (path, text_body) = (text("path")?, text("body")?);
        let line = line_of(comment, "line")?.ok_or_else(|| unresolved("Line"))?;
        let side = side_of(comment, "side")?;
        let start_line = line_of(comment, "start_line")?;
        let start_side = match start_line {
            Some(_) => Some(side_of(comment, "start_side")?),
            None => None,
        };
        let patch = patches
            .iter()
            .find(|(p, _)| *p == path)
            .ok_or_else(|| unresolved("Path"))?;
        let hunks = hunks(patch.1.as_deref().unwrap_or_default());
        let shows = |hunk: &Hunk, side: &str, line: u32| match side {
            "LEFT" => hunk.left.contains(&line),
            _ => hunk.right.contains(&line),
        };
        let hunk = hunks
            .iter()
            .find(|h| shows(h, &side, line))
            .ok_or_else(|| unresolved("Line"))?;
        if let (Some(start), Some(start_side)) = (start_line, start_side.as_deref()) {
            if start >= line && start_side == side {
                return Err(unresolved("Start line"));
            }
            // A multi-line comment stays inside the hunk of its last line.
            if !shows(hunk, start_side, start) {
                return Err(unresolved("Start line"));
            }
        }
        stored.push(ReviewComment {
            id: ids(),
            path,
            body: text_body,
            line,
            side,
            start_line,
            start_side,
            diff_hunk: hunk.text.clone(),
        });
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn patches() -> Vec<(String, Option<String>)> {
        vec![
            (
                "lib.rs".to_string(),
                Some("@@ -8,4 +8,5 @@\n ctx8\n-old9\n+new9\n+new10\n ctx11\n ctx12\n@@ -40,1 +41,2 @@\n ctx41\n+x42".to_string()),
            ),
            ("logo.png".to_string(), None),
        ]
    }

    fn check(comment: Value) -> Result<Vec<ReviewComment>, ApiError> {
        let mut next = 0;
        checked_comments(&json!({ "comments": [comment] }), &patches(), || {
            next += 1;
            next
        })
    }

    fn refused(comment: Value) -> bool {
        matches!(check(comment), Err(ApiError::Unprocessable { .. }))
    }

    #[test]
    fn lines_a_hunk_shows_are_accepted_on_their_side() {
        let ok =
            check(json!({"path": "lib.rs", "body": "b", "line": 10, "side": "RIGHT"})).unwrap();
        assert_eq!((ok[0].line, ok[0].side.as_str()), (10, "RIGHT"));
        assert!(ok[0].diff_hunk.starts_with("@@ -8,4 +8,5 @@"));
        assert!(check(json!({"path": "lib.rs", "body": "b", "line": 9, "side": "LEFT"})).is_ok());
        let range = json!({"path": "lib.rs", "body": "b", "start_line": 9, "line": 12,
            "side": "RIGHT", "start_side": "RIGHT"});
        assert_eq!(check(range).unwrap()[0].start_line, Some(9));
    }

    #[test]
    fn lines_outside_the_diff_are_refused_with_githubs_422() {
        assert!(refused(json!({"path": "lib.rs", "body": "b", "line": 13})));
        assert!(refused(json!({"path": "lib.rs", "body": "b", "line": 40})));
        assert!(refused(json!({"path": "other.rs", "body": "b", "line": 1})));
        assert!(refused(json!({"path": "logo.png", "body": "b", "line": 1})));
        assert!(refused(
            json!({"path": "lib.rs", "body": "b", "start_line": 12, "line": 42})
        ));
        assert!(refused(
            json!({"path": "lib.rs", "body": "b", "start_line": 11, "line": 11})
        ));
    }
}
