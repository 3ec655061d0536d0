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
    openvaala::tls::install_crypto_provider();
    // Logging starts in `cli::run`: `serve` first reads how its config wants it.
    openvaala::cli::run(Cli::parse())
}
