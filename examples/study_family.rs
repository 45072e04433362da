//! Builds the study's test family (the bundled MiniLM truncated to 2, 4 and
//! 6 layers, and generated BERT checkpoints of widths 128/256 and depths
//! 2/4) under a directory, for `specbound study DIR/* --out OUT`:
//!
//! ```sh
//! cargo run --release --example study_family -- /tmp/family
//! cargo run --release -- study /tmp/family/* --out /tmp/study
//! ```

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
    for p in family::build(&dir, &bundle) {
        println!("{}", p.display());
    }
}
