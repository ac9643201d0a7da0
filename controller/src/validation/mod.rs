//! Runs validation commands on a clean export of a candidate commit (SPEC §12).
