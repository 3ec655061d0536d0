//! Building the index from the directories: `openvaala reindex` (everything, into a fresh
//! `metadata.db`) and the reconcile at start-up after a crash (only conversations whose
//! `metadata.jsonl` changed behind the index's back). Both also close turns a crash left
//! `running` (invariant 4, crash-safe) and finish interrupted deletes.

use std::path::PathBuf;

use super::Index;
use super::repairs::{CLEAN_SHUTDOWN, POSTGRES_REPAIRS};
use super::types::{IndexError, IndexUpdate, IndexedLens};
use crate::domain::{Item, ItemKind, ItemStatus, TurnStatus, new_id, now, user_item};
use crate::store::records::{MetaRecord, SessionRecord};
use crate::store::state::ConversationState;
use crate::store::{Acceptance, Store, StoreError};

/// A conversation read from its directory, ready to be indexed.
#[derive(Debug)]
pub struct LoadedConversation {
    pub state: ConversationState,
    pub meta_len: u64,
    /// Root-session message texts that search should find: (item id, text).
    pub search_texts: Vec<(u64, String)>,
    /// The bytes of the root session's file that `search_texts` cover (0 when they were not
    /// read from it: a new conversation, a fork whose rows are copied later).
    pub root_len: u64,
    /// Files whose torn tail was skipped.
    pub torn_files: Vec<PathBuf>,
    /// Files with damaged lines (line numbers from 1), skipped here: the conversation is
    /// listed as far as it can be read, and cannot open until repaired.
    pub damaged_files: Vec<(PathBuf, Vec<usize>)>,
    /// The newest lease epoch its files carry (cluster mode; 0 when none).
    pub epoch: u64,
}

/// What a rebuild did, for the report `reindex` prints.
#[derive(Debug, Default)]
pub struct RebuildReport {
    pub indexed: usize,
    /// (conversation id, reason) for every directory that could not be indexed.
    pub skipped: Vec<(String, String)>,
    pub torn_files: Vec<PathBuf>,
    /// (conversation id, file, damaged line numbers): listed, but the conversation cannot
    /// open until `openvaala repair` moves those lines aside.
    pub damaged_files: Vec<(String, PathBuf, Vec<usize>)>,
    pub finished_deletes: Vec<String>,
    /// Turns found `running` and closed as `interrupted`.
    pub closed_turns: usize,
    /// The newest lease epoch of each conversation indexed (cluster mode).
    pub epochs: Vec<(String, u64)>,
}

/// The end of a tool's output that the service's stop cut short.
pub const OUTPUT_CUT_BY_STOP: &str = "[output cut short: the service stopped]";

pub const INTERRUPTED_BY_STOP: &str =
    "The previous turn was interrupted: the service stopped before it finished.";

/// Reads one conversation directory and, with `close_turns`, closes turns a crash left running
/// (without, nothing is written: in cluster mode another instance may own the conversation).
/// Damaged lines are skipped and reported, so that the conversation stays listed; nothing is
/// written to a damaged conversation (what it holds is not known until it is repaired).
pub fn load_conversation(
    store: &Store,
    id: &str,
    close_turns: bool,
    acceptance: &Acceptance,
) -> Result<(LoadedConversation, usize), String> {
    let log = store
        .read_metadata_salvaging(id, acceptance)
        .map_err(|e| describe(&e))?;
    let mut epoch = log.epoch;
    let mut torn_files = Vec::new();
    let mut damaged_files = Vec::new();
    if log.torn_tail.is_some() {
        torn_files.push(store.metadata_path(id));
    }
    if !log.damaged.is_empty() {
        let lines = log.damaged.iter().map(|damaged| damaged.line).collect();
        damaged_files.push((store.metadata_path(id), lines));
    }
    let mut state = ConversationState::from_records(&log.records)
        .map_err(|e| format!("unreadable metadata.jsonl: {e}"))?;
    let mut meta_len = log.len;
    let root_session = state.conversation.root_session_id.clone();
    let mut session_items = std::collections::HashMap::new();
    for session in &state.sessions {
        let path = store.session_path(id, &session.id);
        let session_log =
            crate::store::jsonl::read_log_salvaging::<SessionRecord>(&path, acceptance)
                .map_err(|e| describe(&e))?;
        if !session_log.damaged.is_empty() {
            let lines = session_log.damaged.iter().map(|d| d.line).collect();
            damaged_files.push((path.clone(), lines));
        }
        if session_log.torn_tail.is_some() {
            torn_files.push(path);
        }
        epoch = epoch.max(session_log.epoch);
        session_items.insert(
            session.id.clone(),
            crate::store::fold_items(session_log.records),
        );
    }

    let running: Vec<_> = if close_turns && damaged_files.is_empty() {
        state.running_turns().cloned().collect()
    } else {
        Vec::new()
    };
    // Files a cluster wrote carry epochs: what closes their turns is stamped with the next
    // one (and the lease raised above it), or every later reader would skip it as a stale
    // writer's. Files with no epoch (embedded) get none.
    let closing_epoch = (epoch > 0 && !running.is_empty()).then_some(epoch + 1);
    let stamped = |mut writer: crate::store::jsonl::JsonlWriter| {
        if let Some(epoch) = closing_epoch {
            writer.stamp_epoch(epoch);
        }
        writer
    };
    if let Some(closing) = closing_epoch {
        epoch = closing;
    }
    for turn in &running {
        let items = session_items.entry(turn.session_id.clone()).or_default();
        let records = close_cut_turn(&state, items, &turn.session_id, &turn.id);
        store
            .open_session_writer(id, &turn.session_id)
            .map(stamped)
            .and_then(|mut writer| writer.append(&records))
            .map_err(|e| describe(&e))?;
        let ended = MetaRecord::TurnEnded {
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            status: TurnStatus::Interrupted,
            error: Some("the service stopped during the turn".to_owned()),
            error_code: None,
            at: now(),
            usage: None,
        };
        let mut writer = store
            .open_metadata_writer(id)
            .map(stamped)
            .map_err(|e| describe(&e))?;
        writer
            .append(std::slice::from_ref(&ended))
            .map_err(|e| describe(&e))?;
        meta_len = writer.len();
        state.apply(&ended);
    }

    let search_texts = session_items
        .get(&root_session)
        .map(|items| searchable(items))
        .unwrap_or_default();
    // Read after the turns above were closed (which appends to the file).
    let root_len = std::fs::metadata(store.session_path(id, &root_session)).map_or(0, |m| m.len());
    Ok((
        LoadedConversation {
            state,
            meta_len,
            search_texts,
            root_len,
            torn_files,
            damaged_files,
            epoch,
        },
        running.len(),
    ))
}

/// The records that close a turn a crash cut: the items of its accepted messages the crash
/// kept out of the history, then its running items as `interrupted` and a notice. `items` (the
/// session's history) is updated to match. Used at start-up and when an actor loads.
pub fn close_cut_turn(
    state: &ConversationState,
    items: &mut Vec<Item>,
    session_id: &str,
    turn_id: &str,
) -> Vec<SessionRecord> {
    let mut records = restore_accepted_items(state, items, turn_id);
    records.extend(close_interrupted_items(items, session_id, turn_id));
    records
}

/// Accepting a message stores its `message.accepted` record first and its history item right
/// after, in another file. A crash in between leaves an accepted message (whose request may
/// already have its answer stored under an idempotency key) missing from the history; the
/// record holds all of it, so these are the records that put the items of turn `turn_id`'s
/// messages back, where its other items would follow them. `items` gets them too.
fn restore_accepted_items(
    state: &ConversationState,
    items: &mut Vec<Item>,
    turn_id: &str,
) -> Vec<SessionRecord> {
    let Some(turn) = state.turns.iter().rev().find(|turn| turn.id == turn_id) else {
        return Vec::new();
    };
    let present: std::collections::HashSet<&str> =
        items.iter().map(|item| item.id.as_str()).collect();
    let missing: Vec<&crate::domain::Message> = turn
        .message_ids
        .iter()
        .filter(|id| !present.contains(id.as_str()))
        .filter_map(|id| state.accepted.get(id))
        .collect();
    let mut records = Vec::with_capacity(missing.len());
    for message in missing {
        let seq = items.last().map_or(1, |last| last.seq + 1);
        let item = user_item(message, turn_id, seq);
        items.push(item.clone());
        records.push(SessionRecord::Item { item });
    }
    if !records.is_empty() {
        tracing::warn!(turn = %turn_id, count = records.len(), "restored accepted messages that a crash kept out of the history");
    }
    records
}

/// The records that close a turn cut by a crash: its running items become `interrupted`, and a
/// notice tells the model (and every client) what happened. `items` is updated to match.
fn close_interrupted_items(
    items: &mut Vec<Item>,
    session_id: &str,
    turn_id: &str,
) -> Vec<SessionRecord> {
    let mut records = Vec::new();
    for item in items.iter_mut().filter(|i| i.status == ItemStatus::Running) {
        item.status = ItemStatus::Interrupted;
        // What the tool had streamed is kept (`SessionRecord::Output`), marked where it ends.
        if let ItemKind::ToolCall { output, .. } = &mut item.kind
            && !output.is_empty()
        {
            if !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(OUTPUT_CUT_BY_STOP);
        }
        records.push(SessionRecord::Item { item: item.clone() });
    }
    let notice = Item {
        id: new_id("m"),
        session_id: session_id.to_owned(),
        turn_id: turn_id.to_owned(),
        seq: items.last().map_or(1, |last| last.seq + 1),
        created_at: now(),
        status: ItemStatus::Completed,
        compacted: false,
        step: None,
        kind: ItemKind::Notice {
            text: INTERRUPTED_BY_STOP.to_owned(),
        },
    };
    items.push(notice.clone());
    records.push(SessionRecord::Item { item: notice });
    records
}

/// The texts of finished messages, as search indexes them.
pub fn searchable(items: &[Item]) -> Vec<(u64, String)> {
    items
        .iter()
        .filter(|item| item.status != ItemStatus::Running)
        .filter_map(|item| Some((item.seq, item.kind.searchable_text()?.to_owned())))
        .collect()
}

/// Every index update that describes one loaded conversation.
pub fn updates_for(loaded: &LoadedConversation) -> Vec<IndexUpdate<'_>> {
    let state = &loaded.state;
    let id = state.conversation.id.as_str();
    let mut updates = vec![
        IndexUpdate::Conversation {
            conversation: &state.conversation,
            meta_len: loaded.meta_len,
        },
        IndexUpdate::Title {
            conversation_id: id,
            title: &state.conversation.title,
        },
    ];
    updates.extend(state.sessions.iter().map(|session| IndexUpdate::Session {
        conversation_id: id,
        session,
    }));
    updates.extend(state.turns.iter().map(|turn| IndexUpdate::Turn {
        conversation_id: id,
        turn,
    }));
    updates.extend(
        state
            .answers
            .iter()
            .map(|(key, answer)| IndexUpdate::Answer {
                conversation_id: id,
                key,
                status: answer.status,
                response: &answer.response,
                body_hash: answer.body_hash.as_deref(),
            }),
    );
    updates.extend(
        loaded
            .search_texts
            .iter()
            .map(|(seq, text)| IndexUpdate::SearchText {
                conversation_id: id,
                seq: *seq,
                text,
            }),
    );
    if loaded.root_len > 0 {
        updates.push(IndexUpdate::SearchedThrough {
            conversation_id: id,
            root_len: loaded.root_len,
        });
    }
    updates
}

/// Rebuilds `metadata.db` from nothing. The caller holds the runtime lock.
pub async fn reindex(store: &Store) -> Result<RebuildReport, IndexError> {
    let mut report = RebuildReport {
        finished_deletes: store.finish_interrupted_work()?,
        ..RebuildReport::default()
    };
    let db = store.index_path();
    for suffix in ["", "-wal", "-shm"] {
        let path = PathBuf::from(format!("{}{suffix}", db.display()));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&path, e).into()),
        }
    }
    let index = Index::create_for_bulk_load(&db).await?;
    let ids = store.conversation_ids()?;
    index_conversations(store, &index, ids, Load::Bulk, &mut report).await?;
    // The index now matches the directories exactly: the next start needs no reconcile.
    index.set_runtime_state(CLEAN_SHUTDOWN, "1").await?;
    index.clear_repairs()?;
    index.finish_bulk_load().await?;
    Ok(report)
}

/// Brings the index up to date with the directories after an unclean stop: re-reads only the
/// conversations whose `metadata.jsonl` or root session file differs in length from what the
/// index recorded (a finished message's search row is written after its answer, so a crash
/// can leave the file ahead of search), drops rows whose directory is gone, and closes turns
/// left running. The result is what `reindex` would build.
pub async fn reconcile(store: &Store, index: &Index) -> Result<RebuildReport, IndexError> {
    let mut report = RebuildReport {
        finished_deletes: store.finish_interrupted_work()?,
        ..RebuildReport::default()
    };
    for id in &report.finished_deletes {
        index.remove_conversation(id).await?;
    }
    let mut known = index.indexed_lens().await?;
    let running: std::collections::HashSet<String> = index
        .running_conversation_ids()
        .await?
        .into_iter()
        .collect();
    // Conversations whose updates failed are re-indexed whatever their log length says.
    let repairs: std::collections::HashSet<String> = index.repairs().into_iter().collect();
    let changed = behind_the_files(store, &mut known, |id| {
        running.contains(id) || repairs.contains(id)
    })?;
    for gone in known.keys() {
        index.remove_conversation(gone).await?;
    }
    for id in &changed {
        index.remove_conversation(id).await?;
    }
    // (A noted conversation whose directory is gone was dropped with the others above.)
    index_conversations(store, index, changed, Load::Upsert, &mut report).await?;
    index.clear_repairs()?;
    Ok(report)
}

/// Reads conversations on a blocking thread and writes them to the index in batches, so file
/// parsing and SQLite inserts overlap.
/// How conversations go into the index: into a fresh one in bulk, or as upserts into a live one.
#[derive(Clone, Copy, PartialEq)]
enum Load {
    Bulk,
    Upsert,
    /// Upserts that write no conversation file (cluster mode: turns left running may belong
    /// to a live instance; whoever takes the conversation closes them).
    ReadOnly,
}

async fn index_conversations(
    store: &Store,
    index: &Index,
    ids: Vec<String>,
    load: Load,
    report: &mut RebuildReport,
) -> Result<(), IndexError> {
    const BATCH: usize = 2000;
    let mut next_num = 1;
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<
        Result<(LoadedConversation, usize), (String, String)>,
    >(BATCH * 2);
    let reader_store = store.clone();
    // Cluster mode: which stamped lines count, from the coordination tables.
    let acceptances = match index.postgres() {
        Some(pg) => crate::index::postgres::acceptances(pg.pool(), None).await?,
        None => std::collections::HashMap::new(),
    };
    let reader = tokio::task::spawn_blocking(move || {
        for id in ids {
            let loaded = match acceptances.get(&id) {
                Some(None) => Err((id, "deleted (its files are on their way out)".to_owned())),
                Some(Some(acceptance)) => {
                    load_conversation(&reader_store, &id, load != Load::ReadOnly, acceptance)
                        .map_err(|reason| (id, reason))
                }
                None => load_conversation(
                    &reader_store,
                    &id,
                    load != Load::ReadOnly,
                    &Acceptance::default(),
                )
                .map_err(|reason| (id, reason)),
            };
            if sender.blocking_send(loaded).is_err() {
                return;
            }
        }
    });
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let next = receiver.recv().await;
        let done = next.is_none();
        match next {
            Some(Ok((loaded, closed))) => {
                report.closed_turns += closed;
                report.torn_files.extend(loaded.torn_files.iter().cloned());
                let id = &loaded.state.conversation.id;
                report.damaged_files.extend(
                    (loaded.damaged_files.iter())
                        .map(|(path, lines)| (id.clone(), path.clone(), lines.clone())),
                );
                batch.push(loaded);
            }
            Some(Err((id, reason))) => report.skipped.push((id, reason)),
            None => {}
        }
        if batch.len() >= BATCH || (done && !batch.is_empty()) {
            let updates: Vec<IndexUpdate<'_>> = batch.iter().flat_map(updates_for).collect();
            match load {
                Load::Bulk => next_num = index.bulk_insert(&updates, next_num).await?,
                Load::Upsert | Load::ReadOnly => index.apply(&updates).await?,
            }
            report.indexed += batch.len();
            report.epochs.extend(
                batch
                    .iter()
                    .map(|loaded| (loaded.state.conversation.id.clone(), loaded.epoch)),
            );
            batch.clear();
        }
        if done {
            break;
        }
    }
    reader.await.map_err(|e| IndexError::Task(e.to_string()))?;
    Ok(())
}

fn describe(error: &StoreError) -> String {
    match error {
        StoreError::UnknownVersion { version, .. } => format!("unknown schema version {version}"),
        StoreError::Malformed {
            path,
            line,
            message,
        } => format!(
            "unreadable {}: line {line}: {message}",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ),
        other => format!("unreadable: {other}"),
    }
}

/// The conversations of the data directory whose files the index does not reflect (their
/// `metadata.jsonl` or root session file is not the length it recorded), plus those `also`
/// names. What is found is taken out of `known`: what is left there has no directory.
fn behind_the_files(
    store: &Store,
    known: &mut std::collections::HashMap<String, IndexedLens>,
    also: impl Fn(&str) -> bool,
) -> Result<Vec<String>, IndexError> {
    let file_len = |path: std::path::PathBuf| std::fs::metadata(path).map(|m| m.len()).ok();
    let mut changed = Vec::new();
    for id in store.conversation_ids()? {
        let current = known.remove(&id).is_some_and(|indexed| {
            file_len(store.metadata_path(&id)) == Some(indexed.meta_len)
                && file_len(store.session_path(&id, &indexed.root_session_id))
                    == Some(indexed.root_len)
        });
        if !current || also(&id) {
            changed.push(id);
        }
    }
    Ok(changed)
}

/// Cluster mode, at an instance's start: brings the shared index up to the files without
/// writing any file (other instances may be running): conversations whose files grew past what
/// the index reflects, or whose updates failed (noted in the repairs file), are re-indexed;
/// directories that are gone leave the index. Turns left running stay so until an instance
/// takes their conversation and closes them.
pub async fn catch_up(store: &Store, index: &Index) -> Result<RebuildReport, IndexError> {
    let mut report = RebuildReport::default();
    let mut known = index.indexed_lens().await?;
    // Taken out of the way first: notes other instances add meanwhile go to a new file.
    let repairs = index.take_repairs()?;
    let changed = behind_the_files(store, &mut known, |id| repairs.contains(id))?;
    for gone in known.keys() {
        if !store.conversation_dir(gone).exists() {
            index.remove_conversation(gone).await?;
        }
    }
    index_conversations(store, index, changed, Load::ReadOnly, &mut report).await?;
    Ok(report)
}

/// Cluster mode, while running: re-indexes the conversations whose index updates failed (the
/// database was down), from their files, as soon as the database answers again, without
/// waiting for a start. Writes no file. If this fails too, they stay noted for the next try.
/// Returns how many were repaired.
pub async fn repair_noted(store: &Store, index: &Index) -> Result<usize, IndexError> {
    let mut noted = index.take_repairs()?;
    noted.extend(index.take_noted_here());
    if noted.is_empty() {
        return Ok(0);
    }
    let ids: Vec<String> = noted.into_iter().collect();
    // Counted as pending while they are re-indexed (they are out of the repairs file now).
    let _repairing = index.repairing(ids.len());
    let repaired = async {
        // Upserts, not a removal and a rebuild: a listing in between must not miss them.
        let mut present = Vec::new();
        for id in &ids {
            if store.exists(id) {
                present.push(id.clone());
            } else {
                index.remove_conversation(id).await?;
            }
        }
        let mut report = RebuildReport::default();
        index_conversations(store, index, present, Load::ReadOnly, &mut report).await?;
        Ok::<usize, IndexError>(report.indexed)
    }
    .await;
    if repaired.is_err() {
        let noted: Vec<&str> = ids.iter().map(String::as_str).collect();
        index.mark_out_of_date(&noted).await;
    }
    repaired
}

/// `reindex --database-url`: rebuilds the cluster's PostgreSQL index from the directories
/// (every instance stopped), and keeps each conversation's lease epoch above what its files
/// carry, so the next owner's records are never taken for a stale writer's.
pub async fn reindex_postgres(store: &Store, url: &str) -> Result<RebuildReport, IndexError> {
    let index = Index::open_postgres(url, &store.root().join(POSTGRES_REPAIRS)).await?;
    let pg = index.postgres().expect("a PostgreSQL index");
    pg.refuse_while_instances_run().await?;
    let mut report = RebuildReport {
        finished_deletes: store.finish_interrupted_work()?,
        ..RebuildReport::default()
    };
    pg.truncate().await?;
    let ids = store.conversation_ids()?;
    index_conversations(store, &index, ids, Load::Upsert, &mut report).await?;
    pg.raise_epochs(&report.epochs).await?;
    index.clear_repairs()?;
    index.close().await;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Message, MessageMode, MessageSource, MessageStatus};
    use crate::store::records::ConversationCreated;

    fn message(id: &str, status: MessageStatus) -> Message {
        Message {
            hooks: Vec::new(),
            id: id.to_owned(),
            session_id: "s_root".to_owned(),
            text: format!("text of {id}"),
            mode: MessageMode::Steer,
            source: MessageSource::User,
            from_session_id: None,
            status,
            created_at: now(),
            images: Vec::new(),
            command: None,
        }
    }

    #[test]
    fn messages_a_crash_kept_out_of_the_history_are_put_back_in_their_turn() {
        let mut records = MetaRecord::conversation_start(ConversationCreated {
            id: "c_1".to_owned(),
            title: "t".to_owned(),
            created_at: now(),
            cwd: "/".to_owned(),
            agent: "build".to_owned(),
            model: "demo".to_owned(),
            root_session_id: "s_root".to_owned(),
            forked_from: None,
            mcp: Default::default(),
            budget: Default::default(),
        });
        let started = message("m_started", MessageStatus::Started);
        let steered = message("m_steered", MessageStatus::Steered);
        records.extend([
            MetaRecord::MessageAccepted {
                message: started.clone(),
                idempotency_key: None,
                turn_id: None,
            },
            MetaRecord::TurnStarted {
                session_id: "s_root".to_owned(),
                turn_id: "t_1".to_owned(),
                message_ids: vec![started.id.clone()],
                at: now(),
                retry_of: None,
            },
            MetaRecord::MessageAccepted {
                message: steered.clone(),
                idempotency_key: None,
                turn_id: Some("t_1".to_owned()),
            },
        ]);
        let state = ConversationState::from_records(&records).unwrap();
        assert_eq!(state.turns[0].message_ids, ["m_started", "m_steered"]);

        // The started message's item made it to the history; the steered one's did not.
        let mut items = vec![user_item(&started, "t_1", 1)];
        let restored = restore_accepted_items(&state, &mut items, "t_1");
        assert_eq!(restored.len(), 1);
        let SessionRecord::Item { item } = &restored[0] else {
            panic!("an item record: {restored:?}");
        };
        assert_eq!(item, &user_item(&steered, "t_1", 2));
        assert_eq!(items.len(), 2);
        // Nothing is missing any more: nothing to restore.
        assert!(restore_accepted_items(&state, &mut items, "t_1").is_empty());
    }
}
