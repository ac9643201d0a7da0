//! The phase machine: phases, legal edges and the pure `decide` function (SPEC §3, §8, §11).
