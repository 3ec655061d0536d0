// sqlx::migrate!() embeds migrations/ at compile time; without this a new migration is missed.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
