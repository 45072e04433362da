//! `specbound audit` (built in the next step).
