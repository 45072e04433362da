//! Fuzz target: the safetensors reader must return an error, never panic, on any input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The readers take paths (they memory-map files): write the input to a
    // per-process temporary file.
    let path = std::env::temp_dir().join(format!("specbound-fuzz-{}.safetensors", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    for tensor in [None, Some("w")] {
        let _ = specbound::io::read_matrix(&path, tensor);
    }
    if let Ok(ck) = specbound::io::checkpoint::Checkpoint::open(&path) {
        let names: Vec<String> = ck.names().map(str::to_string).collect();
        for n in names {
            let _ = ck.read(&n);
        }
        // Detection, then the recipe both as described and as run.
        if let Ok(arch) = specbound::arch::detect(&ck, &Default::default()) {
            let _ = specbound::arch::describe(&ck, &arch);
            let _ = specbound::arch::extract(&ck, &arch);
        }
    }
});
