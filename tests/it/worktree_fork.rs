//! Forks into a copy of the working tree (`POST …/fork {"worktree": true}`), end to end: a
//! plain directory is copied as its snapshot holds it, a git repository gets a linked worktree
//! with the same uncommitted changes (the source's index and stash untouched), both branches
//! then change files apart; refused while a turn runs in the directory; a crash in the middle
//! of a copy leaves nothing at the next start.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::checkpoints::{
    config, create, git, seed, shell, start, start_blocked_turn, tree, turn, wait_stopped, write,
};
use crate::fake_provider::{FakeProvider, Wire};
use crate::harness::{Server, ServerOptions};

async fn fork_into_copy(server: &Server, id: &str) -> (u16, Value) {
    server
        .post(
            &format!("/api/conversations/{id}/fork"),
            json!({ "worktree": true }),
        )
        .await
}

/// The fork as the list and the conversation's own page show it: both carry the mark of how
/// its tree was copied, so clients can tell it apart from its source.
async fn assert_marked(server: &Server, fork: &Value, kind: &str) {
    assert_eq!(fork["forked_from"]["worktree"], kind, "{fork}");
    let id = fork["id"].as_str().unwrap();
    let (status, page) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["forked_from"]["worktree"], kind, "{page}");
    let (status, list) = server.get("/api/conversations").await;
    assert_eq!(status, 200, "{list}");
    let listed = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|listed| listed["id"] == id)
        .unwrap_or_else(|| panic!("the fork is listed: {list}"));
    assert_eq!(listed["forked_from"]["worktree"], kind, "{listed}");
    assert_eq!(listed["cwd"], fork["cwd"], "{listed}");
}

async fn conversation_count(server: &Server) -> usize {
    let (status, list) = server.get("/api/conversations").await;
    assert_eq!(status, 200, "{list}");
    list["conversations"].as_array().unwrap().len()
}

/// The copies under the data directory's `worktrees/`.
fn copies(data_dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(data_dir.join("worktrees")) {
        Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test]
async fn a_fork_in_a_copy_of_a_plain_directory_changes_its_files_apart() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = Server::start_with(ServerOptions {
        config: Some(config(&fake, "checkpoint_max_file_bytes = 1000\n")),
        ..ServerOptions::default()
    })
    .await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("project");
    seed(
        &dir,
        &[
            ("keep.txt", "kept\n"),
            ("old.txt", "to be deleted\n"),
            (".gitignore", "node_modules/\n"),
            ("node_modules/dep/index.js", "ignored\n"),
        ],
    );
    let (id, _) = create(&server, &fake, &dir, Vec::new()).await;
    turn(
        &server,
        &fake,
        &id,
        "work",
        vec![
            write("a.txt", "written\n"),
            shell(
                "mkdir -p sub && echo shell > sub/b.txt && rm old.txt && chmod +x keep.txt \
                 && head -c 2000 /dev/zero | tr '\\0' x > big.txt && ln -s keep.txt link",
            ),
        ],
    )
    .await;

    // A bad body is refused and stores nothing.
    let (status, body) = server
        .post(
            &format!("/api/conversations/{id}/fork"),
            json!({ "worktree": "yes" }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(conversation_count(&server).await, 1);

    let (status, body) = fork_into_copy(&server, &id).await;
    assert_eq!(status, 201, "{body}");
    let copy = &body["worktree"];
    assert_eq!(copy["kind"], "copy", "{body}");
    assert_marked(&server, &body["conversation"], "copy").await;
    assert!(copy.get("note").is_none(), "{body}");
    assert_eq!(copy["copied_as_is"][0]["path"], "big.txt", "{body}");
    let path = PathBuf::from(copy["path"].as_str().unwrap());
    assert_eq!(body["conversation"]["cwd"], copy["path"]);
    assert!(
        path.starts_with(server.data_dir.join("worktrees")),
        "{body}"
    );
    assert_eq!(path.file_name().unwrap(), "project");
    // The copy is the tree as it was, ignored files aside.
    let mut expected = tree(&dir);
    expected.remove("node_modules/dep/index.js");
    assert_eq!(tree(&path), expected);
    assert!(!path.join("node_modules").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path.join("keep.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the executable bit is copied");
    assert_eq!(
        std::fs::read_link(path.join("link")).unwrap(),
        Path::new("keep.txt")
    );

    // Both go on apart.
    let fork = body["conversation"]["id"].as_str().unwrap().to_owned();
    let (status, view) = server.get(&format!("/api/conversations/{fork}")).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["cwd"], copy["path"], "{view}");
    let ended = turn(
        &server,
        &fake,
        &fork,
        "in the fork",
        vec![write("a.txt", "fork\n")],
    )
    .await;
    assert_eq!(ended["files_changed"], 1, "{ended}");
    turn(
        &server,
        &fake,
        &id,
        "in the source",
        vec![shell("echo source > c.txt")],
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "written\n"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("a.txt")).unwrap(),
        "fork\n"
    );
    assert!(!path.join("c.txt").exists());

    // Deleting the fork leaves its directory: the files are the user's.
    let (status, _) = server.delete(&format!("/api/conversations/{fork}")).await;
    assert_eq!(status, 204);
    assert!(path.join("a.txt").exists());
}

#[tokio::test]
async fn a_fork_of_a_git_repository_is_a_linked_worktree_with_the_same_changes() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    seed(
        &dir,
        &[
            ("src/main.txt", "v1\n"),
            ("src/gone.txt", "committed\n"),
            (".gitignore", "target/\n"),
        ],
    );
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-qm", "first"]);
    seed(&dir, &[("src/main.txt", "stashed\n")]);
    git(&dir, &["stash", "-q"]);
    seed(&dir, &[("target/out.bin", "build output\n")]);
    // A hook that would leave a mark if the copy ran it.
    seed(
        &dir,
        &[(".git/hooks/post-checkout", "#!/bin/sh\ntouch hook-ran\n")],
    );
    std::process::Command::new("chmod")
        .args(["+x", ".git/hooks/post-checkout"])
        .current_dir(&dir)
        .status()
        .unwrap();
    let (id, _) = create(&server, &fake, &dir.join("src"), Vec::new()).await;
    turn(
        &server,
        &fake,
        &id,
        "work",
        vec![shell(
            "echo v2 > main.txt && rm gone.txt && echo new > untracked.txt",
        )],
    )
    .await;
    let status_before = git(&dir, &["status", "--porcelain"]);
    let stash_before = git(&dir, &["stash", "list"]);
    let index_before = std::fs::read(dir.join(".git/index")).unwrap();

    let (status, body) = fork_into_copy(&server, &id).await;
    assert_eq!(status, 201, "{body}");
    let copy = &body["worktree"];
    assert_eq!(copy["kind"], "git", "{body}");
    assert_marked(&server, &body["conversation"], "git").await;
    let cwd = PathBuf::from(copy["path"].as_str().unwrap());
    // The conversation ran in `src/`: the fork runs in the same place of the new worktree.
    assert_eq!(cwd.file_name().unwrap(), "src");
    let top = cwd.parent().unwrap();
    assert_eq!(top.file_name().unwrap(), "repo");
    assert!(top.join(".git").is_file(), "a linked worktree");
    assert!(!top.join("hook-ran").exists() && !dir.join("hook-ran").exists());
    assert!(
        git(&dir, &["worktree", "list", "--porcelain"]).contains(top.to_str().unwrap()),
        "the source repository knows the worktree"
    );
    // The same changes, seen from git in both; the source's own state untouched.
    assert_eq!(git(top, &["status", "--porcelain"]), status_before);
    assert_eq!(git(&dir, &["status", "--porcelain"]), status_before);
    assert_eq!(git(&dir, &["stash", "list"]), stash_before);
    assert_eq!(std::fs::read(dir.join(".git/index")).unwrap(), index_before);
    assert_eq!(
        std::fs::read_to_string(cwd.join("main.txt")).unwrap(),
        "v2\n"
    );
    assert!(!cwd.join("gone.txt").exists());
    assert_eq!(
        std::fs::read_to_string(cwd.join("untracked.txt")).unwrap(),
        "new\n"
    );
    assert!(!top.join("target").exists(), "ignored files are not copied");

    let fork = body["conversation"]["id"].as_str().unwrap().to_owned();
    turn(
        &server,
        &fake,
        &fork,
        "in the fork",
        vec![shell("echo fork > main.txt")],
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(dir.join("src/main.txt")).unwrap(),
        "v2\n"
    );
    assert_eq!(git(&dir, &["status", "--porcelain"]), status_before);
}

#[tokio::test]
async fn a_fork_into_a_copy_is_refused_while_a_turn_runs_in_the_directory() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let server = start(&fake, None, Vec::new()).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let (id, _) = create(&server, &fake, dir, vec![write("a.txt", "1\n")]).await;
    start_blocked_turn(&server, &fake, &id, dir).await;
    let (status, body) = fork_into_copy(&server, &id).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "turn_running", "{body}");
    assert_eq!(conversation_count(&server).await, 1);
    assert!(copies(&server.data_dir).is_empty());
    // A fork without a copy still works meanwhile (it stops before the running turn).
    let (status, body) = server
        .post(&format!("/api/conversations/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, 201, "{body}");
    assert!(body.get("worktree").is_none(), "{body}");
    let (status, _) = server
        .post(&format!("/api/conversations/{id}/interrupt"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, body) = fork_into_copy(&server, &id).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn a_crash_in_the_middle_of_a_copy_leaves_nothing_at_the_next_start() {
    let fake = FakeProvider::start(Wire::OpenaiChat).await;
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().join("data");
    // Stops just before it writes the second file of the copy (sorted: a, b, c).
    let stop = vec![("OPENVAALA_TEST_STOP_AT".to_owned(), "copy:b.txt".to_owned())];
    let server = start(&fake, Some(&data_dir), stop).await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("repo");
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    seed(
        &dir,
        &[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")],
    );
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-qm", "first"]);
    let (id, _) = create(&server, &fake, &dir, vec![shell("echo changed > b.txt")]).await;
    let request = server
        .client
        .post(server.url(&format!("/api/conversations/{id}/fork")))
        .json(&json!({ "worktree": true }));
    let pending = tokio::spawn(async move { request.send().await.map(|r| r.status().as_u16()) });
    wait_stopped(server.child.id().unwrap() as i32).await;
    // Half made: the worktree exists and the source repository names it.
    assert_eq!(copies(&data_dir).len(), 1);
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 2);
    let data_dir = server.kill9().await;
    assert!(
        pending.await.unwrap().is_err(),
        "the request died with the server"
    );

    let server = start(&fake, Some(&data_dir), Vec::new()).await;
    assert!(copies(&data_dir).is_empty(), "the half-made copy is gone");
    assert_eq!(
        git(&dir, &["worktree", "list"]).lines().count(),
        1,
        "and the repository no longer names it"
    );
    assert_eq!(conversation_count(&server).await, 1, "no fork was stored");
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).unwrap(),
        "changed\n"
    );
    // The next try works.
    let (status, body) = fork_into_copy(&server, &id).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(copies(&data_dir).len(), 1);
    let path = body["worktree"]["path"].as_str().unwrap();
    assert!(path.ends_with("/repo"), "{path}");
    let copy = PathBuf::from(path);
    assert!(copy.join(".git").is_file(), "git's own file is left alone");
    assert_eq!(
        git(&copy, &["status", "--porcelain"]),
        git(&dir, &["status", "--porcelain"])
    );
}
