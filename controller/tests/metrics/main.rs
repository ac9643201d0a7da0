//! Prometheus metrics. They are alone in this binary because the recorder is
//! process-wide: tests of other areas running alongside would move the counters
//! these tests measure.

#[path = "../common/mod.rs"]
mod common;

mod exposition_format;
mod metrics_e2e;
mod metrics_loops;
mod metrics_serve;
