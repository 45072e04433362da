//! Builds the family of docs/study.md's figures: the bundled MiniLM
//! truncated to 2, 4 and 6 layers (its real weights, tensors byte for byte),
//! as `scripts/study-family` does without cargo:
//!
//! ```sh
//! cargo run --release --example study_family -- /tmp/family
//! cargo run --release -- study /tmp/family/* --out /tmp/study
//! ```
//!
//! (`tests/study.rs` uses a larger family that adds generated checkpoints;
//! its figures mix random and trained weights and are not the docs'.)

#[path = "../tests/common/family.rs"]
mod family;

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: study_family DIR");
        std::process::exit(2);
    };
    let dir = std::path::PathBuf::from(dir);
    let bundle = match specbound::io::bundle::locate() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("study_family: {e}");
            std::process::exit(2);
        }
    };
    for layers in [2, 4, 6] {
        let p = dir.join(format!("minilm-L{layers}"));
        family::minilm(&bundle, &p, layers);
        println!("{}", p.display());
    }
}
