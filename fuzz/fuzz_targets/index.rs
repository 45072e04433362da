//! Fuzz target: a model directory's sharded index
//! (`model.safetensors.index.json`) and `config.json` must give an error,
//! never a panic, whatever they hold. The input is split at the first NUL:
//! the index before it, `config.json` after it (absent without a NUL).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("specbound-fuzz-index-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let (index, config) = match data.iter().position(|&b| b == 0) {
        Some(k) => (&data[..k], Some(&data[k + 1..])),
        None => (data, None),
    };
    if std::fs::write(dir.join("model.safetensors.index.json"), index).is_err() {
        return;
    }
    if let Some(c) = config {
        if std::fs::write(dir.join("config.json"), c).is_err() {
            return;
        }
    }
    if let Ok(ck) = specbound::io::checkpoint::Checkpoint::open(&dir) {
        let names: Vec<String> = ck.names().map(str::to_string).collect();
        for n in names.iter().take(64) {
            let _ = ck.read(n);
        }
        let _ = ck.read("w");
        let _ = specbound::arch::detect(&ck, &Default::default());
    }
});
