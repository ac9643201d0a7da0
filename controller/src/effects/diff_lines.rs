//! Where in a pull request's diff a finding can be shown: the lines of the
//! new side (`RIGHT`) each file's hunks show, read from the patches GitHub
//! returns for the reviewed range, and a finding's `location`
//! (`path:line` or `path:start-end`) placed on them.
//!
//! GitHub accepts an inline comment only on a line its diff shows, and a
//! multi-line comment only inside one hunk; anything else it refuses with
//! a 422. So a location is placed only when it lies wholly inside one hunk
//! of its file; a file without a patch (binary, too large, deleted: no new
//! side at all) places nothing, and such findings go to the review's body.

use std::collections::BTreeMap;

use crate::github::PullRequestFile;

/// The new-side lines of one hunk: `first..=last`, all shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hunk {
    first: u32,
    last: u32,
}

/// The commentable new-side lines of every file of a diff, by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DiffLines {
    hunks: BTreeMap<String, Vec<Hunk>>,
}

/// Where one inline comment goes: `line` is its last line, `start_line`
/// its first when it spans more than one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    pub path: String,
    pub start_line: Option<u32>,
    pub line: u32,
}

impl DiffLines {
    pub(crate) fn from_files(files: &[PullRequestFile]) -> DiffLines {
        let hunks = files
            .iter()
            .filter_map(|file| {
                let patch = file.patch.as_deref()?;
                Some((file.filename.clone(), new_side_hunks(patch)))
            })
            .collect();
        DiffLines { hunks }
    }

    /// Where `location` goes, if it names lines one hunk shows.
    pub(crate) fn place(&self, location: &str) -> Option<Placement> {
        let (path, first, last) = parse_location(location)?;
        let hunks = self.hunks.get(path)?;
        hunks
            .iter()
            .any(|h| h.first <= first && last <= h.last)
            .then(|| Placement {
                path: path.to_owned(),
                start_line: (first < last).then_some(first),
                line: last,
            })
    }
}

/// `path:line` or `path:start-end` (start ≤ end, lines from 1), with a
/// leading `./` dropped from the path.
fn parse_location(location: &str) -> Option<(&str, u32, u32)> {
    let (path, lines) = location.trim().rsplit_once(':')?;
    let path = path.strip_prefix("./").unwrap_or(path);
    if path.is_empty() {
        return None;
    }
    let number = |text: &str| -> Option<u32> {
        let text = text.trim();
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        text.parse().ok().filter(|n| *n > 0)
    };
    let (first, last) = match lines.split_once('-') {
        Some((start, end)) => (number(start)?, number(end)?),
        None => {
            let line = number(lines)?;
            (line, line)
        }
    };
    (first <= last).then_some((path, first, last))
}

/// The new-side line ranges of a patch's hunks, counted from the lines
/// themselves (context and added lines advance the new side; removed lines
/// and `\ No newline at end of file` do not).
fn new_side_hunks(patch: &str) -> Vec<Hunk> {
    let mut hunks = Vec::new();
    let mut current: Option<(u32, u32)> = None;
    let close = |current: Option<(u32, u32)>, hunks: &mut Vec<Hunk>| {
        if let Some((first, count)) = current.filter(|(_, count)| *count > 0) {
            hunks.push(Hunk {
                first,
                last: first + count - 1,
            });
        }
    };
    for line in patch.lines() {
        if line.starts_with("@@") {
            close(current.take(), &mut hunks);
            current = hunk_start(line).map(|first| (first, 0));
            continue;
        }
        let Some((_, count)) = current.as_mut() else {
            continue;
        };
        if line.starts_with('+') || line.starts_with(' ') || line.is_empty() {
            *count += 1;
        }
    }
    close(current, &mut hunks);
    hunks
}

/// The first new-side line of `@@ -a,b +c,d @@ …` (`c`).
fn hunk_start(header: &str) -> Option<u32> {
    let new_side = header
        .split_whitespace()
        .find_map(|part| part.strip_prefix('+'))?;
    let first = new_side.split(',').next()?;
    first.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, status: &str, patch: Option<&str>) -> PullRequestFile {
        PullRequestFile {
            filename: name.to_owned(),
            status: status.to_owned(),
            previous_filename: None,
            patch: patch.map(str::to_owned),
        }
    }

    fn lines() -> DiffLines {
        DiffLines::from_files(&[
            file(
                "added.txt",
                "added",
                Some("@@ -0,0 +1,3 @@\n+one\n+two\n+three"),
            ),
            file(
                "src/lib.rs",
                "modified",
                Some(
                    "@@ -8,6 +8,7 @@ fn a() {\n ctx8\n ctx9\n-old10\n+new10\n+new11\n ctx12\n ctx13\n ctx14\n\
                     @@ -40,3 +41,3 @@\n ctx41\n-old\n+new42\n ctx43\n\\ No newline at end of file",
                ),
            ),
            file("gone.txt", "removed", Some("@@ -1,2 +0,0 @@\n-a\n-b")),
            file("logo.png", "added", None),
        ])
    }

    fn at(path: &str, start_line: Option<u32>, line: u32) -> Option<Placement> {
        Some(Placement {
            path: path.to_owned(),
            start_line,
            line,
        })
    }

    #[test]
    fn a_line_the_diff_shows_on_the_new_side_is_placed() {
        let lines = lines();
        assert_eq!(lines.place("added.txt:1"), at("added.txt", None, 1));
        assert_eq!(lines.place("./added.txt:3"), at("added.txt", None, 3));
        // Context lines are shown too, and count like added ones.
        assert_eq!(lines.place("src/lib.rs:8"), at("src/lib.rs", None, 8));
        assert_eq!(lines.place("src/lib.rs:14"), at("src/lib.rs", None, 14));
        assert_eq!(lines.place("src/lib.rs:43"), at("src/lib.rs", None, 43));
    }

    #[test]
    fn lines_outside_every_hunk_or_file_are_not_placed() {
        let lines = lines();
        for location in [
            "added.txt:4",
            "src/lib.rs:7",
            "src/lib.rs:15",
            "src/lib.rs:40",
            "src/lib.rs:44",
            "README.md:1",
        ] {
            assert_eq!(lines.place(location), None, "{location}");
        }
    }

    #[test]
    fn a_range_is_placed_only_inside_one_hunk() {
        let lines = lines();
        assert_eq!(
            lines.place("src/lib.rs:10-12"),
            at("src/lib.rs", Some(10), 12)
        );
        assert_eq!(lines.place("src/lib.rs:11-11"), at("src/lib.rs", None, 11));
        assert_eq!(lines.place("src/lib.rs:12-42"), None, "two hunks");
        assert_eq!(lines.place("src/lib.rs:13-16"), None, "past the hunk");
        assert_eq!(lines.place("src/lib.rs:12-10"), None, "backwards");
    }

    #[test]
    fn deleted_and_binary_files_place_nothing() {
        let lines = lines();
        assert_eq!(lines.place("gone.txt:1"), None);
        assert_eq!(lines.place("logo.png:1"), None);
    }

    #[test]
    fn locations_without_a_line_are_not_placed() {
        let lines = lines();
        for location in [
            "added.txt",
            "added.txt:",
            "added.txt:0",
            "added.txt:x",
            "added.txt:+1",
            ":1",
            "added.txt:1:2",
            "added.txt:1-",
        ] {
            assert_eq!(lines.place(location), None, "{location}");
        }
    }
}
