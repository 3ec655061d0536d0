//! The conversation lifecycle over HTTP: create on the first message, list, get, items,
//! rename, archive, delete; titles; idempotency; search.

use serde_json::{Value, json};

use crate::harness::{Server, snapshot_dir};

#[tokio::test]
async fn lifecycle_from_first_message_to_delete() {
    let server = Server::start().await;
    let created = server
        .create_and_wait("Plan the release\nwith details below")
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created["conversation"]["title"], "Plan the release");
    assert_eq!(created["conversation"]["title_custom"], false);
    assert_eq!(created["conversation"]["status"], "running");
    assert_eq!(created["message"]["status"], "started");
    assert!(created["turn_id"].is_string());
    assert!(
        server
            .conversation_dir(&id)
            .join("metadata.jsonl")
            .is_file()
    );

    // list
    let (status, list) = server.get("/api/conversations").await;
    assert_eq!(status, 200);
    assert_eq!(list["conversations"][0]["id"], id.as_str());
    assert_eq!(list["conversations"][0]["status"], "idle");
    assert_eq!(list["next_cursor"], serde_json::Value::Null);

    // get
    let (status, got) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["id"], id.as_str());
    assert_eq!(got["model"], "demo");
    assert_eq!(got["agent"], "default");
    assert_eq!(got["sessions"][0]["id"], got["root_session_id"]);
    assert_eq!(got["pending"], json!([]));
    assert!(got["usage"]["used_tokens"].as_u64().unwrap() > 0);

    // items: the user's message, then the agent's answer, both completed
    let (status, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    assert_eq!(status, 200);
    let items = items["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0]["kind"], "user_message");
    assert_eq!(items[0]["text"], "Plan the release\nwith details below");
    assert_eq!(items[0]["id"], created["message"]["id"]);
    assert_eq!(items[1]["kind"], "agent_message");
    assert_eq!(items[1]["status"], "completed");
    assert!(
        items[1]["text"]
            .as_str()
            .unwrap()
            .contains("Plan the release")
    );
    assert_eq!(items[0]["seq"], 1);
    assert_eq!(items[1]["seq"], 2);

    // rename: not a change that moves the conversation up the list
    let before = server.get(&format!("/api/conversations/{id}")).await.1;
    let (status, renamed) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "title": "  Release plan  " }),
        )
        .await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["title"], "Release plan");
    assert_eq!(renamed["title_custom"], true);
    assert_eq!(renamed["updated_at"], before["updated_at"]);
    // A title is one line: line breaks and other control characters become spaces.
    let (status, one_line) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "title": "Release\nplan\u{0}v2\r\n" }),
        )
        .await;
    assert_eq!(status, 200, "{one_line}");
    assert_eq!(one_line["title"], "Release plan v2");
    let (status, renamed) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "title": "Release plan" }),
        )
        .await;
    assert_eq!(status, 200, "{renamed}");

    // archive: gone from the default list, present with archived=true and all
    let (status, archived) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "archived": true }),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(archived["archived"], true);
    let ids = |list: serde_json::Value| -> Vec<String> {
        list["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(ids(server.get("/api/conversations").await.1).is_empty());
    assert_eq!(
        ids(server.get("/api/conversations?archived=true").await.1),
        vec![id.clone()]
    );
    assert_eq!(
        ids(server.get("/api/conversations?archived=all").await.1),
        vec![id.clone()]
    );

    // unarchive
    let (_, unarchived) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "archived": false }),
        )
        .await;
    assert_eq!(unarchived["archived"], false);
    assert_eq!(
        ids(server.get("/api/conversations").await.1),
        vec![id.clone()]
    );
    // Archiving changes nothing in the conversation: after a round trip it is
    // where it was in the list, below a newer one.
    assert_eq!(unarchived["updated_at"], renamed["updated_at"]);
    let newer = server.create_and_wait("A newer one").await;
    let newer = newer["conversation"]["id"].as_str().unwrap().to_owned();
    for archived in [true, false] {
        let (status, _) = server
            .patch(
                &format!("/api/conversations/{id}"),
                json!({ "archived": archived }),
            )
            .await;
        assert_eq!(status, 200);
    }
    assert_eq!(
        ids(server.get("/api/conversations").await.1),
        vec![newer.clone(), id.clone()]
    );
    let (status, _) = server.delete(&format!("/api/conversations/{newer}")).await;
    assert_eq!(status, 204);

    // delete: the directory is gone, then 404 everywhere
    let (status, _) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 204);
    assert!(!server.conversation_dir(&id).exists());
    let (status, body) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found");
    assert!(ids(server.get("/api/conversations?archived=all").await.1).is_empty());
    let (status, _) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn an_empty_first_message_stores_nothing() {
    let server = Server::start().await;
    let before = snapshot_dir(&server.data_dir.join("conversations"));
    for body in [
        json!({ "text": "" }),
        json!({ "text": "  \n\t " }),
        json!({}),
    ] {
        let (status, error) = server.post("/api/conversations", body).await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["error"]["code"], "invalid_request");
    }
    assert_eq!(snapshot_dir(&server.data_dir.join("conversations")), before);
    assert!(before.is_empty());
    let (_, list) = server.get("/api/conversations?archived=all").await;
    assert_eq!(list["conversations"], json!([]));
}

#[tokio::test]
async fn concurrent_creates_with_one_idempotency_key_create_once_and_answer_the_same() {
    let server = Server::start().await;
    let body = json!({ "text": "sent twice at once" });
    let requests = (0..8).map(|_| server.post_with_key("/api/conversations", body.clone(), "same"));
    let answers = futures::future::join_all(requests).await;
    for (status, answer) in &answers {
        assert_eq!(*status, 201, "{answer}");
        assert_eq!(answer, &answers[0].1, "every retry gets the first answer");
    }
    let (_, list) = server.get("/api/conversations?archived=all").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn the_same_idempotency_key_creates_once_and_answers_the_same() {
    let server = Server::start().await;
    let body = json!({ "text": "only once" });
    let (first_status, first) = server
        .post_with_key("/api/conversations", body.clone(), "key-1")
        .await;
    let (second_status, second) = server
        .post_with_key("/api/conversations", body.clone(), "key-1")
        .await;
    assert_eq!(first_status, 201);
    assert_eq!(second_status, 201);
    assert_eq!(first, second);
    let id = first["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;

    // The same for a message to the conversation.
    let path = format!("/api/conversations/{id}/messages");
    let (status, message) = server
        .post_with_key(&path, json!({ "text": "again" }), "key-2")
        .await;
    assert_eq!(status, 202, "{message}");
    let (status, repeat) = server
        .post_with_key(&path, json!({ "text": "again" }), "key-2")
        .await;
    assert_eq!(status, 202);
    assert_eq!(message, repeat);
    server.wait_idle(&id).await;

    let (_, list) = server.get("/api/conversations?archived=all").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1);
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    let user_messages = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == "user_message")
        .count();
    assert_eq!(user_messages, 2);

    // And after a restart.
    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    let (status, third) = server
        .post_with_key("/api/conversations", body, "key-1")
        .await;
    assert_eq!(status, 201);
    assert_eq!(third, first);
    let (status, repeat) = server
        .post_with_key(&path, json!({ "text": "again" }), "key-2")
        .await;
    assert_eq!(status, 202);
    assert_eq!(repeat, message);
    let (_, list) = server.get("/api/conversations?archived=all").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn titles_are_the_first_line_cut_at_forty_characters() {
    let server = Server::start().await;
    let cases = [
        ("short title", "short title"),
        ("first line\nsecond line", "first line"),
        (&*format!("{}tail", "x".repeat(40)), &*"x".repeat(40)),
        (&*"中文标题".repeat(12), &*"中文标题".repeat(10)),
        (&*"🦀".repeat(41), &*"🦀".repeat(40)),
        // A family emoji is five chars in one grapheme: it does not fit after 38 chars.
        (&*format!("{}👨‍👩‍👧b", "a".repeat(38)), &*"a".repeat(38)),
    ];
    for (text, expected) in cases {
        let created = server.create_and_wait(text).await;
        let title = created["conversation"]["title"].as_str().unwrap();
        assert_eq!(title, expected, "for {text:?}");
        assert!(title.chars().count() <= 40);
        assert!(text.starts_with(title));
    }

    // A rename wins over the auto-title, also after more messages.
    let created = server.create_and_wait("auto title").await;
    let id = created["conversation"]["id"].as_str().unwrap();
    server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "title": "mine" }),
        )
        .await;
    server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "another line" }),
        )
        .await;
    server.wait_idle(id).await;
    let (_, got) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(got["title"], "mine");
    assert_eq!(got["title_custom"], true);
}

#[tokio::test]
async fn search_finds_titles_and_message_text_and_pages_with_a_cursor() {
    let server = Server::start().await;
    server.create_and_wait("alpha project kickoff").await;
    let beta = server
        .create_and_wait("beta notes\nmentions the zebra migration")
        .await;
    server.create_and_wait("中文 对话 测试内容").await;

    let titles = |list: &serde_json::Value| -> Vec<String> {
        list["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["title"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, found) = server.get("/api/conversations?q=zebra").await;
    assert_eq!(titles(&found), vec!["beta notes"]);
    // Found by its message, not its title: the text around the match, on one line, without
    // the title it starts with.
    let beta_id = beta["conversation"]["id"].as_str().unwrap();
    assert_eq!(
        found["snippets"],
        serde_json::json!({ beta_id: "mentions the zebra migration" }),
        "{found}"
    );
    server.wait_index_settled().await;
    let (_, found) = server.get("/api/conversations?q=ALPHA").await;
    assert_eq!(titles(&found), vec!["alpha project kickoff"]);
    // The first message is the title: the snippet comes from the next that matches (the
    // demo model's reply quotes it), never the title again.
    let snippet = found["snippets"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert!(snippet.as_str().unwrap().contains("you said"), "{found}");
    let (_, unsearched) = server.get("/api/conversations").await;
    assert!(unsearched.get("snippets").is_none(), "{unsearched}");
    let (_, found) = server.get("/api/conversations?q=%E6%B5%8B%E8%AF%95").await; // 测试
    assert_eq!(titles(&found), vec!["中文 对话 测试内容"]);
    let (_, found) = server.get("/api/conversations?q=nothing-like-this").await;
    assert!(titles(&found).is_empty());
    // Agent replies are searchable too (the demo model quotes the first line), once the
    // index queue has written their rows.
    server.wait_index_settled().await;
    let (_, found) = server.get("/api/conversations?q=Demo%20model%20beta").await;
    assert_eq!(titles(&found), vec!["beta notes"]);

    // Paging: newest first, two pages of one and two.
    let (_, page1) = server.get("/api/conversations?limit=2").await;
    assert_eq!(titles(&page1), vec!["中文 对话 测试内容", "beta notes"]);
    let cursor = page1["next_cursor"].as_str().unwrap();
    let (_, page2) = server
        .get(&format!("/api/conversations?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(titles(&page2), vec!["alpha project kickoff"]);
    assert_eq!(page2["next_cursor"], serde_json::Value::Null);
    assert!(beta["conversation"]["id"].is_string());
    // A snippet reads as the text reads: no demo directive, no Markdown marks.
    let quokka = server
        .create_and_wait("Plan the **quokka** survey\n/echo quokka count is twelve")
        .await;
    server.wait_index_settled().await;
    let (_, found) = server.get("/api/conversations?q=quokka").await;
    let quokka_id = quokka["conversation"]["id"].as_str().unwrap();
    assert_eq!(titles(&found), vec!["Plan the quokka survey"]);
    let snippet = found["snippets"][quokka_id].as_str().unwrap_or_default();
    assert!(
        !snippet.contains("/echo") && !snippet.contains("**"),
        "{found}"
    );
    assert!(snippet.contains("quokka count is twelve"), "{found}");
}

#[tokio::test]
async fn the_configuration_views_list_the_builtin_model_and_agent() {
    let server = Server::start().await;
    let (status, health) = server.get("/api/health").await;
    assert_eq!(status, 200);
    assert_eq!(health["status"], "ok");
    let (_, agents) = server.get("/api/agents").await;
    assert_eq!(agents["default"], "default");
    assert_eq!(agents["agents"][0]["name"], "default");
    assert_eq!(agents["agents"][0]["model"], "demo");
    let (_, models) = server.get("/api/models").await;
    assert_eq!(models["models"][0]["id"], "demo");
    assert_eq!(models["models"][0]["protocol"], "demo");
    let (status, openapi) = server.get("/api/openapi.json").await;
    assert_eq!(status, 200);
    assert!(openapi["openapi"].as_str().unwrap().starts_with('3'));
}

#[tokio::test]
async fn delete_is_refused_while_a_turn_runs_and_archive_does_not_stop_it() {
    let server = Server::start().await;
    let (_, created) = server
        .post(
            "/api/conversations",
            json!({ "text": "busy for a while\n/sleep 30" }),
        )
        .await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let (status, error) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "turn_running");
    assert!(server.conversation_dir(&id).is_dir());

    // Archiving hides it but the turn goes on to the end.
    let (status, archived) = server
        .patch(
            &format!("/api/conversations/{id}"),
            json!({ "archived": true }),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(archived["status"], "running");
    server.wait_idle(&id).await;
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    assert_eq!(items["items"][1]["status"], "completed");
    let (status, _) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn idle_conversations_are_unloaded_and_load_again_on_demand() {
    let server = Server::start_with(crate::harness::ServerOptions {
        config: Some("[server]\nidle_unload_s = 1\n".to_owned()),
        ..Default::default()
    })
    .await;
    let created = server.create_and_wait("load me, unload me").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let (_, health) = server.get("/api/health").await;
    assert_eq!(health["live_conversations"], 1);

    // Poll the health counter until the idle conversation has left memory.
    let unloaded = tokio::time::timeout(crate::harness::TIMEOUT, async {
        loop {
            let (_, health) = server.get("/api/health").await;
            if health["live_conversations"] == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(unloaded.is_ok(), "the idle conversation was not unloaded");

    // Reading it does not load it (reads come from the files); sending does.
    let (status, conversation) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(conversation["title"], "load me, unload me");
    let (_, health) = server.get("/api/health").await;
    assert_eq!(health["live_conversations"], 0);
    server
        .post(
            &format!("/api/conversations/{id}/messages"),
            json!({ "text": "still works" }),
        )
        .await;
    server.wait_idle(&id).await;
    let (_, items) = server.get(&format!("/api/conversations/{id}/items")).await;
    assert_eq!(items["items"].as_array().unwrap().len(), 4);
}

/// Pages of `/items` of `limit` items, followed to the end.
async fn all_pages(server: &Server, id: &str, limit: usize) -> Vec<Value> {
    let mut items = Vec::new();
    let mut after = 0;
    loop {
        let (status, page) = server
            .get(&format!(
                "/api/conversations/{id}/items?limit={limit}&after_seq={after}"
            ))
            .await;
        assert_eq!(status, 200, "{page}");
        let got = page["items"].as_array().unwrap();
        assert!(got.len() <= limit, "{page}");
        items.extend(got.iter().cloned());
        match page["next_after_seq"].as_u64() {
            Some(next) => after = next,
            None => return items,
        }
    }
}

#[tokio::test]
async fn history_pages_are_the_same_whether_the_conversation_is_live_or_read_from_disk() {
    let server = Server::start().await;
    let created = server.create_and_wait("first").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    for text in ["second", "third", "fourth"] {
        let (status, _) = server
            .post(
                &format!("/api/conversations/{id}/messages"),
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, 202);
        server.wait_idle(&id).await;
    }
    // Live: the actor answers from memory.
    let (_, whole) = server.get(&format!("/api/conversations/{id}/items")).await;
    let whole = whole["items"].as_array().unwrap().clone();
    assert_eq!(whole.len(), 8, "four questions, four answers");
    assert_eq!(all_pages(&server, &id, 3).await, whole);
    assert_eq!(all_pages(&server, &id, 1).await, whole);

    // After a restart nothing is live: the pages come from the file, the same.
    let data_dir = server.stop().await;
    let server = Server::start_in(&data_dir).await;
    assert_eq!(all_pages(&server, &id, 3).await, whole);
    let (_, past_the_end) = server
        .get(&format!("/api/conversations/{id}/items?after_seq=100"))
        .await;
    assert_eq!(past_the_end, json!({ "items": [], "next_after_seq": null }));
}

/// With conversations unloading the moment they are idle, requests keep arriving while the
/// actor is leaving: each one must be answered (by it, or by the actor loaded after it), never
/// dropped with a 503.
#[tokio::test]
async fn requests_that_meet_an_unloading_conversation_are_answered() {
    let server = Server::start_with(crate::harness::ServerOptions {
        config: Some("[server]\nidle_unload_s = 0\n".to_owned()),
        ..Default::default()
    })
    .await;
    let created = server.create_and_wait("come and go").await;
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/conversations/{id}");
    for _ in 0..5 {
        // A PATCH that changes nothing still needs the live conversation (a GET no longer
        // loads it).
        let requests = (0..60).map(|n| {
            let server = &server;
            let path = &path;
            async move {
                if n % 2 == 0 {
                    server.patch(path, json!({ "archived": false })).await
                } else {
                    server.get(path).await
                }
            }
        });
        let answers = futures::future::join_all(requests).await;
        let failed: Vec<_> = answers
            .iter()
            .filter(|(status, _)| *status != 200)
            .collect();
        assert!(failed.is_empty(), "{failed:?}");
    }
}

#[tokio::test]
async fn a_conversation_exports_as_a_markdown_file() {
    let server = Server::start().await;
    let workdir = tempfile::tempdir().unwrap();
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({"text": "# Look around\n/shell echo exported-output", "cwd": workdir.path()}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["conversation"]["id"].as_str().unwrap().to_owned();
    server.wait_idle(&id).await;

    let response = server
        .client
        .get(server.url(&format!("/api/conversations/{id}/export")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "text/markdown; charset=utf-8");
    assert_eq!(
        header("content-disposition"),
        "attachment; filename=\"Look_around.md\""
    );
    let document = response.text().await.unwrap();
    assert!(document.starts_with("# Look around\n"), "{document}");
    assert!(
        document.contains("## You\n\n# Look around\n/shell echo exported-output\n"),
        "{document}"
    );
    assert!(document.contains("### Tool `shell` · exit 0"), "{document}");
    assert!(
        document.contains("```text\nexported-output\n```"),
        "{document}"
    );
    assert!(document.contains("## Agent\n\nDemo model"), "{document}");

    let (status, body) = server
        .get(&format!("/api/conversations/{id}/export?format=html"))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("markdown")
    );
    let (status, _) = server.get("/api/conversations/c_missing/export").await;
    assert_eq!(status, 404);
}
