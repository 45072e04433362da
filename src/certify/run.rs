//! A model's matrices certified layer by layer ([`certify_run`]): the
//! checkpoint checked whole before anything is computed, the next layer
//! read on a thread of its own while this one is certified, finished
//! layers kept in and read back from a resume directory ([`super::resume`]).

use super::assemble::assemble;
use super::matrix::{spectrum_entry, MatrixResult};
use super::resume::{read_back, write_layer_part};
use super::schedule::certify_batch;
use super::shard;
use super::{check_grid_m, CertifyError, CertifyOptions, Outcome};
use crate::arch::{self, Architecture, MatrixId, ModelError, ProxyMatrix};
use crate::bounds::{self};
use crate::certificate::{
    Certificate, GridPoint, Header, ModelInfo, Parameters, Part, ShardSpec, SpectrumEntry, Tool,
    MAX_GRID_M,
};
use crate::enclosure::Inconclusive;
use crate::io::checkpoint::{Checkpoint, FileHash};
use crate::io::ReadError;

use crate::linalg::{Precision, SvdOptions};
use crate::progress::Progress;
use faer::Par;
use std::path::{Path, PathBuf};

/// Which matrices a run certifies, and where it keeps finished layers.
#[derive(Clone, Debug)]
pub struct RunScope {
    /// The shard of the model's matrices to certify (`super::shard`);
    /// `ShardSpec::WHOLE` for all of them.
    pub shard: ShardSpec,
    /// Where each finished layer's part is written (atomically) and found
    /// again by a rerun with the same arguments, which then skips that
    /// layer (`super::layer_part_name`).
    pub resume_dir: Option<PathBuf>,
    /// Whether [`Run::results`] keeps every certified matrix's singular
    /// values with their methods (all `min(m, n)` of them, structural
    /// zeros included). `false` keeps only the certificate's entries
    /// ([`Run::spectra`]), so that memory does not grow with the model by
    /// more than those (docs/certify.md, "Memory").
    pub keep_results: bool,
}

impl Default for RunScope {
    fn default() -> Self {
        Self {
            shard: ShardSpec::WHOLE,
            resume_dir: None,
            keep_results: true,
        }
    }
}

/// What a run certified.
#[derive(Debug)]
pub struct Run {
    /// The program, model, parameters and extensions.
    pub header: Header,
    /// The shard certified.
    pub shard: ShardSpec,
    /// Every matrix of the shard, in certificate order: those certified
    /// now and those read back from the resume directory.
    pub spectra: Vec<SpectrumEntry>,
    /// The matrices certified by this run, with their singular values and
    /// methods (in certificate order; not those read back); empty unless
    /// [`RunScope::keep_results`].
    pub results: Vec<MatrixResult>,
    /// How many matrices this run certified (not those read back).
    pub certified: usize,
    /// Layers whose part was read back from the resume directory.
    pub reused_layers: Vec<usize>,
    /// The shard's share of the model's estimated cost, out of 1.
    pub cost_share: f64,
}

impl Run {
    /// The certificate of a run of the whole model (`assemble`) with
    /// the singular values of every matrix this run certified
    /// ([`Run::results`]; empty unless [`RunScope::keep_results`]).
    pub fn into_certificate(self) -> Result<(Certificate, Vec<MatrixResult>), Inconclusive> {
        let cert = assemble(&self.header, &self.spectra)?;
        Ok((cert, self.results))
    }

    /// The part of a (shard's) run, with its digest.
    pub(crate) fn into_part(self) -> Part {
        Part::new(self.header, self.shard, self.spectra)
    }
}

/// Runs the pipeline on the matrices of `scope.shard`, one layer at a time
/// (a layer's tensors are read, its selected matrices certified in
/// parallel, then released; a mixture-of-experts layer one expert at a
/// time). With a resume directory, layers whose part is
/// there are read back instead (after checking that the part was written
/// by this program for this model, these parameters and this shard), and
/// each layer certified is written there before the next one starts.
///
/// The one entry point of certifying a model (the `certify` command, the
/// study, audits of a model and the Python module all come here).
///
/// *Guarantee: certified enclosure* for every interval of every entry (see
/// `docs/certify.md` for which paper quantity each one is); `Err` for bad input (including a part in the resume
/// directory from other arguments, another model or another version),
/// [`Outcome::Inconclusive`] at the first matrix (in certificate order)
/// that could not be certified.
pub fn certify_run(
    path: &Path,
    opts: &CertifyOptions,
    scope: &RunScope,
    progress: &dyn Progress,
) -> Result<Outcome<Run>, CertifyError> {
    let (ck, arch, header) = open_run(path, opts)?;
    std::thread::scope(|sc| {
        // The weight files' SHA-256 is one serial pass over every file
        // (0.25 s for a LLaMA-7B layer's 386 MiB, about 10 s for a whole
        // 7B model), needed only where the header is written: a resume
        // directory's parts (each layer's, and those read back are checked
        // against it) need it first; otherwise it runs on a thread of its
        // own beside the certification instead of keeping every other
        // thread waiting.
        let mut header = header;
        let hashing = match scope.resume_dir {
            Some(_) => {
                record_files(&mut header, ck.file_hashes())?;
                None
            }
            None => Some(sc.spawn(|| ck.file_hashes())),
        };
        let mut outcome = certify_layers(&ck, &arch, header, opts, scope, progress)?;
        if let (Outcome::Certified(run), Some(h)) = (&mut outcome, hashing) {
            let hashes = h.join().expect("the hashing thread does not panic");
            record_files(&mut run.header, hashes)?;
        }
        Ok(outcome)
    })
}

/// Records the weight files and their SHA-256 (`hashes`, or its error)
/// in `header`.
fn record_files(
    header: &mut Header,
    hashes: Result<Vec<FileHash>, ReadError>,
) -> Result<(), CertifyError> {
    header.model.files = super::file_entries(&hashes.map_err(ModelError::from)?);
    Ok(())
}

/// [`certify_run`] after the checkpoint is opened and checked: `header`'s
/// files are recorded by the caller when it has not hashed them yet.
fn certify_layers(
    ck: &Checkpoint,
    arch: &Architecture,
    header: Header,
    opts: &CertifyOptions,
    scope: &RunScope,
    progress: &dyn Progress,
) -> Result<Outcome<Run>, CertifyError> {
    let (planned, cost_share) = shard::shard_matrices(arch, opts.precision, scope.shard);
    let mut by_layer: Vec<Vec<MatrixId>> = vec![Vec::new(); arch.layers];
    for m in &planned {
        by_layer[m.id.layer].push(m.id);
    }
    // Read back what an earlier run finished, before computing anything.
    let done = match &scope.resume_dir {
        Some(dir) => read_back(dir, &header, scope.shard, &by_layer)?,
        None => vec![None; arch.layers],
    };
    let pending: usize = by_layer
        .iter()
        .zip(&done)
        .filter(|(_, d)| d.is_none())
        .map(|(ids, _)| ids.len())
        .sum();
    progress.matrices_total(pending);
    let mut run = Run {
        header,
        shard: scope.shard,
        spectra: Vec::with_capacity(planned.len()),
        results: Vec::with_capacity(if scope.keep_results { pending } else { 0 }),
        certified: 0,
        reused_layers: Vec::new(),
        cost_share,
    };
    let layers = Layers {
        ck,
        arch,
        by_layer: &by_layer,
        scope,
        progress,
        svd: SvdOptions {
            precision: opts.precision,
            par: Par::Seq, // parallel over matrices instead ([`certify_batch`])
            ..SvdOptions::default()
        },
    };
    match layers.certify(done, &mut run)? {
        Some(inc) => Ok(Outcome::Inconclusive(inc)),
        None => Ok(Outcome::Certified(run)),
    }
}

/// Checks the parameters, opens the checkpoint, detects its architecture
/// and checks every layer's tensors (presence, shape) before anything is
/// computed, so that a bad model fails at once, as `inspect` does; then
/// the run's header, without the files' hashes ([`certify_run`] records
/// them).
fn open_run(
    path: &Path,
    opts: &CertifyOptions,
) -> Result<(Checkpoint, Architecture, Header), CertifyError> {
    if let Some(m) = opts.grid_m {
        check_grid_m(m)?;
    }
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    arch::describe(&ck, &arch)?;
    let grid_m = match opts.grid_m {
        Some(m) => m,
        None => {
            let m = bounds::default_grid_m(arch.layers, arch.hidden);
            check_grid_m(m).map_err(|_| {
                CertifyError::Param(format!(
                    "the default grid m = ceil(L + ln N) = {m} exceeds the limit {MAX_GRID_M}; pass --grid-m"
                ))
            })?
        }
    };
    let header = run_header(path, &arch, &opts.l_phi, grid_m, opts.precision);
    Ok((ck, arch, header))
}

/// What is read and certified, in order: each layer not read back, a
/// layer of a mixture-of-experts model one expert at a time (the
/// attention and any dense feed-forward first), so that only one expert's
/// tensors and matrices are held at once.
fn reading_jobs<T>(by_layer: &[Vec<MatrixId>], done: &[Option<T>]) -> Vec<(usize, Vec<MatrixId>)> {
    let mut jobs: Vec<(usize, Vec<MatrixId>)> = Vec::new();
    for (l, ids) in by_layer.iter().enumerate() {
        if done[l].is_some() {
            continue;
        }
        let first = jobs.len();
        for &id in ids {
            match jobs[first..]
                .iter_mut()
                .find(|(_, c)| c[0].expert == id.expert)
            {
                Some((_, c)) => c.push(id),
                None => jobs.push((l, vec![id])),
            }
        }
    }
    jobs
}

/// What [`certify_run`] certifies layer by layer: the checkpoint, its
/// architecture, the matrices of each layer in the shard, and how.
struct Layers<'a> {
    ck: &'a Checkpoint,
    arch: &'a Architecture,
    by_layer: &'a [Vec<MatrixId>],
    scope: &'a RunScope,
    progress: &'a dyn Progress,
    svd: SvdOptions,
}

/// One reading job's matrices, read on a thread of its own.
type Read = Result<Vec<ProxyMatrix>, ModelError>;

impl Layers<'_> {
    /// Reads one job's matrices (one layer, or one expert of it).
    fn read(&self, (l, chunk): &(usize, Vec<MatrixId>)) -> Read {
        let wanted: std::collections::HashSet<MatrixId> = chunk.iter().copied().collect();
        arch::extract_layer(self.ck, self.arch, *l, &|id| wanted.contains(&id))
    }

    /// Every layer in order into `run`: read back (`done`) or certified;
    /// `Some` at the first matrix, in certificate order, that could not be
    /// certified.
    ///
    /// Pipelining: the next job is read (and converted) on a thread of its
    /// own while this one's small matrices are certified, once its large
    /// ones are done ([`certify_batch`]), so memory stays near one job's
    /// matrices plus the largest working set (docs/certify.md, "Memory").
    /// A read error surfaces when that job's turn comes, as when reading in
    /// order.
    fn certify(
        &self,
        mut done: Vec<Option<Vec<SpectrumEntry>>>,
        run: &mut Run,
    ) -> Result<Option<Inconclusive>, CertifyError> {
        let jobs = reading_jobs(self.by_layer, &done);
        let mut next_job = 0;
        std::thread::scope(|sc| {
            let mut prefetched: Option<std::thread::ScopedJoinHandle<'_, Read>> = None;
            for (l, ids) in self.by_layer.iter().enumerate() {
                if ids.is_empty() {
                    continue;
                }
                if let Some(entries) = done[l].take() {
                    run.spectra.extend(entries);
                    run.reused_layers.push(l);
                    continue;
                }
                let mut outcomes = Vec::with_capacity(ids.len());
                while next_job < jobs.len() && jobs[next_job].0 == l {
                    let mats = match prefetched.take() {
                        Some(h) => h.join().expect("the reading thread does not panic")?,
                        None => self.read(&jobs[next_job])?,
                    };
                    next_job += 1;
                    let slot = std::sync::Mutex::new(None);
                    let prefetch = || {
                        if let Some(job) = jobs.get(next_job) {
                            let h = sc.spawn(move || self.read(job));
                            *slot.lock().expect("no panic while holding the lock") = Some(h);
                        }
                    };
                    let order: Vec<MatrixId> = mats.iter().map(|m| m.id).collect();
                    // Largest first, each matrix dropped once certified; `None`:
                    // skipped because the run was cancelled.
                    let batch = certify_batch(mats, &self.svd, self.progress, &prefetch);
                    prefetched = slot.into_inner().expect("no panic while holding the lock");
                    let Some(batch) = batch.into_iter().collect::<Option<Vec<_>>>() else {
                        return Err(CertifyError::Cancelled);
                    };
                    outcomes.extend(order.into_iter().zip(batch));
                }
                if let Some(inc) = self.finish_layer(l, outcomes, run)? {
                    return Ok(Some(inc));
                }
            }
            Ok(None)
        })
    }

    /// A certified layer's outcomes into `run` (and its part into the
    /// resume directory); `Some` for its first matrix, in certificate
    /// order, that could not be certified, as for a layer certified in one
    /// batch.
    fn finish_layer(
        &self,
        l: usize,
        mut outcomes: Vec<(MatrixId, Result<MatrixResult, Inconclusive>)>,
        run: &mut Run,
    ) -> Result<Option<Inconclusive>, CertifyError> {
        outcomes.sort_by_key(|(id, _)| *id);
        let layer: Vec<MatrixResult> = match outcomes.into_iter().map(|(_, r)| r).collect() {
            Ok(r) => r,
            Err(inc) => return Ok(Some(inc)),
        };
        let entries: Vec<SpectrumEntry> = layer.iter().map(spectrum_entry).collect();
        if let Some(dir) = &self.scope.resume_dir {
            write_layer_part(dir, &run.header, self.scope.shard, l, &entries)?;
        }
        run.spectra.extend(entries);
        run.certified += layer.len();
        if self.scope.keep_results {
            run.results.extend(layer);
        }
        Ok(None)
    }
}

/// The program, model, parameters and extensions of a run, with no file
/// recorded yet ([`certify_run`] adds the files and their SHA-256).
pub(crate) fn run_header(
    path: &Path,
    arch: &Architecture,
    l_phi: &crate::bounds::LPhi,
    grid_m: usize,
    precision: Precision,
) -> Header {
    Header {
        tool: Tool {
            name: "specbound".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            device: crate::linalg::backend::recorded_device(),
        },
        model: ModelInfo {
            path: path.display().to_string(),
            files: Vec::new(),
            architecture: arch.family.clone(),
            tensor_prefix: arch.prefix.clone(),
            layers: arch.layers,
            hidden: arch.hidden,
            heads: arch.heads,
            kv_heads: arch.kv_heads,
            head_dim: arch.head_dim,
            intermediate: arch.intermediate,
            experts: arch.experts_entry(),
            cross_attention: arch.cross_attention(),
        },
        parameters: Parameters {
            l_phi: l_phi.as_str().to_string(),
            grid_m,
            grid: (0..=2 * grid_m)
                .map(|k| GridPoint { k, m: grid_m })
                .collect(),
            n: arch.hidden,
            depth: arch.layers,
            precision,
            rank: "exact rank of the stored matrix (certified), not a numerical rank".into(),
            heads_override: arch.heads_override.as_ref().map(|o| {
                crate::certificate::HeadsOverrideEntry {
                    heads: o.heads,
                    replaced: o.replaced,
                    source: o.source.clone(),
                }
            }),
            stack: arch.stack.as_ref().map(|s| crate::certificate::StackEntry {
                name: s.name.clone(),
                stacks: s.stacks.clone(),
                by_flag: s.by_flag,
            }),
        },
        extensions: arch.extensions(l_phi.is_paper()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::MatrixId;
    use crate::progress::NoProgress;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts the hooks; cancels once `stop_after` matrices are done.
    struct Counter {
        total: AtomicUsize,
        done: AtomicUsize,
        stop_after: usize,
    }

    impl Progress for Counter {
        fn matrices_total(&self, n: usize) {
            self.total.store(n, Ordering::SeqCst);
        }
        fn matrix_done(&self, _id: MatrixId) {
            self.done.fetch_add(1, Ordering::SeqCst);
        }
        fn cancelled(&self) -> bool {
            self.done.load(Ordering::SeqCst) >= self.stop_after
        }
    }

    fn bundled() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/all-MiniLM-L6-v2")
    }

    #[test]
    fn progress_sees_every_matrix_once_and_never_cancels_by_default() {
        assert!(!NoProgress.cancelled());
        let c = Counter {
            total: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            stop_after: usize::MAX,
        };
        let out = certify_run(
            &bundled(),
            &CertifyOptions::default(),
            &RunScope::default(),
            &c,
        )
        .unwrap();
        let (cert, _) = out.and_then(Run::into_certificate).into_result().unwrap();
        assert_eq!(c.total.load(Ordering::SeqCst), cert.matrices.len());
        assert_eq!(c.done.load(Ordering::SeqCst), cert.matrices.len());
    }

    #[test]
    fn a_cancelled_run_starts_no_further_matrix_and_says_cancelled() {
        let c = Counter {
            total: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            stop_after: 1,
        };
        let e = certify_run(
            &bundled(),
            &CertifyOptions::default(),
            &RunScope::default(),
            &c,
        )
        .expect_err("cancelled after the first matrix");
        assert!(matches!(e, CertifyError::Cancelled), "{e}");
        assert_eq!(e.to_string(), "cancelled before every matrix was certified");
        // Only the matrices already under way when the first one finished
        // (one per worker thread: the f64 method runs each matrix on one
        // thread) complete after the cancellation.
        let done = c.done.load(Ordering::SeqCst);
        let total = c.total.load(Ordering::SeqCst);
        assert!(
            done <= rayon::current_num_threads() && done < total,
            "{done} of {total} matrices done"
        );
    }
}
