//! The effect executor: the only code that writes to GitHub or pushes git refs (SPEC §6).
