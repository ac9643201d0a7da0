//! Real git plumbing on the bare repositories fakehub serves: creating a
//! repository with files, reading refs, commits, diffs and file contents,
//! and writing merge, squash and rebase commits without a worktree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tokio::process::Command;

use crate::git_memo::Memo;

static REVISIONS: Memo<String> = Memo::new();
static MERGE_BASES: Memo<String> = Memo::new();
static ANCESTRY: Memo<bool> = Memo::new();
static MERGE_TREES: Memo<Result<String, ()>> = Memo::new();
static REV_LISTS: Memo<Vec<String>> = Memo::new();
static COMMITS: Memo<CommitInfo> = Memo::new();
static DIFFS: Memo<Vec<FileChange>> = Memo::new();
static PATCHES: Memo<BTreeMap<String, String>> = Memo::new();

/// Forgets what the memo knows about `repo` (it was deleted).
pub fn forget_repository(repo: &Path) {
    REVISIONS.forget(repo);
    MERGE_BASES.forget(repo);
    ANCESTRY.forget(repo);
    MERGE_TREES.forget(repo);
    REV_LISTS.forget(repo);
    COMMITS.forget(repo);
    DIFFS.forget(repo);
    PATCHES.forget(repo);
}

/// `compute`'s answer, remembered in `memo` when `ids` are all object ids
/// (see [`crate::git_memo`]); a failure is never remembered.
async fn remembered<V: Clone, E>(
    memo: &Memo<V>,
    repo: &Path,
    ids: &[&str],
    compute: impl Future<Output = Result<V, E>>,
) -> Result<V, E> {
    let key = Memo::<V>::key(repo, ids);
    if let Some(answer) = key.as_deref().and_then(|key| memo.get(key)) {
        return Ok(answer);
    }
    let answer = compute.await?;
    if let Some(key) = key {
        memo.put(key, answer.clone());
    }
    Ok(answer)
}

/// Identity fakehub commits with (`web-flow` on GitHub).
pub const COMMITTER: (&str, &str) = ("GitHub", "noreply@github.com");

fn git(repo: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(repo);
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0");
    cmd.kill_on_drop(true);
    cmd
}

async fn run(mut cmd: Command) -> anyhow::Result<String> {
    let out = cmd.output().await.context("spawning git")?;
    if !out.status.success() {
        bail!(
            "git failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Path of the bare repository for `owner/name` under `root`.
pub fn repo_path(root: &Path, owner: &str, name: &str) -> PathBuf {
    root.join(owner.to_ascii_lowercase())
        .join(format!("{}.git", name.to_ascii_lowercase()))
}

/// Create a bare repository whose default branch holds `files` in one
/// commit (no commit at all when `files` is empty).
pub async fn init_repo(
    path: &Path,
    default_branch: &str,
    files: &BTreeMap<String, String>,
    author: (&str, &str),
) -> anyhow::Result<Option<String>> {
    tokio::fs::create_dir_all(path).await?;
    let mut cmd = Command::new("git");
    cmd.args([
        "init",
        "--bare",
        "--quiet",
        "--initial-branch",
        default_branch,
    ])
    .arg(path);
    run(cmd).await?;
    let mut cfg = git(path);
    cfg.args(["config", "http.receivepack", "true"]);
    run(cfg).await?;
    if files.is_empty() {
        return Ok(None);
    }
    let mut entries = Vec::new();
    for (name, content) in files {
        entries.push((name.clone(), hash_blob(path, content.as_bytes()).await?));
    }
    let tree = write_tree(path, &entries).await?;
    let sha = commit_tree(path, &tree, &[], "Initial commit", author, author).await?;
    update_ref(path, &format!("refs/heads/{default_branch}"), &sha, None).await?;
    Ok(Some(sha))
}

async fn hash_blob(repo: &Path, content: &[u8]) -> anyhow::Result<String> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = git(repo);
    cmd.args(["hash-object", "-w", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(content).await?;
    }
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!("git hash-object failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Build a (possibly nested) tree from `path → blob sha` entries.
async fn write_tree(repo: &Path, entries: &[(String, String)]) -> anyhow::Result<String> {
    let mut files = Vec::new();
    let mut dirs: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (path, sha) in entries {
        match path.split_once('/') {
            Some((dir, rest)) => dirs
                .entry(dir.to_string())
                .or_default()
                .push((rest.to_string(), sha.clone())),
            None => files.push(format!("100644 blob {sha}\t{path}")),
        }
    }
    for (dir, children) in dirs {
        let sub = Box::pin(write_tree(repo, &children)).await?;
        files.push(format!("040000 tree {sub}\t{dir}"));
    }
    let mut cmd = git(repo);
    cmd.arg("mktree")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        stdin
            .write_all(format!("{}\n", files.join("\n")).as_bytes())
            .await?;
    }
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!(
            "git mktree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub async fn commit_tree(
    repo: &Path,
    tree: &str,
    parents: &[&str],
    message: &str,
    author: (&str, &str),
    committer: (&str, &str),
) -> anyhow::Result<String> {
    let mut cmd = git(repo);
    cmd.args(["commit-tree", tree, "-m", message]);
    for p in parents {
        cmd.args(["-p", p]);
    }
    cmd.env("GIT_AUTHOR_NAME", author.0)
        .env("GIT_AUTHOR_EMAIL", author.1);
    cmd.env("GIT_COMMITTER_NAME", committer.0)
        .env("GIT_COMMITTER_EMAIL", committer.1);
    Ok(run(cmd).await?.trim().to_string())
}

/// Move a ref, refusing when it no longer holds `old` (compare-and-swap).
pub async fn update_ref(
    repo: &Path,
    name: &str,
    new: &str,
    old: Option<&str>,
) -> anyhow::Result<()> {
    let mut cmd = git(repo);
    cmd.args(["update-ref", name, new]);
    if let Some(old) = old {
        cmd.arg(old);
    }
    run(cmd).await.map(|_| ())
}

pub async fn rev_parse(repo: &Path, rev: &str) -> Option<String> {
    let mut cmd = git(repo);
    cmd.args([
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{rev}^{{commit}}"),
    ]);
    remembered(&REVISIONS, repo, &[rev], object_id(cmd))
        .await
        .ok()
}

/// The one object id `cmd` prints; `Err` when it fails or prints none.
async fn object_id(cmd: Command) -> Result<String, ()> {
    run(cmd)
        .await
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or(())
}

/// Every branch and tag: `refs/... → sha`.
pub async fn refs(repo: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let mut cmd = git(repo);
    cmd.args(["for-each-ref", "--format=%(refname) %(objectname)"]);
    Ok(run(cmd)
        .await?
        .lines()
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(r, s)| (r.to_string(), s.to_string()))
        })
        .collect())
}

pub async fn merge_base(repo: &Path, a: &str, b: &str) -> Option<String> {
    let mut cmd = git(repo);
    cmd.args(["merge-base", a, b]);
    remembered(&MERGE_BASES, repo, &[a, b], object_id(cmd))
        .await
        .ok()
}

pub async fn is_ancestor(repo: &Path, ancestor: &str, descendant: &str) -> bool {
    let mut cmd = git(repo);
    cmd.args(["merge-base", "--is-ancestor", ancestor, descendant]);
    // Exit 0 and 1 are the answer; anything else is a failure, not "no".
    let answer = async {
        match cmd.status().await.map(|s| s.code()) {
            Ok(Some(0)) => Ok(true),
            Ok(Some(1)) => Ok(false),
            _ => Err(()),
        }
    };
    remembered(&ANCESTRY, repo, &[ancestor, descendant], answer)
        .await
        .unwrap_or(false)
}

/// Three-way merge of `theirs` into `ours` in memory: `Ok(tree)` or
/// `Err(())` on conflict. `base` overrides the merge base (for rebasing).
pub async fn merge_tree(
    repo: &Path,
    ours: &str,
    theirs: &str,
    base: Option<&str>,
) -> anyhow::Result<Result<String, ()>> {
    let mut cmd = git(repo);
    cmd.args(["merge-tree", "--write-tree", "--no-messages"]);
    if let Some(base) = base {
        cmd.arg(format!("--merge-base={base}"));
    }
    cmd.args([ours, theirs]);
    let merged = async {
        let out = cmd.output().await?;
        let text = String::from_utf8_lossy(&out.stdout);
        let tree = text.lines().next().unwrap_or_default().trim().to_string();
        match out.status.code() {
            Some(0) => Ok(Ok(tree)),
            Some(1) => Ok(Err(())),
            _ => bail!(
                "git merge-tree failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }
    };
    let mut ids = vec![ours, theirs];
    ids.extend(base);
    remembered(&MERGE_TREES, repo, &ids, merged).await
}

/// Commits reachable from `head` but not from `base`, oldest first.
pub async fn rev_list(repo: &Path, base: &str, head: &str) -> anyhow::Result<Vec<String>> {
    let mut cmd = git(repo);
    cmd.args(["rev-list", "--reverse", &format!("{base}..{head}")]);
    let listed = async { Ok(run(cmd).await?.lines().map(str::to_string).collect()) };
    remembered(&REV_LISTS, repo, &[base, head], listed).await
}

/// A commit as `git cat-file` describes it.
#[derive(Debug, Clone, Default)]
pub struct CommitInfo {
    pub sha: String,
    pub tree: String,
    pub parents: Vec<String>,
    pub author: (String, String, i64),
    pub committer: (String, String, i64),
    pub message: String,
}

pub async fn commit_info(repo: &Path, sha: &str) -> anyhow::Result<CommitInfo> {
    let mut cmd = git(repo);
    cmd.args(["cat-file", "commit", sha]);
    let read = async { Ok(parse_commit(sha, &run(cmd).await?)) };
    remembered(&COMMITS, repo, &[sha], read).await
}

fn parse_ident(text: &str) -> (String, String, i64) {
    let (name, rest) = text.split_once(" <").unwrap_or((text, ""));
    let (email, rest) = rest.split_once("> ").unwrap_or((rest, ""));
    let when = rest
        .split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    (name.to_string(), email.to_string(), when)
}

/// [`commit_info`] for callers that hold the world lock and cannot await;
/// `None` when git cannot read the commit.
pub fn commit_info_blocking(repo: &Path, sha: &str) -> Option<CommitInfo> {
    let key = Memo::<CommitInfo>::key(repo, &[sha]);
    if let Some(info) = key.as_deref().and_then(|key| COMMITS.get(key)) {
        return Some(info);
    }
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(["cat-file", "commit", sha])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .ok()?;
    let info = out
        .status
        .success()
        .then(|| parse_commit(sha, &String::from_utf8_lossy(&out.stdout)))?;
    if let Some(key) = key {
        COMMITS.put(key, info.clone());
    }
    Some(info)
}

fn parse_commit(sha: &str, text: &str) -> CommitInfo {
    let (head, message) = text.split_once("\n\n").unwrap_or((text, ""));
    let mut info = CommitInfo {
        sha: sha.to_string(),
        message: message.trim_end().to_string(),
        ..Default::default()
    };
    for line in head.lines() {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "tree" => info.tree = rest.to_string(),
            "parent" => info.parents.push(rest.to_string()),
            "author" => info.author = parse_ident(rest),
            "committer" => info.committer = parse_ident(rest),
            _ => {}
        }
    }
    info
}

/// One changed file between two commits.
#[derive(Debug, Clone)]
pub struct FileChange {
    pub path: String,
    pub status: String,
    pub additions: usize,
    pub deletions: usize,
    pub blob: Option<String>,
}

pub async fn diff(repo: &Path, base: &str, head: &str) -> anyhow::Result<Vec<FileChange>> {
    remembered(&DIFFS, repo, &[base, head], file_changes(repo, base, head)).await
}

async fn file_changes(repo: &Path, base: &str, head: &str) -> anyhow::Result<Vec<FileChange>> {
    let mut cmd = git(repo);
    cmd.args(["diff", "--numstat", "--no-renames", base, head]);
    let numstat = run(cmd).await?;
    let mut cmd = git(repo);
    cmd.args(["diff", "--raw", "--no-renames", "--no-abbrev", base, head]);
    let raw = run(cmd).await?;
    let mut changes = Vec::new();
    for (line, raw_line) in numstat.lines().zip(raw.lines()) {
        let mut parts = line.splitn(3, '\t');
        let adds = parts.next().and_then(|a| a.parse().ok()).unwrap_or(0);
        let dels = parts.next().and_then(|d| d.parse().ok()).unwrap_or(0);
        let path = parts.next().unwrap_or_default().to_string();
        let meta = raw_line.split('\t').next().unwrap_or_default();
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let status = match fields.get(4).copied() {
            Some("A") => "added",
            Some("D") => "removed",
            _ => "modified",
        };
        let blob = fields
            .get(3)
            .filter(|s| !s.chars().all(|c| c == '0'))
            .map(|s| s.to_string());
        changes.push(FileChange {
            path,
            status: status.to_string(),
            additions: adds,
            deletions: dels,
            blob,
        });
    }
    Ok(changes)
}

/// GitHub's `patch` of each text file changed between two commits, by
/// path: the unified diff from its first `@@` hunk header on, without a
/// trailing newline. A binary file, or a change without hunks (an empty
/// file, a mode change), has none. One `git diff` for the whole range.
pub async fn patches(
    repo: &Path,
    base: &str,
    head: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    remembered(
        &PATCHES,
        repo,
        &[base, head],
        file_patches(repo, base, head),
    )
    .await
}

async fn file_patches(
    repo: &Path,
    base: &str,
    head: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut cmd = git(repo);
    cmd.args([
        "diff",
        "--no-renames",
        "--no-color",
        "--no-ext-diff",
        "-U3",
        base,
        head,
    ]);
    let text = run(cmd).await?;
    let mut patches = BTreeMap::new();
    let sections = text.split("\ndiff --git ");
    for section in sections {
        let section = section.strip_prefix("diff --git ").unwrap_or(section);
        let header = section.lines().next().unwrap_or_default();
        // Without renames both sides name one path: `a/P b/P`.
        let path_len = header.len().saturating_sub(5) / 2;
        let Some(path) = header.get(2..2 + path_len) else {
            continue;
        };
        let Some(at) = section.find("\n@@ ") else {
            continue;
        };
        let patch = section[at + 1..].trim_end_matches('\n');
        patches.insert(path.to_string(), patch.to_string());
    }
    Ok(patches)
}

/// File bytes and blob sha at a revision, or `None` when absent.
pub async fn read_file(
    repo: &Path,
    rev: &str,
    path: &str,
) -> anyhow::Result<Option<(Vec<u8>, String)>> {
    let spec = format!("{rev}:{path}");
    let mut cmd = git(repo);
    cmd.args(["rev-parse", "--verify", "--quiet", &spec]);
    let Ok(sha) = run(cmd).await else {
        return Ok(None);
    };
    let sha = sha.trim().to_string();
    let mut cmd = git(repo);
    cmd.args(["cat-file", "-t", &sha]);
    if run(cmd).await?.trim() != "blob" {
        return Ok(None);
    }
    let mut cmd = git(repo);
    cmd.args(["cat-file", "blob", &sha]);
    let out = cmd.output().await?;
    Ok(Some((out.stdout, sha)))
}

/// Commit a change of one file (`Some(bytes)` writes, `None` deletes) on
/// top of `parent`, without a worktree. Returns the new commit sha.
pub async fn commit_file(
    repo: &Path,
    parent: &str,
    file: &str,
    content: Option<&[u8]>,
    message: &str,
    author: (&str, &str),
) -> anyhow::Result<String> {
    let index = tempfile::NamedTempFile::new()?;
    let index_path = index.path().to_path_buf();
    // git refuses an existing empty file as an index; let it create one.
    drop(index);
    // Index operations such as --force-remove insist on a work tree; an
    // empty scratch directory satisfies them without touching any file.
    let scratch = tempfile::tempdir()?;
    let with_index = |args: &[&str]| {
        let mut cmd = git(repo);
        cmd.env("GIT_INDEX_FILE", &index_path)
            .env("GIT_WORK_TREE", scratch.path())
            .args(args);
        cmd
    };
    run(with_index(&["read-tree", parent])).await?;
    match content {
        Some(bytes) => {
            let blob = hash_blob(repo, bytes).await?;
            run(with_index(&[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("100644,{blob},{file}"),
            ]))
            .await?;
        }
        None => {
            run(with_index(&["update-index", "--force-remove", file])).await?;
        }
    }
    let tree = run(with_index(&["write-tree"])).await?.trim().to_string();
    let _ = tokio::fs::remove_file(&index_path).await;
    commit_tree(repo, &tree, &[parent], message, author, author).await
}

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub struct TreeEntry {
    pub name: String,
    pub kind: String,
    pub sha: String,
    pub size: usize,
}

/// The entries of directory `dir` at `rev`, or `None` when it is not a directory.
pub async fn list_dir(repo: &Path, rev: &str, dir: &str) -> anyhow::Result<Option<Vec<TreeEntry>>> {
    let spec = format!("{rev}:{}", dir.trim_end_matches('/'));
    let mut cmd = git(repo);
    cmd.args(["cat-file", "-t", &spec]);
    match run(cmd).await {
        Ok(t) if t.trim() == "tree" => {}
        _ => return Ok(None),
    }
    let mut cmd = git(repo);
    cmd.args(["ls-tree", "-l", &spec]);
    let mut entries = Vec::new();
    for line in run(cmd).await?.lines() {
        let Some((meta, name)) = line.split_once('\t') else {
            continue;
        };
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let kind = match fields.get(1).copied() {
            Some("tree") => "dir",
            Some("commit") => "submodule",
            _ if fields.first() == Some(&"120000") => "symlink",
            _ => "file",
        };
        entries.push(TreeEntry {
            name: name.to_string(),
            kind: kind.to_string(),
            sha: fields.get(2).unwrap_or(&"").to_string(),
            size: fields.get(3).and_then(|s| s.parse().ok()).unwrap_or(0),
        });
    }
    Ok(Some(entries))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn merge_tree_reports_a_conflict_and_a_clean_merge() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r.git");
        let files = BTreeMap::from([
            ("a.txt".to_string(), "one\n".to_string()),
            ("src/b.txt".to_string(), "b\n".to_string()),
        ]);
        let base = init_repo(&repo, "main", &files, ("T", "t@example.com"))
            .await
            .unwrap()
            .unwrap();
        let info = commit_info(&repo, &base).await.unwrap();
        let blob = |c: &'static str| {
            let repo = repo.clone();
            async move { hash_blob(&repo, c.as_bytes()).await.unwrap() }
        };
        let sub = write_tree(&repo, &[("b.txt".into(), blob("b\n").await)])
            .await
            .unwrap();
        let left_tree = write_tree(
            &repo,
            &[
                ("a.txt".into(), blob("left\n").await),
                ("c.txt".into(), sub.clone()),
            ],
        )
        .await;
        assert!(
            left_tree.is_err(),
            "a tree sha given as a blob is refused by mktree"
        );
        let left_tree = write_tree(
            &repo,
            &[
                ("a.txt".into(), blob("left\n").await),
                ("src/b.txt".into(), blob("b\n").await),
            ],
        )
        .await
        .unwrap();
        let right_tree = write_tree(
            &repo,
            &[
                ("a.txt".into(), blob("right\n").await),
                ("src/b.txt".into(), blob("b\n").await),
            ],
        )
        .await
        .unwrap();
        let side_tree = write_tree(
            &repo,
            &[
                ("a.txt".into(), blob("one\n").await),
                ("src/b.txt".into(), blob("b2\n").await),
            ],
        )
        .await
        .unwrap();
        let author = ("T", "t@example.com");
        let left = commit_tree(&repo, &left_tree, &[&base], "left", author, author)
            .await
            .unwrap();
        let right = commit_tree(&repo, &right_tree, &[&base], "right", author, author)
            .await
            .unwrap();
        let side = commit_tree(&repo, &side_tree, &[&base], "side", author, author)
            .await
            .unwrap();
        assert!(
            merge_tree(&repo, &left, &right, None)
                .await
                .unwrap()
                .is_err()
        );
        assert!(merge_tree(&repo, &left, &side, None).await.unwrap().is_ok());
        assert_eq!(info.parents.len(), 0);
        let changes = diff(&repo, &base, &side).await.unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].path, "src/b.txt");
        assert_eq!((changes[0].additions, changes[0].deletions), (1, 1));
        let (bytes, _) = read_file(&repo, &side, "src/b.txt").await.unwrap().unwrap();
        assert_eq!(bytes, b"b2\n");
        assert!(read_file(&repo, &side, "missing").await.unwrap().is_none());
    }
}
