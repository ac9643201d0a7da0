//! `autoforge setup`: creates the GitHub App in one step through GitHub's
//! App manifest flow. A local page (on loopback) posts our manifest —
//! exactly the permissions and events the code uses — to GitHub; GitHub
//! creates the App once the person confirms and redirects back with a
//! temporary code; the code is converted into the App's id, private key and
//! webhook secret, which are written (0600) into a directory for `serve`.

mod credentials;
mod flow;
mod manifest;
mod pages;

pub use credentials::{ENV_FILE, KEY_FILE, SECRET_FILE, WrittenCredentials};
pub use flow::{SetupOptions, SetupOutcome, run};
pub use manifest::app_manifest;
