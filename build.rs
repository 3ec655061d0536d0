fn main() {
    // sqlx::migrate!() embeds migrations/ at compile time; without this a new migration is missed.
    println!("cargo:rerun-if-changed=migrations");
    pack_relative_relocations();
    commit();
}

/// The git commit the binary is built from, for `openvaala --version`: `unknown` outside a
/// git checkout (a source package).
fn commit() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .map(|text| text.trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=OPENVAALA_COMMIT={commit}");
    // A new commit moves the branch's ref (or packed-refs); HEAD moves on a checkout. Only
    // files that exist are watched: cargo takes a missing one as changed, which would rebuild
    // the crate at every build (a repository without packed-refs, a branch ref only packed).
    // A ref that is packed later loses its loose file, and that is seen as a change.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        let reference = git(&["symbolic-ref", "-q", "HEAD"]);
        let watched = ["HEAD", "packed-refs"]
            .into_iter()
            .chain(reference.as_deref())
            .map(|file| format!("{dir}/{file}"));
        for path in watched {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}

/// The binaries are position-independent, so every pointer in their constant data is a
/// relocation the loader applies at start: 1.3 MiB of 24-byte `R_X86_64_RELATIVE` entries in
/// the release binary, all read (and so resident) in every process. Packed (`DT_RELR`, a
/// bitmap of the same relocations) they take a few KiB. The loader must know the format:
/// glibc 2.36 and later; the linker (rust-lld, or GNU ld 2.38 and later) marks the binary
/// so that an older glibc refuses it with a clear message. Only where the build's own glibc
/// is recent enough, since a binary is normally run where it is built.
fn pack_relative_relocations() {
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    let version = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok());
    // "glibc 2.36"
    let recent = version
        .as_deref()
        .and_then(|text| text.split_whitespace().nth(1))
        .and_then(|number| {
            let mut parts = number.split('.').map(|part| part.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .is_some_and(|(major, minor)| (major, minor) >= (2, 36));
    if recent {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
