//! The index's schema migrations, embedded in the binary: the SQLite index's (`migrations/`)
//! and the cluster's PostgreSQL one's (`migrations/postgres/`). Built here instead of by
//! `sqlx::migrate!`, whose macro crate compiles a second SQLite for the build machine: a
//! minute of every fresh build. The same description and checksum (SHA-384 of the file) as
//! the macro's, so databases migrated before see the same migrations applied.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One file's migration: `NNNN_words.sql` is version NNNN, described as the words.
fn migration(version: i64, description: &'static str, sql: &'static str) -> Migration {
    Migration::new(
        version,
        Cow::Borrowed(description),
        MigrationType::Simple,
        sqlx::SqlStr::from_static(sql),
        sql.starts_with("-- no-transaction"),
    )
}

/// The SQLite index's migrations.
pub fn sqlite() -> Migrator {
    Migrator::with_migrations(vec![
        migration(1, "index", include_str!("../../migrations/0001_index.sql")),
        migration(
            2,
            "reliability",
            include_str!("../../migrations/0002_reliability.sql"),
        ),
    ])
}

/// The cluster's PostgreSQL migrations.
pub fn postgres() -> Migrator {
    Migrator::with_migrations(vec![
        migration(
            1,
            "index",
            include_str!("../../migrations/postgres/0001_index.sql"),
        ),
        migration(
            2,
            "fence",
            include_str!("../../migrations/postgres/0002_fence.sql"),
        ),
        migration(
            3,
            "idempotency",
            include_str!("../../migrations/postgres/0003_idempotency.sql"),
        ),
        migration(
            4,
            "instance lease",
            include_str!("../../migrations/postgres/0004_instance_lease.sql"),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the folders is embedded, in order: a new migration file must be named
    /// here too.
    #[test]
    fn every_migration_file_is_embedded() {
        for (folder, migrator) in [
            ("migrations", sqlite()),
            ("migrations/postgres", postgres()),
        ] {
            let mut files: Vec<String> = std::fs::read_dir(folder)
                .unwrap()
                .filter_map(|entry| {
                    let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                    name.ends_with(".sql").then_some(name)
                })
                .collect();
            files.sort();
            let embedded: Vec<String> = migrator
                .iter()
                .map(|m| format!("{:04}_{}.sql", m.version, m.description.replace(' ', "_")))
                .collect();
            assert_eq!(files, embedded, "{folder}");
        }
    }
}
