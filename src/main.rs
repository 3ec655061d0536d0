//! The `openvaala` command: parse the command line, then hand over to the library.

use std::process::ExitCode;

use clap::Parser;
use openvaala::cli::Cli;

fn main() -> ExitCode {
    // Tool processes start sandboxed through this binary (see `sandbox::launcher`).
    if let Some(code) = openvaala::sandbox::launcher_main() {
        return code;
    }
    openvaala::memory::keep_big_blocks_apart();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("OPENVAALA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx::query=error")),
        )
        .with_writer(|| openvaala::redact::RedactingWriter(std::io::stderr()))
        .init();
    openvaala::cli::run(Cli::parse())
}
