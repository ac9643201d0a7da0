//! Rebuilds the crate when a migration is added or changed: `sqlx::migrate!`
//! embeds the files at compile time, but cargo does not know it reads them.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
