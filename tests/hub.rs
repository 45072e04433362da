//! Models named by Hugging Face id, resolved offline through a real cache
//! layout (blobs, refs, snapshots of symbolic links, as the hub writes it)
//! built in a temporary directory.

mod common;

use common::tmpdir;

use std::path::{Path, PathBuf};
use std::process::Output;

const COMMIT_A: &str = "1111111111111111111111111111111111111111";
const COMMIT_B: &str = "2222222222222222222222222222222222222222";

/// `cache/models--org--name` with the bundled MiniLM files as blobs, a
/// snapshot per commit of symbolic links into them, `refs/main` -> A and
/// `refs/v2` -> B (B lacks nothing, A and B hold the same files).
fn build_cache(cache: &Path, id: &str) -> PathBuf {
    let repo = cache.join(format!("models--{}", id.replace('/', "--")));
    let bundle = common::root().join("data/all-MiniLM-L6-v2");
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    for (i, f) in ["config.json", "model.safetensors"].iter().enumerate() {
        std::fs::copy(bundle.join(f), repo.join("blobs").join(format!("blob{i}"))).unwrap();
    }
    for c in [COMMIT_A, COMMIT_B] {
        let snap = repo.join("snapshots").join(c);
        std::fs::create_dir_all(&snap).unwrap();
        for (i, f) in ["config.json", "model.safetensors"].iter().enumerate() {
            std::os::unix::fs::symlink(format!("../../blobs/blob{i}"), snap.join(f)).unwrap();
        }
    }
    std::fs::write(repo.join("refs/main"), COMMIT_A).unwrap();
    std::fs::write(repo.join("refs/v2"), format!("{COMMIT_B}\n")).unwrap();
    repo
}

fn run_env(args: &[&str], env: &[(&str, &Path)], cwd: &Path) -> Output {
    let mut c = common::bin();
    c.args(args).current_dir(cwd);
    for k in [
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_HOME",
        "XDG_CACHE_HOME",
    ] {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    common::ok_json(o)
}

#[test]
fn a_cached_id_resolves_through_every_variable_and_revision() {
    let d = tmpdir("cache");
    let id = "sentence-transformers/all-MiniLM-L6-v2";
    let cache = d.join("hf/hub");
    let repo = build_cache(&cache, id);
    let cwd = d.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let reference = json(&common::run(&[
        "certify",
        common::root()
            .join("data/all-MiniLM-L6-v2")
            .to_str()
            .unwrap(),
        "--json",
    ]));
    // HF_HUB_CACHE, then HF_HOME (its hub/), then HOME's ~/.cache/huggingface/hub.
    let home = d.join("home");
    std::fs::create_dir_all(home.join(".cache/huggingface")).unwrap();
    std::os::unix::fs::symlink(&cache, home.join(".cache/huggingface/hub")).unwrap();
    for env in [
        vec![("HF_HUB_CACHE", cache.as_path())],
        vec![("HF_HOME", d.join("hf").as_path())],
        vec![("HOME", home.as_path())],
    ] {
        let env: Vec<(&str, &Path)> = env;
        let c = json(&run_env(&["certify", id, "--json"], &env, &cwd));
        let path = c["model"]["path"].as_str().unwrap().to_string();
        assert!(path.ends_with(&format!("snapshots/{COMMIT_A}")), "{path}");
        // Same weights, same certificate (the files are named relative to the snapshot).
        let mut a = c.clone();
        let mut b = reference.clone();
        a["model"].as_object_mut().unwrap().remove("path");
        b["model"].as_object_mut().unwrap().remove("path");
        assert!(a == b, "certificate through the cache differs");
    }
    let env = [("HF_HUB_CACHE", cache.as_path())];
    // --revision: a branch in refs/, or a commit directly.
    for rev in ["v2", COMMIT_B] {
        let j = json(&run_env(
            &["certify", id, "--revision", rev, "--json"],
            &env,
            &cwd,
        ));
        let path = j["model"]["path"].as_str().unwrap();
        assert!(path.ends_with(COMMIT_B), "{path}");
    }
    // svd of a tensor of a cached model, and the CSV model_id from the name.
    let out = run_env(
        &[
            "svd",
            id,
            "--tensor",
            "encoder.layer.0.attention.self.query.weight",
            "--json",
        ],
        &env,
        &cwd,
    );
    assert_eq!(json(&out)["rows"], 384);
    let csv = d.join("csv");
    let out = run_env(&["certify", id, "--csv", csv.to_str().unwrap()], &env, &cwd);
    assert!(out.status.success());
    let ob = std::fs::read_to_string(csv.join("observed_bounds.csv")).unwrap();
    assert!(ob.contains("all-MiniLM-L6-v2"), "{ob}");
    // audit and verify --model take the id too.
    let cert = d.join("cert.json");
    let out = run_env(
        &["certify", id, "--out", cert.to_str().unwrap()],
        &env,
        &cwd,
    );
    assert!(out.status.success());
    let out = run_env(
        &["verify", cert.to_str().unwrap(), "--model", id],
        &env,
        &cwd,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let claims = d.join("claims.csv");
    std::fs::write(&claims, "bound,value,model_id\nours,20573.03,x\n").unwrap();
    let out = run_env(&["audit", id, claims.to_str().unwrap()], &env, &cwd);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A path that exists wins over an id of the same spelling.
    let local = cwd.join("sentence-transformers/all-MiniLM-L6-v2");
    std::fs::create_dir_all(&local).unwrap();
    let out = run_env(&["inspect", id], &env, &cwd);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("model directory holds none of"));
    std::fs::remove_dir_all(cwd.join("sentence-transformers")).unwrap();
    drop(repo);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_uncached_id_says_how_to_download_it_and_never_reaches_the_network() {
    let d = tmpdir("missing");
    let cache = d.join("hub");
    std::fs::create_dir_all(&cache).unwrap();
    let env = [("HF_HUB_CACHE", cache.as_path())];
    let out = run_env(&["certify", "google/bert_uncased_L-2_H-128_A-2"], &env, &d);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("not in the Hugging Face cache"), "{err}");
    assert!(
        err.contains("huggingface-cli download google/bert_uncased_L-2_H-128_A-2"),
        "{err}"
    );
    assert!(err.contains("snapshot_download"), "{err}");
    assert!(err.contains("never downloads"), "{err}");
    // A cached repository without the revision asked for lists what it has.
    let id = "org/model";
    build_cache(&cache, id);
    let out = run_env(&["inspect", id, "--revision", "nope"], &env, &d);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("has no revision 'nope'") && err.contains(COMMIT_A),
        "{err}"
    );
    assert!(err.contains("--revision nope"), "{err}");
    // A bad revision and --revision on a path are refused.
    let out = run_env(&["inspect", id, "--revision", "../x"], &env, &d);
    assert_eq!(out.status.code(), Some(2));
    let bundle = common::root().join("data/all-MiniLM-L6-v2");
    let out = run_env(
        &["inspect", bundle.to_str().unwrap(), "--revision", "main"],
        &env,
        &d,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not to a path"));
    let _ = std::fs::remove_dir_all(&d);
}
