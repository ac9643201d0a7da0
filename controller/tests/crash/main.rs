//! Crashes at every window of the write-ahead protocol: in the effect
//! executor, in the driver, and in the real `autoforge serve` binary;
//! replicas killed and paused (`replica_serve`), the database down at
//! start or restarted under load (`db_serve`), a migration applied under
//! live runs of the schema before it (`db_migrate`), and seeded random kills of
//! serve and agents under a whole workload (`chaos`).

#[path = "../common/mod.rs"]
mod common;

mod answer_crash;
mod chaos;
mod crash_serve;
mod db_migrate;
mod db_serve;
mod driver_crash;
mod effects_crash;
mod matrix;
mod replica_serve;
