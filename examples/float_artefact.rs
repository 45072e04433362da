//! The authors' float64 computation of c(W, p) for every per-head matrix of
//! a BERT-layout model, side by side with the certified exact values: how
//! much the round-off values of the dense products' float64 SVD (nalgebra)
//! inflate c(W, k/m), per k and matrix type. With a second argument, also
//! writes those float values as a claims table in the authors' layout, for
//! `specbound audit MODEL CLAIMS`:
//!
//! ```sh
//! cargo run --release --example float_artefact -- data/all-MiniLM-L6-v2 /tmp/claims.csv
//! cargo run --release -- audit data/all-MiniLM-L6-v2 /tmp/claims.csv
//! ```

#[path = "../tests/common/authors_float.rs"]
mod authors_float;

use specbound::arch::{MatrixId, MatrixType};
use specbound::certificate::GridPoint;
use specbound::certify::{certify_run, CertifyOptions, Outcome, Run, RunScope};
use specbound::io::checkpoint::Checkpoint;
use specbound::progress::NoProgress;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(model) = args.first() else {
        eprintln!("usage: float_artefact MODEL_DIR [CLAIMS.csv]");
        std::process::exit(2);
    };
    let model = std::path::Path::new(model);
    let run = certify_run(
        model,
        &CertifyOptions::default(),
        &RunScope::default(),
        &NoProgress,
    );
    let cert = match run.map(|o| o.and_then(Run::into_certificate)) {
        Ok(Outcome::Certified((c, _))) => c,
        Ok(Outcome::Inconclusive(i)) => panic!("inconclusive: {}", i.reason),
        Err(e) => panic!("{e}"),
    };
    let ck = Checkpoint::open(model).unwrap();
    let prefix = cert.model.tensor_prefix.clone();
    let (n, m, d) = (
        cert.model.hidden,
        cert.parameters.grid_m,
        cert.model.head_dim,
    );
    let mut claims = String::from("model_id,layer,head,matrix_type,hidden_size,p,contribution\n");
    let kmax = 8.min(2 * m);
    println!(
        "{}: L = {}, N = {n}, head_dim {d}, m = {m}; largest relative excess of the authors' float64 c(W, k/m) over the certified value",
        model.display(),
        cert.model.layers
    );
    for kind in [MatrixType::QK, MatrixType::VTilde] {
        let mut worst = vec![0.0f64; kmax + 1];
        let mut moved = 0;
        let mut tail = 0.0f64;
        for layer in 0..cert.model.layers {
            for head in 0..cert.model.heads {
                let w = cert.matrix(MatrixId::head(layer, head, kind)).unwrap();
                let s = authors_float::svdvals(&authors_float::head_product(
                    &ck,
                    &prefix,
                    layer,
                    head,
                    d,
                    kind.name(),
                ));
                tail = tail.max(s[d] / s[0]);
                let scale = w.scale.mid();
                for (k, wk) in worst.iter_mut().enumerate().skip(1) {
                    let p = k as f64 / m as f64;
                    let c = authors_float::contribution(&s, p, n, scale);
                    let exact = w.contribution_at(GridPoint { k, m }).unwrap();
                    *wk = wk.max(c / exact.mid() - 1.0);
                    claims.push_str(&format!(
                        "model,{layer},{head},{},{n},{p},{c}\n",
                        kind.name()
                    ));
                }
                let fl: Vec<f64> = (0..=2 * m)
                    .map(|k| authors_float::contribution(&s, k as f64 / m as f64, n, scale))
                    .collect();
                let arg = (0..fl.len()).fold(0, |b, k| if fl[k] < fl[b] { k } else { b });
                if !w.p_opt_fraction.iter().any(|g| g.k == arg) {
                    moved += 1;
                }
            }
        }
        let cells: Vec<String> = (1..=kmax)
            .map(|k| format!("k={k}: {:.3e}", worst[k]))
            .collect();
        println!("  {:<8} {}", kind.name(), cells.join("  "));
        println!(
            "           largest round-off value / sigma_1: {tail:.2e}; float argmin outside the certified argmin set: {moved} of {}",
            cert.model.layers * cert.model.heads
        );
    }
    if let Some(out) = args.get(1) {
        std::fs::write(out, claims).unwrap();
        println!("claims in the authors' layout: {out}");
    }
}
