//! `audit` on numbers computed as the paper's authors compute them (dense
//! float64 per-head products, float64 SVD): the round-off values they carry
//! where the exact spectrum has zeros inflate c(W, p) at small p, and the
//! audit says so, stating the certified exact value and the artefact; a
//! claim that is wrong for another reason gets no such note.

mod common;

use common::authors_float::{contribution, head_product, svdvals};
use specbound::arch::{MatrixId, MatrixType};
use specbound::certificate::{Certificate, GridPoint};
use specbound::io::checkpoint::Checkpoint;

#[test]
fn audit_explains_the_authors_float_artefact_and_nothing_else() {
    let dir = common::process_scratch().join("fidelity");
    std::fs::create_dir_all(&dir).unwrap();
    let model = common::root().join("data/all-MiniLM-L6-v2");
    let cert_path = dir.join("cert.json");
    let o = common::run(&[
        "certify",
        model.to_str().unwrap(),
        "--out",
        cert_path.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let cert = Certificate::read(&cert_path).unwrap();
    let (n, m, d) = (
        cert.model.hidden,
        cert.parameters.grid_m,
        cert.model.head_dim,
    );
    let ck = Checkpoint::open(&model).unwrap();
    // The authors' table layout (their p_contribution_raw, p printed in full).
    let mut csv = String::from("model_id,layer,head,matrix_type,hidden_size,p,contribution\n");
    let mut expect = Vec::new(); // (line, explained)
    let mut line = 1;
    for (head, kind) in [(0, "QK"), (5, "QK"), (3, "V_tilde")] {
        let s = svdvals(&head_product(&ck, "", 0, head, d, kind));
        let mt = MatrixType::parse(kind).unwrap();
        let w = cert.matrix(MatrixId::head(0, head, mt)).unwrap();
        for k in 1..=3 {
            let p = k as f64 / m as f64;
            let c = contribution(&s, p, n, w.scale.mid());
            let exact = w.contribution_at(GridPoint { k, m }).unwrap();
            assert!(c > exact.hi, "{kind} head {head} k={k}: no inflation");
            line += 1;
            csv.push_str(&format!("minilm,0,{head},{kind},{n},{p},{c}\n"));
            expect.push((line, true));
        }
        // Wrong for another reason: 50% too large, 10% too small.
        let exact = w.contribution_at(GridPoint { k: 1, m }).unwrap().mid();
        for wrong in [exact * 1.5, exact * 0.9] {
            line += 1;
            csv.push_str(&format!(
                "minilm,0,{head},{kind},{n},{},{wrong}\n",
                1.0 / m as f64
            ));
            expect.push((line, false));
        }
    }
    let claims = dir.join("claims.csv");
    std::fs::write(&claims, csv).unwrap();
    let o = common::run(&[
        "audit",
        model.to_str().unwrap(),
        claims.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let results = j["results"].as_array().unwrap();
    assert_eq!(results.len(), expect.len());
    for (r, (line, explained)) in results.iter().zip(expect) {
        assert_eq!(r["line"], line);
        assert_eq!(r["verdict"], "inconsistent", "line {line}: {r}");
        match r.get("note") {
            Some(note) if explained => {
                let note = note.as_str().unwrap();
                assert!(note.starts_with("float artefact:"), "line {line}: {note}");
                // The certified value in the CLI's outward-rounded form
                // (one formatter for terminal, page and notes).
                let value = note
                    .split("Certified exact value ")
                    .nth(1)
                    .and_then(|v| v.split(';').next())
                    .unwrap_or("");
                assert!(
                    specbound::report::fmt::read_back(value).is_some(),
                    "line {line}: {note}"
                );
                assert!(note.contains("% above it"), "line {line}: {note}");
            }
            None if !explained => {}
            other => panic!("line {line}: explained {explained}, note {other:?}"),
        }
    }
    // The text output prints the note under the claim.
    let o = common::run(&["audit", model.to_str().unwrap(), claims.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.matches("note: float artefact:").count(), 9, "{text}");
}
