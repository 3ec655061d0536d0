//! The cost of the cluster's write fence per append: the same one-record appends to a
//! conversation file, fenced (stamped, fsynced, then accepted by a conditional statement in
//! PostgreSQL) and plain (fsynced only), interleaved, against the bench's own PostgreSQL.

use std::time::{Duration, Instant};

use openvaala::cluster::{Claim, Leases};
use openvaala::store::JsonlWriter;
use openvaala::store::records::MetaRecord;

/// Appends timed of each kind, after `warmups` untimed ones.
pub async fn fence_costs(
    url: &str,
    dir: &std::path::Path,
    appends: usize,
    warmups: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let index = openvaala::index::postgres::PgIndex::open(url).await?;
    let pool = index.pool().clone();
    sqlx::query("INSERT INTO instances (id, addr) VALUES ('i_bench', '127.0.0.1:1')")
        .execute(&pool)
        .await?;
    let leases = Leases::new(pool, "i_bench".to_owned(), Duration::from_secs(60));
    let Claim::Owned(fence) = leases.claim("c_bench_fence", 0).await? else {
        anyhow::bail!("the bench's own conversation was not claimed");
    };
    let dir = dir.to_owned();
    // On a worker of the multi-threaded runtime, as the conversation actors run.
    tokio::spawn(async move {
        let mut fenced = JsonlWriter::open(&dir.join("fenced.jsonl"))?;
        fenced.set_fence(Some(std::sync::Arc::new(fence)));
        let mut plain = JsonlWriter::open(&dir.join("plain.jsonl"))?;
        let record = [MetaRecord::TurnEnded {
            session_id: "s_bench".to_owned(),
            turn_id: "t_bench".to_owned(),
            status: openvaala::domain::TurnStatus::Completed,
            error: None,
            error_code: None,
            at: openvaala::domain::now(),
            usage: None,
        }];
        let (mut fenced_times, mut plain_times) = (Vec::new(), Vec::new());
        for round in 0..warmups + appends {
            let started = Instant::now();
            fenced.append(&record)?;
            let fenced_took = started.elapsed();
            let started = Instant::now();
            plain.append(&record)?;
            let plain_took = started.elapsed();
            if round >= warmups {
                fenced_times.push(fenced_took);
                plain_times.push(plain_took);
            }
        }
        Ok((fenced_times, plain_times))
    })
    .await?
}
