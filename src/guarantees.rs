//! What specbound guarantees and how (`docs/guarantees.md`, brought into
//! the library's documentation here): the guarantee kinds every enclosure's
//! doc comment states, the lemmas they rest on (`proofs/`, one file each,
//! checked by Coq where they are floating-point facts), and what may stay
//! undecided.
#![doc = include_str!("../docs/guarantees.md")]
