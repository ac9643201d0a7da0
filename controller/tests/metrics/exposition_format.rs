//! The strict exposition reader the metrics tests rely on rejects what a
//! Prometheus server would. It lives with the metrics tests so that it runs
//! once, not in every binary that shares the harness.

use crate::common::exposition::{parse_exposition, value_of};

#[test]
fn the_format_check_rejects_what_prometheus_would_reject() {
    for bad in [
        "metric",
        "metric{a=\"1\"}",
        "metric{a=1} 2",
        "metric{a=\"1\" 2",
        "1metric 2",
        "metric two",
        "# TYPE metric colour",
        "# WHAT metric",
        "metric 1 2 3",
    ] {
        assert!(parse_exposition(bad).is_err(), "accepted `{bad}`");
    }
    let good =
        "# HELP m A help text.\n# TYPE m counter\nm{a=\"x\\\"y\",b=\"\"} 3\nn 1.5 1700000000\n";
    let samples = parse_exposition(good).expect("a well-formed exposition");
    assert_eq!(samples.len(), 2);
    assert_eq!(value_of(&samples, "m", &[("a", "x\"y"), ("b", "")]), 3.0);
}
