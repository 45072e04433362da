//! Fuzz target: the PyTorch reader (zip container, legacy stream, the
//! allow-list scan of their pickles) must return an error, never panic,
//! never execute anything, on any input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The reader takes a path: write the input to a per-process file.
    let path = std::env::temp_dir().join(format!("specbound-fuzz-{}.pt", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(f) = specbound::io::pytorch::PytorchFile::open(&path) {
        let names: Vec<String> = f.names().to_vec();
        for n in names.iter().take(64) {
            let _ = f.info(n);
            let _ = f.read(n);
        }
        let _ = f.read("w");
    }
    let _ = specbound::io::read_matrix(&path, None);
});
