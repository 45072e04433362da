//! The main job: read a checkpoint, extract the proxy matrices, certify
//! their spectra and norms, evaluate the bound proxies, and assemble the
//! typed [`Certificate`]. Every interval in it is a certified enclosure.

use std::path::{Path, PathBuf};

use faer::Par;
use inari::Interval;

use crate::arch::{
    self, ArchOverrides, Architecture, MatrixId, MatrixType, ModelError, ProxyMatrix, ProxySource,
};
use crate::bounds::{self, MatrixInput, ProxyParams};
use crate::certificate::{
    BoundsEntry, CertInterval, Certificate, Contribution, FileEntry, GridPoint, Header, InitModel,
    LayerEntry, MatrixEntry, MeasuresEntry, ModelInfo, NormsEntry, Parameters, Part, RankBounds,
    RawWeightEntry, ShardSpec, SpectrumEntry, Tool, FORMAT, MAX_GRID_M, VERSION,
};
use crate::enclosure::{Enclosure, Inconclusive, IntEnclosure};
use crate::io::checkpoint::{Checkpoint, FileHash};
use crate::io::output::{OutputError, Outputs};
use crate::linalg::factored::certify_factored;
use crate::linalg::{certify_singular_values, Precision, SingularValues, SvdOptions};
use crate::progress::Progress;
use crate::shard;
use crate::spectral::{summarize, summarize_factored, SpectralSummary};

/// Options of [`certify_run`].
#[derive(Clone, Debug)]
pub struct CertifyOptions {
    /// Method for the singular values (default f64: enough for the targets).
    pub precision: Precision,
    /// `L_phi` as a decimal string (default "1.13", the GELU bound of the paper's code).
    pub l_phi: String,
    /// Grid resolution override (default `ceil(L + ln N)`).
    pub grid_m: Option<usize>,
    /// Architecture facts for a file without config.json.
    pub overrides: ArchOverrides,
}

impl Default for CertifyOptions {
    fn default() -> Self {
        Self {
            precision: Precision::F64,
            l_phi: crate::arch::PAPER_L_PHI.into(),
            grid_m: None,
            overrides: ArchOverrides::default(),
        }
    }
}

/// Why no certificate could be attempted: bad input (the model, a
/// parameter), or the caller cancelled the run. A computation that cannot
/// be certified is not an error but the [`Outcome::Inconclusive`] outcome.
#[derive(Debug)]
pub enum CertifyError {
    /// Bad model input (names the file and tensor or key).
    Model(ModelError),
    /// A bad parameter (names it).
    Param(String),
    /// The run was stopped through [`Progress::cancelled`] before it finished.
    Cancelled,
    /// A part in the resume directory that this run cannot use (names the file).
    Resume(String),
    /// A finished layer's part could not be written (names the file).
    Output(OutputError),
}

impl std::fmt::Display for CertifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertifyError::Model(e) => write!(f, "{e}"),
            CertifyError::Param(s) | CertifyError::Resume(s) => write!(f, "{s}"),
            CertifyError::Cancelled => write!(f, "cancelled before every matrix was certified"),
            CertifyError::Output(e) => write!(f, "{e}"),
        }
    }
}

// `Model` is transparent: it displays the model error and hands on that
// error's own source, so a chain printer shows each cause once.
impl std::error::Error for CertifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CertifyError::Model(e) => e.source(),
            CertifyError::Output(e) => e.source(),
            CertifyError::Param(_) | CertifyError::Resume(_) | CertifyError::Cancelled => None,
        }
    }
}

impl From<ModelError> for CertifyError {
    fn from(e: ModelError) -> Self {
        CertifyError::Model(e)
    }
}

/// What a certification run ends with: a certificate, or "inconclusive"
/// with the reason (naming the matrix). Never a wrong interval.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Every interval is a certified enclosure.
    Certified(T),
    /// Something could not be certified; the reason says what.
    Inconclusive(Inconclusive),
}

impl<T> Outcome<T> {
    /// The certified value, or `Err` with the reason.
    pub fn into_result(self) -> Result<T, Inconclusive> {
        match self {
            Outcome::Certified(t) => Ok(t),
            Outcome::Inconclusive(i) => Err(i),
        }
    }

    /// The next step on a certified value (inconclusive stays so).
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Result<U, Inconclusive>) -> Outcome<U> {
        match self {
            Outcome::Certified(t) => match f(t) {
                Ok(u) => Outcome::Certified(u),
                Err(i) => Outcome::Inconclusive(i),
            },
            Outcome::Inconclusive(i) => Outcome::Inconclusive(i),
        }
    }
}

/// Certified singular values and spectral summary of one proxy matrix.
#[derive(Clone, Debug)]
pub struct MatrixResult {
    /// Which matrix.
    pub id: MatrixId,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Certified singular values.
    pub sv: SingularValues,
    /// Certified norms and rank.
    pub summary: SpectralSummary,
}

/// Parses a positive decimal parameter into an interval containing it
/// exactly (`spectral::positive_decimal_interval`, the bounded parser).
pub fn parse_decimal(text: &str, what: &str) -> Result<Interval, CertifyError> {
    crate::spectral::positive_decimal_interval(text)
        .map_err(|e| CertifyError::Param(format!("invalid {what}: {e}")))
}

/// Checks a grid resolution against the one limit that `certify`, `verify`
/// and the certificate reader share ([`MAX_GRID_M`]).
pub fn check_grid_m(m: usize) -> Result<usize, CertifyError> {
    if m == 0 || m > MAX_GRID_M {
        return Err(CertifyError::Param(format!(
            "grid m must be between 1 and {MAX_GRID_M}, got {m}"
        )));
    }
    Ok(m)
}

/// Certifies one proxy matrix: singular values, then norms and rank.
///
/// *Guarantee: certified enclosure* of every singular value and summary
/// quantity of the exact matrix (`proofs/residual-single-pair.md`, L6, and
/// the lemmas `certify_singular_values` names; `proofs/factored-product.md`
/// for factored products; `proofs/derived-quantities.md`, L15).
pub fn certify_matrix(
    pm: &ProxyMatrix,
    opts: &SvdOptions,
) -> Result<(SingularValues, SpectralSummary), Inconclusive> {
    let wrap = |e: Inconclusive| Inconclusive::new(format!("{}: {}", pm.id, e.reason));
    match &pm.source {
        ProxySource::Factored { b, c } => {
            let sv = certify_factored(b, c, opts).map_err(wrap)?;
            let s = summarize_factored(b, c, &sv).map_err(wrap)?;
            Ok((sv, s))
        }
        ProxySource::Dense(a) => {
            let sv = certify_singular_values(a, opts).map_err(wrap)?;
            let s = summarize(a, &sv).map_err(wrap)?;
            Ok((sv, s))
        }
    }
}

/// [`certify_matrix`] on a matrix the caller gives up: a dense matrix's
/// entry norms are enclosed first, then it is prepared (scaled and oriented
/// exactly, `linalg::dense::prepare`) and dropped before its singular values
/// are certified, so that its f64 copy is not alive next to the working set
/// of the certification (docs/certify.md, "Memory").
///
/// *Guarantee: certified enclosure*, as [`certify_matrix`], by the same
/// lemmas (`linalg::certify_prepared` names those of the singular values;
/// `proofs/derived-quantities.md`, L15, and `proofs/compensated-sum.md`,
/// L12, for the summary).
pub fn certify_matrix_owned(
    pm: ProxyMatrix,
    opts: &SvdOptions,
) -> Result<(SingularValues, SpectralSummary), Inconclusive> {
    let id = pm.id;
    let wrap = |e: Inconclusive| Inconclusive::new(format!("{id}: {}", e.reason));
    match pm.source {
        ProxySource::Dense(a) => {
            let (rows, cols) = (a.rows, a.cols);
            crate::linalg::check_preparable(&a).map_err(wrap)?;
            let (frob, norms) = crate::spectral::enclose_entry_summaries(&a, opts.par);
            let frob = frob.map_err(wrap)?;
            let (n21, n11) = norms.map_err(wrap)?;
            let prep = crate::linalg::prepare_checked_owned(a).map_err(wrap)?;
            let sv = match prep {
                None => crate::linalg::zero_singular_values(rows, cols),
                Some(prep) => {
                    crate::linalg::certify_prepared(&prep, rows, cols, opts).map_err(wrap)?
                }
            };
            let s = crate::spectral::summarize_with(&sv, frob, n21, n11).map_err(wrap)?;
            Ok((sv, s))
        }
        source @ ProxySource::Factored { .. } => {
            certify_matrix(&ProxyMatrix { source, ..pm }, opts)
        }
    }
}

/// The estimated cost of certifying a matrix ([`crate::linalg::cost`]),
/// for scheduling only: a dense matrix of float16-looking entries at f64
/// by the exact-Gram route's estimate, the rest by [`matrix_cost`].
///
/// [`matrix_cost`]: crate::linalg::cost::matrix_cost
fn schedule_cost(pm: &ProxyMatrix, precision: Precision) -> u128 {
    use crate::linalg::cost;
    match &pm.source {
        ProxySource::Dense(a) if precision == Precision::F64 && cost::looks_half(&a.data) => {
            cost::exact_gram_cost(pm.rows, pm.cols)
        }
        ProxySource::Dense(_) => cost::matrix_cost(pm.rows, pm.cols, None, precision),
        ProxySource::Factored { b, .. } => {
            cost::matrix_cost(pm.rows, pm.cols, Some(b.cols), precision)
        }
    }
}

/// Certifies a batch of matrices (one layer) on the current rayon pool of
/// `T` threads. Results come back in the order given; `progress` hears of
/// each matrix as it finishes and is asked before each one starts: once it
/// says cancelled, no further matrix starts and those not started come
/// back `None`.
///
/// The schedule follows the critical path, by the one cost model
/// ([`crate::linalg::cost`]), largest first ([`split_dominant`]): a matrix
/// that costs at least `1/T` of what is left of the batch would finish
/// last on one thread whatever the others do, so it is certified alone
/// with the whole pool (`Par::rayon(T)`: the Gram product, the
/// tridiagonalization's symmetric products and panel updates, the inverse
/// iteration over clusters, the back-transformation and the residual
/// products all split over the threads), one such matrix after another.
/// The rest are certified one per thread (`opts.par`, `Par::Seq` in
/// [`certify_run`]), each thread taking the next largest when it finishes
/// one (greedy list scheduling). Every routine gives the same bits on any
/// number of threads (fixed blocking and reduction orders), so the
/// certificate does not depend on `T` (`tests/threads.rs`).
///
/// At most one matrix per thread is in flight, and each is dropped once
/// prepared ([`certify_matrix_owned`]), so memory is the batch's matrices
/// plus the working sets of as many matrices as there are threads (one,
/// while a dominant matrix runs). `after_large` is called once, when every
/// matrix costing at least `1 / LARGE_SHARE` of the batch ([`LARGE_SHARE`])
/// has finished (at once if there is none; never if cancelled before): the
/// caller reads the next batch from then on, when the largest working sets
/// are gone.
///
/// *Guarantee: certified enclosure* of every value it returns, as
/// [`certify_matrix`] (the lemmas it names).
pub fn certify_batch(
    mats: Vec<ProxyMatrix>,
    opts: &SvdOptions,
    progress: &dyn Progress,
    after_large: &(dyn Fn() + Sync),
) -> Vec<Option<Result<MatrixResult, Inconclusive>>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let n = mats.len();
    let costs: Vec<u128> = mats
        .iter()
        .map(|m| schedule_cost(m, opts.precision))
        .collect();
    let threads = rayon::current_num_threads().max(1);
    let (dominant, order) = split_dominant(&costs, threads);
    let total: u128 = costs.iter().sum();
    let is_large = |i: usize| costs[i].saturating_mul(LARGE_SHARE) >= total;
    let large_left = AtomicUsize::new((0..n).filter(|&i| is_large(i)).count());
    let after_once = std::sync::Once::new();
    let large_done = || after_once.call_once(after_large);
    if large_left.load(Ordering::Relaxed) == 0 {
        large_done();
    }
    let slots: Vec<Mutex<Option<ProxyMatrix>>> =
        mats.into_iter().map(|m| Mutex::new(Some(m))).collect();
    let results: Vec<Mutex<Option<Result<MatrixResult, Inconclusive>>>> =
        (0..n).map(|_| Mutex::new(None)).collect();
    let run_one = |i: usize, opts: &SvdOptions| {
        let pm = slots[i]
            .lock()
            .expect("no panic while holding the lock")
            .take()
            .expect("each matrix is taken once");
        let (id, rows, cols) = (pm.id, pm.rows, pm.cols);
        let done = certify_matrix_owned(pm, opts);
        progress.matrix_done(id);
        let r = done.map(|(sv, summary)| MatrixResult {
            id,
            rows,
            cols,
            sv,
            summary,
        });
        *results[i].lock().expect("no panic while holding the lock") = Some(r);
        if is_large(i) && large_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            large_done();
        }
    };
    let whole_pool = SvdOptions {
        par: if threads > 1 {
            Par::rayon(threads)
        } else {
            Par::Seq
        },
        ..*opts
    };
    for &i in &dominant {
        if progress.cancelled() {
            break;
        }
        run_one(i, &whole_pool);
    }
    let next = AtomicUsize::new(0);
    let work = || loop {
        if progress.cancelled() {
            break;
        }
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(&i) = order.get(k) else { break };
        run_one(i, opts);
    };
    let workers = threads.clamp(1, order.len().max(1));
    rayon::scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| work());
        }
    });
    results
        .into_iter()
        .map(|r| r.into_inner().expect("no panic while holding the lock"))
        .collect()
}

/// A matrix of a batch is large for [`certify_batch`]'s `after_large` when
/// it costs at least `1 / LARGE_SHARE` of the batch (by the cost model):
/// the feed-forward matrices of a layer, not its heads.
pub const LARGE_SHARE: u128 = 8;

/// The schedule of [`certify_batch`] for matrices of estimated `costs` on
/// `threads` threads: the indices certified one after another with the
/// whole pool (largest first, as long as the largest left costs at least
/// `1/threads` of all that is left), then the rest, largest first, for one
/// thread each. Ties keep the given order (a stable sort).
fn split_dominant(costs: &[u128], threads: usize) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by(|&i, &j| costs[j].cmp(&costs[i]));
    let mut left: u128 = costs.iter().sum();
    let mut k = 0;
    while k < order.len() {
        let c = costs[order[k]];
        if c.saturating_mul(threads as u128) < left {
            break;
        }
        left -= c;
        k += 1;
    }
    let rest = order.split_off(k);
    (order, rest)
}

/// Which matrices a run certifies, and where it keeps finished layers.
#[derive(Clone, Debug)]
pub struct RunScope {
    /// The shard of the model's matrices to certify ([`crate::shard`]);
    /// [`ShardSpec::WHOLE`] for all of them.
    pub shard: ShardSpec,
    /// Where each finished layer's part is written (atomically) and found
    /// again by a rerun with the same arguments, which then skips that
    /// layer ([`layer_part_name`]).
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
    /// The certificate of a run of the whole model ([`assemble`]).
    pub fn certificate(&self) -> Result<Certificate, Inconclusive> {
        assemble(&self.header, &self.spectra)
    }

    /// The certificate of a run of the whole model ([`assemble`]) with
    /// the singular values of every matrix this run certified
    /// ([`Run::results`]; empty unless [`RunScope::keep_results`]).
    pub fn into_certificate(self) -> Result<(Certificate, Vec<MatrixResult>), Inconclusive> {
        let cert = assemble(&self.header, &self.spectra)?;
        Ok((cert, self.results))
    }

    /// The part of a (shard's) run, with its digest.
    pub fn into_part(self) -> Part {
        Part::new(self.header, self.shard, self.spectra)
    }
}

/// The file name of layer `layer`'s part of shard `shard` in a resume
/// directory: `shard-K-of-N.layer-LLLLL.json`.
pub fn layer_part_name(shard: ShardSpec, layer: usize) -> String {
    format!(
        "shard-{}-of-{}.layer-{layer:05}.json",
        shard.index, shard.count
    )
}

/// The certified spectral quantities of one result, as a part holds them
/// (the same f64 ends: the conversion is exact).
pub fn spectrum_entry(r: &MatrixResult) -> SpectrumEntry {
    let nz = r.sv.values.len() - r.sv.structural_zeros;
    let s = &r.summary;
    let binary64_positive =
        r.sv.values
            .iter()
            .filter(|v| v.enclosure.lo() > 0.0)
            .count() as u64;
    SpectrumEntry {
        layer: r.id.layer,
        head: r.id.head,
        expert: r.id.expert,
        kind: r.id.kind,
        rows: r.rows,
        cols: r.cols,
        spectral_norm: CertInterval::of(&s.spectral_norm),
        frobenius_norm: CertInterval::of(&s.frobenius_norm),
        nuclear_norm: CertInterval::of(&s.nuclear_norm),
        norm_21: CertInterval::of(&s.norm_21),
        norm_11: CertInterval::of(&s.norm_11),
        stable_rank: s.stable_rank.as_ref().map(CertInterval::of),
        // The rank its binary64 values imply (`verify` re-derives it from
        // them): a value positive only by its decimal ends (below the least
        // positive double, `proofs/exact-rank.md`) is stated as its ends say.
        rank: RankBounds {
            lo: s.rank.lo.min(binary64_positive),
            hi: s.rank.hi,
        },
        singular_values: r.sv.values[..nz]
            .iter()
            .map(|v| CertInterval::of(&v.enclosure))
            .collect(),
        structural_zeros: r.sv.structural_zeros,
        method: method_list(&r.sv),
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
    let l_phi_text = opts.l_phi.trim().to_string();
    parse_decimal(&l_phi_text, "L_phi")?;
    if let Some(m) = opts.grid_m {
        check_grid_m(m)?;
    }
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    // Every layer's tensors are checked (presence, shape) before anything
    // is computed, so that a bad model fails at once, as `inspect` does.
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
    let header = run_header(
        path,
        &ck.file_hashes().map_err(ModelError::from)?,
        &arch,
        &l_phi_text,
        grid_m,
        opts.precision,
    );
    let (planned, cost_share) = shard::shard_matrices(&arch, opts.precision, scope.shard);
    let mut by_layer: Vec<Vec<MatrixId>> = vec![Vec::new(); arch.layers];
    for m in &planned {
        by_layer[m.id.layer].push(m.id);
    }
    // Read back what an earlier run finished, before computing anything.
    let mut done: Vec<Option<Vec<SpectrumEntry>>> = vec![None; arch.layers];
    if let Some(dir) = &scope.resume_dir {
        check_resume_dir(dir)?;
        for (l, ids) in by_layer.iter().enumerate() {
            if ids.is_empty() {
                continue;
            }
            let file = dir.join(layer_part_name(scope.shard, l));
            if std::fs::symlink_metadata(&file).is_ok() {
                done[l] = Some(read_layer_part(&file, &header, scope.shard, ids)?);
            }
        }
    }
    let svd_opts = SvdOptions {
        precision: opts.precision,
        par: Par::Seq, // parallel over matrices instead
        ..SvdOptions::default()
    };
    let pending: usize = by_layer
        .iter()
        .zip(&done)
        .filter(|(_, d)| d.is_none())
        .map(|(ids, _)| ids.len())
        .sum();
    progress.matrices_total(pending);
    let mut spectra = Vec::with_capacity(planned.len());
    let mut results = Vec::with_capacity(if scope.keep_results { pending } else { 0 });
    let mut certified = 0;
    let mut reused_layers = Vec::new();
    // What is read and certified, in order: each layer not read back, a
    // layer of a mixture-of-experts model one expert at a time (the
    // attention and any dense feed-forward first), so that only one
    // expert's tensors and matrices are held at once.
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
    let read = |(l, chunk): &(usize, Vec<MatrixId>)| {
        let wanted: std::collections::HashSet<MatrixId> = chunk.iter().copied().collect();
        arch::extract_layer(&ck, &arch, *l, &|id| wanted.contains(&id))
    };
    // Pipelining: the next chunk is read (and converted) on a thread of
    // its own while this one's small matrices are certified, once its
    // large ones are done ([`certify_batch`]), so memory stays near one
    // chunk's matrices plus the largest working set (docs/certify.md,
    // "Memory"). A read error surfaces when that chunk's turn comes, as
    // when reading in order.
    type Read = Result<Vec<ProxyMatrix>, ModelError>;
    let mut next_job = 0;
    let pipelined = std::thread::scope(|sc| -> Result<Option<Inconclusive>, CertifyError> {
        let mut prefetched: Option<std::thread::ScopedJoinHandle<'_, Read>> = None;
        for (l, ids) in by_layer.iter().enumerate() {
            if ids.is_empty() {
                continue;
            }
            if let Some(entries) = done[l].take() {
                spectra.extend(entries);
                reused_layers.push(l);
                continue;
            }
            let mut outcomes = Vec::with_capacity(ids.len());
            while next_job < jobs.len() && jobs[next_job].0 == l {
                let mats = match prefetched.take() {
                    Some(h) => h.join().expect("the reading thread does not panic")?,
                    None => read(&jobs[next_job])?,
                };
                next_job += 1;
                let slot = std::sync::Mutex::new(None);
                let prefetch = || {
                    if let Some(job) = jobs.get(next_job) {
                        let h = sc.spawn(move || read(job));
                        *slot.lock().expect("no panic while holding the lock") = Some(h);
                    }
                };
                let order: Vec<MatrixId> = mats.iter().map(|m| m.id).collect();
                // Largest first, each matrix dropped once certified; `None`:
                // skipped because the run was cancelled.
                let batch = certify_batch(mats, &svd_opts, progress, &prefetch);
                prefetched = slot.into_inner().expect("no panic while holding the lock");
                let Some(batch) = batch.into_iter().collect::<Option<Vec<_>>>() else {
                    return Err(CertifyError::Cancelled);
                };
                outcomes.extend(order.into_iter().zip(batch));
            }
            // In certificate order, so that the inconclusive matrix reported is
            // the first in that order, as for a layer certified in one batch.
            outcomes.sort_by_key(|(id, _)| *id);
            let layer: Vec<MatrixResult> = match outcomes.into_iter().map(|(_, r)| r).collect() {
                Ok(r) => r,
                Err(inc) => return Ok(Some(inc)),
            };
            let entries: Vec<SpectrumEntry> = layer.iter().map(spectrum_entry).collect();
            if let Some(dir) = &scope.resume_dir {
                let part = Part::new(header.clone(), scope.shard, entries.clone());
                let mut out = Outputs::new();
                out.create_dir(dir);
                out.stage(
                    dir.join(layer_part_name(scope.shard, l)),
                    part.to_json_pretty(),
                );
                out.commit().map_err(CertifyError::Output)?;
            }
            spectra.extend(entries);
            certified += layer.len();
            if scope.keep_results {
                results.extend(layer);
            }
        }
        Ok(None)
    });
    if let Some(inc) = pipelined? {
        return Ok(Outcome::Inconclusive(inc));
    }
    Ok(Outcome::Certified(Run {
        header,
        shard: scope.shard,
        spectra,
        results,
        certified,
        reused_layers,
        cost_share,
    }))
}

/// Certified norms of the matrix `A` given as its transpose `at` (`A^T`,
/// so that the sum of `at`'s column norms is `||A^T||_{2,1}`): `||A||_2` is
/// sigma_1 of the certified spectrum (L15 a, with the lemmas
/// `certify_singular_values` names), capped by the Frobenius upper bound
/// (`sigma_1 <= ||A||_F`); `||A||_F` and the (2,1)-norm from the entries.
///
/// *Guarantee: certified enclosure* of the three norms
/// (`proofs/derived-quantities.md`, L15 a, d, e; `proofs/compensated-sum.md`,
/// L12; `proofs/residual-single-pair.md`, L6, and the other lemmas of
/// `linalg::certify_singular_values`).
pub fn certify_raw_norms(
    at: &crate::matrix::DenseMatrix,
    opts: &SvdOptions,
) -> Result<bounds::measures::NormIntervals, Inconclusive> {
    certify_raw_norms_with(at, opts, None)
}

/// [`certify_raw_norms`], with `sigma_1` taken from `known` when given: an
/// enclosure of the spectral norm of `at` or of its transpose (the same
/// value), already certified (the proxy `M_in` or `M_out` is the
/// transposed raw feed-forward weight of an ungated block).
///
/// *Guarantee: certified enclosure* of the three norms, as
/// [`certify_raw_norms`] (`proofs/derived-quantities.md`, L15 a, d, e;
/// `proofs/compensated-sum.md`, L12), given that `known` encloses sigma_1.
pub fn certify_raw_norms_with(
    at: &crate::matrix::DenseMatrix,
    opts: &SvdOptions,
    known: Option<Enclosure>,
) -> Result<bounds::measures::NormIntervals, Inconclusive> {
    let (frob, n21) = raw_entry_norms(at, opts.precision)?;
    let s1 = match known {
        Some(k) => k,
        None => certify_singular_values(at, opts)?
            .values
            .first()
            .map(|v| v.enclosure)
            .ok_or_else(|| Inconclusive::new("no singular value"))?,
    };
    let spectral = Interval::try_from((s1.lo().max(0.0), s1.hi().min(frob.hi())))
        .map_err(|_| Inconclusive::new("sigma_1 and the Frobenius norm disagree"))?;
    Ok(bounds::measures::NormIntervals {
        spectral,
        frobenius: frob.to_interval(),
        norm_21_rows: n21.to_interval(),
    })
}

/// The Frobenius and (2,1) norms of `at` (the sum of its column norms)
/// from the entries, as tight as `precision` asks
/// ([`crate::spectral::enclose_entry_norms_at`]: binary64, and MPFR sums at
/// `extended` and `mpfr:N`, intersected).
///
/// *Guarantee: certified enclosures* of both norms, as
/// [`crate::spectral::enclose_entry_norms_at`] (`proofs/compensated-sum.md`,
/// L12; `proofs/mpfr-directed.md`, L13; `proofs/derived-quantities.md`,
/// L15 d, e; `proofs/sorting-lemma.md`, L10 b).
fn raw_entry_norms(
    at: &crate::matrix::DenseMatrix,
    precision: Precision,
) -> Result<(Enclosure, Enclosure), Inconclusive> {
    let (frob, n21, _) = crate::spectral::enclose_entry_norms_at(at, precision)?;
    Ok((frob, n21))
}

/// Certified norms of `A - A0`, both given transposed: `D = fl(A - A0)` and
/// its rounding error `E = (A - A0) - D`, exact by TwoSum, entry by entry;
/// the norms of `D` are certified as [`certify_raw_norms`] does, and widened
/// by those of `E` (triangle inequality; Weyl for sigma_1). `E` is exactly 0
/// (no widening) whenever every pair of entries is close enough in
/// exponent, which holds for float32 weights whose exponents differ by at
/// most 29.
///
/// *Guarantee: certified enclosure* of the three norms of the exact
/// difference (`proofs/exact-difference.md`, L25; `proofs/compensated-sum.md`,
/// L12 a; `proofs/weyl.md`, L9; and the lemmas of [`certify_raw_norms`]).
pub fn certify_distance_norms(
    at: &crate::matrix::DenseMatrix,
    a0t: &crate::matrix::DenseMatrix,
    opts: &SvdOptions,
) -> Result<bounds::measures::NormIntervals, Inconclusive> {
    use crate::linalg::rounding as r;
    if (at.rows, at.cols) != (a0t.rows, a0t.cols) {
        return Err(Inconclusive::new(format!(
            "the initialisation is {}x{}, the weight {}x{}",
            a0t.cols, a0t.rows, at.cols, at.rows
        )));
    }
    if at.data.iter().chain(&a0t.data).any(|x| !x.is_finite()) {
        return Err(Inconclusive::new("matrix has non-finite entries"));
    }
    let mut d = Vec::with_capacity(at.data.len());
    let mut e = Vec::with_capacity(at.data.len());
    for (&a, &b) in at.data.iter().zip(&a0t.data) {
        let (s, err) = crate::linalg::eft::two_sum(a, -b);
        d.push(s);
        e.push(err);
    }
    if d.iter().any(|x| !x.is_finite()) {
        return Err(Inconclusive::new("the difference overflowed"));
    }
    let dm = crate::matrix::DenseMatrix {
        rows: at.rows,
        cols: at.cols,
        data: d,
    };
    let base = if dm.data.iter().all(|&x| x == 0.0) {
        let z = Interval::try_from((0.0, 0.0)).expect("finite");
        bounds::measures::NormIntervals {
            spectral: z,
            frobenius: z,
            norm_21_rows: z,
        }
    } else {
        certify_raw_norms(&dm, opts)?
    };
    if e.iter().all(|&x| x == 0.0) {
        return Ok(base);
    }
    let em = crate::matrix::DenseMatrix {
        rows: at.rows,
        cols: at.cols,
        data: e,
    };
    let ef = crate::spectral::enclose_frobenius_from_entries(&em)?.hi();
    let (en21, _) = crate::spectral::enclose_entry_norms(&em)?;
    let widen = |x: Interval, by: f64| {
        Interval::try_from((r::sub_rd(x.inf(), by).max(0.0), r::add_ru(x.sup(), by)))
            .map_err(|_| Inconclusive::new("the difference's norms overflowed"))
    };
    Ok(bounds::measures::NormIntervals {
        spectral: widen(base.spectral, ef)?,
        frobenius: widen(base.frobenius, ef)?,
        norm_21_rows: widen(base.norm_21_rows, en21.hi())?,
    })
}

/// What [`certify_measures`] certified: the raw weights' norms, the
/// measures computed from them, and the initialisation read.
#[derive(Clone, Debug)]
pub struct MeasuresRun {
    /// One entry per raw weight matrix, layer then role order.
    pub raw_weights: Vec<RawWeightEntry>,
    /// The measures.
    pub measures: MeasuresEntry,
    /// The initialisation (with `init`).
    pub init_model: Option<InitModel>,
}

impl MeasuresRun {
    /// Adds the raw weights, the measures and the initialisation to `cert`
    /// (a certificate without a bound keeps its version, which allows them).
    pub fn attach(self, cert: &mut Certificate) {
        if cert.version != crate::certificate::VERSION_NO_BOUND {
            cert.version = crate::certificate::VERSION_MEASURES;
        }
        cert.raw_weights = Some(self.raw_weights);
        cert.measures = Some(self.measures);
        cert.init_model = self.init_model;
    }
}

/// Checks that the initialisation has the model's architecture (family,
/// layout and every width); the error is one line naming the first fact
/// that differs.
fn check_same_architecture(
    init: &Path,
    a: &Architecture,
    a0: &Architecture,
) -> Result<(), CertifyError> {
    let facts = |x: &Architecture| {
        [
            ("family", x.family.clone()),
            ("layout", x.layout().to_string()),
            ("layers", x.layers.to_string()),
            ("hidden size", x.hidden.to_string()),
            ("heads", x.heads.to_string()),
            ("key/value heads", x.kv_heads.to_string()),
            ("head dimension", x.head_dim.to_string()),
            ("feed-forward width", x.intermediate.to_string()),
        ]
    };
    for ((what, m), (_, i)) in facts(a).into_iter().zip(facts(a0)) {
        if m != i {
            return Err(CertifyError::Param(format!(
                "{}: the initialisation is not the model's architecture: {what} {} (the model's: {})",
                init.display(),
                crate::arch::clean(&i),
                crate::arch::clean(&m)
            )));
        }
    }
    Ok(())
}

/// Refuses an initialisation `init` whose architecture is not the model's
/// at `path` (one line naming the first fact that differs), before anything
/// is computed; `certify --init` calls it first.
pub fn check_init_architecture(
    path: &Path,
    init: &Path,
    opts: &CertifyOptions,
) -> Result<(), CertifyError> {
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    let ck0 = Checkpoint::open(init).map_err(ModelError::from)?;
    let a0 = arch::detect(&ck0, &opts.overrides)?;
    // Named as the checkpoint names itself: `<memory>` for tensors in
    // memory, whose key is no path to show.
    check_same_architecture(ck0.path(), &arch, &a0)?;
    arch::describe(&ck0, &a0)?;
    Ok(())
}

/// The norm-based measures of a model (`docs/measures.md`): every raw
/// weight matrix of its blocks is read through the layer recipes
/// (`arch::extract_raw_layer`), its spectral norm, Frobenius norm and
/// row-(2,1) norm certified ([`certify_raw_norms`]), a layer at a time
/// (its matrices in parallel), and the measures evaluated from the
/// certified norms as the certificate states them. With `init`, a
/// checkpoint of the same architecture (refused otherwise), the distances
/// `W - W0` are certified as well ([`certify_distance_norms`]) and the
/// measures that need them added.
///
/// *Guarantee: certified enclosure* of every norm and measure
/// ([`certify_raw_norms`], [`certify_distance_norms`],
/// `bounds::measures::evaluate`, `proofs/measures.md`, L26); `Err` for bad
/// input, [`Outcome::Inconclusive`] when a norm or a required measure could
/// not be certified.
pub fn certify_measures(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    progress: &dyn Progress,
) -> Result<Outcome<MeasuresRun>, CertifyError> {
    certify_measures_reusing(path, init, opts, None, progress)
}

/// [`certify_measures`], reusing the certified spectral norms of the proxy
/// matrices `M_in` and `M_out` of `proxies` (a certificate of the same
/// weight files, e.g. the one `certify` has just made) for the raw
/// feed-forward weights of an ungated block, which are their transposes
/// (`M_in = W_in^T`, `M_out = W_out^T`): their spectra are then not
/// certified a second time. A certificate of other files (hashes) or
/// shapes is not used.
///
/// *Guarantee: certified enclosure*, as [`certify_measures`] (the lemmas
/// it names), given that the proxies' spectral norms are enclosures.
pub fn certify_measures_reusing(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    proxies: Option<&Certificate>,
    progress: &dyn Progress,
) -> Result<Outcome<MeasuresRun>, CertifyError> {
    let sigma = |id: MatrixId| {
        proxies
            .and_then(|c| c.matrix(id))
            .map(|e| (e.rows, e.cols, e.spectral_norm))
    };
    let files = proxies.map(|c| c.model.files.as_slice());
    let raw = match certify_raw_weights(path, init, opts, &|_, _| true, files, &sigma, progress)? {
        Outcome::Certified(r) => r,
        Outcome::Inconclusive(inc) => return Ok(Outcome::Inconclusive(inc)),
    };
    Ok(
        match measures_of_raw_weights(&raw.raw_weights, raw.init_model.is_some()) {
            Ok(measures) => Outcome::Certified(MeasuresRun {
                raw_weights: raw.raw_weights,
                measures,
                init_model: raw.init_model,
            }),
            Err(inc) => Outcome::Inconclusive(inc),
        },
    )
}

/// The raw weights one run certified (all of them, or a shard's), with the
/// initialisation read.
#[derive(Clone, Debug)]
pub struct RawWeightsRun {
    /// Layer then role order.
    pub raw_weights: Vec<RawWeightEntry>,
    /// The initialisation (with `init`).
    pub init_model: Option<InitModel>,
}

/// The raw weights of shard `shard` of a sharded run with measures
/// ([`shard::raw_shards`]), certified as [`certify_measures_reusing`]
/// certifies them, reusing the certified sigma_1 of the proxies `M_in`,
/// `M_out` of `spectra` (the shard's own proxies, which [`shard::raw_shards`]
/// makes hold every proxy reused), so that the entries are those of an
/// unsharded run. `merge` computes the measures from the entries of all
/// shards.
///
/// *Guarantee: certified enclosure* of every norm, as
/// [`certify_measures_reusing`].
pub fn certify_shard_raw_weights(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    header: &Header,
    shard: ShardSpec,
    spectra: &[SpectrumEntry],
    progress: &dyn Progress,
) -> Result<Outcome<RawWeightsRun>, CertifyError> {
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    let raws = shard::raw_plan(&header.model, arch.gated());
    let of = shard::raw_shards(&arch, opts.precision, &raws, shard.count);
    let mine: Vec<(usize, arch::Role)> = raws
        .iter()
        .zip(&of)
        .filter(|(_, s)| **s + 1 == shard.index)
        .map(|(r, _)| (r.layer, r.role))
        .collect();
    let sigma = |id: MatrixId| {
        spectra
            .iter()
            .find(|e| e.id() == id)
            .map(|e| (e.rows, e.cols, e.spectral_norm))
    };
    certify_raw_weights(
        path,
        init,
        opts,
        &|l, r| mine.contains(&(l, r)),
        Some(&header.model.files),
        &sigma,
        progress,
    )
}

/// The raw weights `want` selects (by layer and role), certified
/// ([`certify_raw_norms_with`], [`certify_distance_norms`] with `init`),
/// reusing `sigma(id)`, a proxy's `(rows, cols, certified sigma_1)`, for the
/// raw feed-forward weights of an ungated block when `proxy_files` are
/// this model's weight files and the shape is the transpose's.
///
/// *Guarantee: certified enclosure* of every norm, as
/// [`certify_measures_reusing`].
#[allow(clippy::too_many_arguments)]
fn certify_raw_weights(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    want: &(dyn Fn(usize, arch::Role) -> bool + Sync),
    proxy_files: Option<&[FileEntry]>,
    sigma: &(dyn Fn(MatrixId) -> Option<(usize, usize, CertInterval)> + Sync),
    progress: &dyn Progress,
) -> Result<Outcome<RawWeightsRun>, CertifyError> {
    use rayon::prelude::*;
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    arch::describe(&ck, &arch)?;
    let hashes: Vec<FileEntry> = ck
        .file_hashes()
        .map_err(ModelError::from)?
        .iter()
        .map(|h| FileEntry {
            file: h.file.clone(),
            sha256: h.sha256.clone(),
        })
        .collect();
    let reuse = proxy_files.is_some_and(|f| f == hashes.as_slice()) && !arch.gated();
    let known = |l: usize, w: &arch::RawWeight| -> Option<Enclosure> {
        let kind = match w.role {
            arch::Role::FfnIn => MatrixType::MIn,
            arch::Role::FfnOut => MatrixType::MOut,
            _ => return None,
        };
        if !reuse {
            return None;
        }
        let (rows, cols, s) = sigma(MatrixId::layer(l, kind))?;
        ((rows, cols) == (w.in_dim(), w.out_dim()))
            .then(|| Enclosure::new(s.lo, s.hi))
            .flatten()
    };
    let init_ck = match init {
        None => None,
        Some(p) => {
            let ck0 = Checkpoint::open(p).map_err(ModelError::from)?;
            let a0 = arch::detect(&ck0, &opts.overrides)?;
            check_same_architecture(ck0.path(), &arch, &a0)?;
            arch::describe(&ck0, &a0)?;
            Some((p, ck0, a0))
        }
    };
    let svd_opts = SvdOptions {
        precision: opts.precision,
        par: Par::Seq,
        ..SvdOptions::default()
    };
    let mut raw_weights = Vec::new();
    for l in 0..arch.layers {
        if progress.cancelled() {
            return Err(CertifyError::Cancelled);
        }
        let raw: Vec<arch::RawWeight> = arch::extract_raw_layer(&ck, &arch, l)?
            .into_iter()
            .filter(|w| want(l, w.role))
            .collect();
        if raw.is_empty() {
            continue;
        }
        let raw0 = match &init_ck {
            Some((_, ck0, a0)) => Some(
                arch::extract_raw_layer(ck0, a0, l)?
                    .into_iter()
                    .filter(|w| want(l, w.role))
                    .collect::<Vec<_>>(),
            ),
            None => None,
        };
        let done: Vec<Result<_, Inconclusive>> = raw
            .par_iter()
            .enumerate()
            .map(|(k, w)| {
                let what = format!("layer {l} {}", w.role.name());
                let wrap = |e: Inconclusive| Inconclusive::new(format!("{what}: {}", e.reason));
                let n =
                    certify_raw_norms_with(&w.transposed, &svd_opts, known(l, w)).map_err(wrap)?;
                let d = match &raw0 {
                    Some(r0) => Some(
                        certify_distance_norms(&w.transposed, &r0[k].transposed, &svd_opts)
                            .map_err(|e| {
                                Inconclusive::new(format!(
                                    "{what} minus its initialisation: {}",
                                    e.reason
                                ))
                            })?,
                    ),
                    None => None,
                };
                Ok((n, d))
            })
            .collect();
        for (w, r) in raw.iter().zip(done) {
            let (n, d) = match r {
                Ok(x) => x,
                Err(inc) => return Ok(Outcome::Inconclusive(inc)),
            };
            let what = format!("layer {l} {}", w.role.name());
            let entry = |x: &bounds::measures::NormIntervals| -> Result<NormsEntry, Inconclusive> {
                Ok(NormsEntry {
                    spectral_norm: iv(x.spectral, &format_args!("{what}: the spectral norm"))?,
                    frobenius_norm: iv(x.frobenius, &format_args!("{what}: the Frobenius norm"))?,
                    norm_21_rows: iv(x.norm_21_rows, &format_args!("{what}: the (2,1)-norm"))?,
                })
            };
            let ne = match entry(&n) {
                Ok(e) => e,
                Err(inc) => return Ok(Outcome::Inconclusive(inc)),
            };
            let de = match d.as_ref().map(entry).transpose() {
                Ok(e) => e,
                Err(inc) => return Ok(Outcome::Inconclusive(inc)),
            };
            raw_weights.push(RawWeightEntry {
                layer: l,
                role: w.role.name().to_string(),
                tensor: w.tensor.clone(),
                rows: w.out_dim(),
                cols: w.in_dim(),
                spectral_norm: ne.spectral_norm,
                frobenius_norm: ne.frobenius_norm,
                norm_21_rows: ne.norm_21_rows,
                init_distance: de,
            });
        }
    }
    let init_model = match &init_ck {
        Some((p, ck0, _)) => Some(InitModel {
            path: p.display().to_string(),
            files: ck0
                .file_hashes()
                .map_err(ModelError::from)?
                .iter()
                .map(|h| FileEntry {
                    file: h.file.clone(),
                    sha256: h.sha256.clone(),
                })
                .collect(),
        }),
        None => None,
    };
    Ok(Outcome::Certified(RawWeightsRun {
        raw_weights,
        init_model,
    }))
}

/// The measures of the certified raw weights `raw` (every raw weight of a
/// model, in certificate order), with the distance measures when `init`
/// (every entry then states its distance): [`measures_entry`] of their
/// stated norms. `certify`, `merge` and `verify` evaluate them so.
///
/// *Guarantee: certified enclosure* of every measure given enclosures
/// (`proofs/measures.md`, L26); inconclusive as [`measures_entry`], or
/// when `init` and an entry states no distance.
pub fn measures_of_raw_weights(
    raw: &[RawWeightEntry],
    init: bool,
) -> Result<MeasuresEntry, Inconclusive> {
    let norms: Vec<NormsEntry> = raw.iter().map(RawWeightEntry::norms).collect();
    let dists: Option<Vec<NormsEntry>> = if init {
        Some(
            raw.iter()
                .map(|w| {
                    w.init_distance.ok_or_else(|| {
                        Inconclusive::new(format!(
                            "layer {} {}: no distance to the initialisation",
                            w.layer, w.role
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
        )
    } else {
        None
    };
    measures_entry(&norms, dists.as_deref())
}

/// The measures of the certified norms `norms` (and the distances `dist`,
/// index-matched, with an initialisation), as a certificate states them:
/// evaluated from exactly the intervals stated (`bounds::measures`). A
/// measure that is not finite (-inf or undefined for a weight that may be
/// 0, or beyond binary64's range) is absent, with the reason in
/// `absent`; every other measure is still stated.
///
/// *Guarantee: certified enclosure* of every measure stated, given
/// enclosures (`proofs/measures.md`, L26); inconclusive only when a stated
/// norm is not an interval.
pub fn measures_entry(
    norms: &[NormsEntry],
    dist: Option<&[NormsEntry]>,
) -> Result<MeasuresEntry, Inconclusive> {
    use bounds::measures::{evaluate, evaluate_init, NormIntervals};
    let to = |n: &NormsEntry| -> Result<NormIntervals, Inconclusive> {
        let bad = || Inconclusive::new("a stated norm is not an interval");
        Ok(NormIntervals {
            spectral: n.spectral_norm.to_inari().ok_or_else(bad)?,
            frobenius: n.frobenius_norm.to_inari().ok_or_else(bad)?,
            norm_21_rows: n.norm_21_rows.to_inari().ok_or_else(bad)?,
        })
    };
    let w: Vec<NormIntervals> = norms.iter().map(to).collect::<Result<_, _>>()?;
    let m = evaluate(&w);
    let mut absent = std::collections::BTreeMap::new();
    let zero = |at: &str, n: &[NormIntervals], f: fn(&NormIntervals) -> Interval, what: &str| {
        n.iter().position(|x| f(x).inf() <= 0.0).map(|i| {
            format!("{at}[{i}]: the {what} is not certified positive (it may be 0, where the measure is -inf or undefined)")
        })
    };
    let spec = zero("raw_weights", &w, |x| x.spectral, "spectral norm");
    let fro = zero("raw_weights", &w, |x| x.frobenius, "Frobenius norm");
    let mut get = |x: Interval, name: &str, why: &Option<String>| {
        let v = CertInterval::of_inari(x);
        if v.is_none() {
            let r = why.clone().unwrap_or_else(|| {
                "not finite in binary64 (beyond its range, or undefined)".into()
            });
            absent.insert(name.to_string(), r);
        }
        v
    };
    let mut out = MeasuresEntry {
        d: w.len(),
        log_prod_of_spec: get(m.log_prod_of_spec, "log_prod_of_spec", &spec),
        log_sum_of_spec: get(m.log_sum_of_spec, "log_sum_of_spec", &spec),
        log_prod_of_fro: get(m.log_prod_of_fro, "log_prod_of_fro", &fro),
        log_sum_of_fro: get(m.log_sum_of_fro, "log_sum_of_fro", &fro),
        param_norm: get(m.param_norm, "param_norm", &None),
        log_spec_orig: get(m.log_spec_orig, "log_spec_orig", &spec),
        bartlett: get(m.bartlett, "bartlett", &spec),
        log_bartlett: get(m.log_bartlett, "log_bartlett", &spec),
        frobenius_distance: None,
        dist_spec_init: None,
        log_spec_init: None,
        bartlett_init: None,
        log_bartlett_init: None,
        absent: Default::default(),
    };
    if let Some(dist) = dist {
        let e: Vec<NormIntervals> = dist.iter().map(to).collect::<Result<_, _>>()?;
        let i = evaluate_init(&w, &e);
        let dfro = zero("raw_weights", &w, |x| x.spectral, "spectral norm").or_else(|| {
            (e.iter().all(|x| x.frobenius.inf() <= 0.0)).then(|| {
                "every distance to the initialisation may be 0 (the log is -inf)".to_string()
            })
        });
        out.frobenius_distance = get(i.frobenius_distance, "frobenius_distance", &None);
        out.dist_spec_init = get(i.dist_spec_init, "dist_spec_init", &None);
        out.log_spec_init = get(i.log_spec_init, "log_spec_init", &dfro);
        out.bartlett_init = get(i.bartlett_init, "bartlett_init", &spec);
        out.log_bartlett_init = get(i.log_bartlett_init, "log_bartlett_init", &dfro);
    }
    out.absent = absent;
    Ok(out)
}

/// Refuses a resume directory that exists as something else.
fn check_resume_dir(dir: &Path) -> Result<(), CertifyError> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(CertifyError::Resume(format!(
            "{}: the resume directory exists and is not a directory",
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Reads back a layer's part from a resume directory: it must be a valid
/// part of this program's version, for this model (hashes, architecture),
/// these parameters and this shard, holding exactly the matrices `ids`.
fn read_layer_part(
    file: &Path,
    header: &Header,
    shard: ShardSpec,
    ids: &[MatrixId],
) -> Result<Vec<SpectrumEntry>, CertifyError> {
    let refuse = |why: String| {
        CertifyError::Resume(format!(
            "{}: {why}; remove it or choose another --resume-dir",
            file.display()
        ))
    };
    let part = Part::read(file).map_err(|e| CertifyError::Resume(e.to_string()))?;
    if let Some((_, d)) = part.header().difference(header) {
        return Err(refuse(format!("written by another run: {d} as here")));
    }
    if part.shard != shard {
        return Err(refuse(format!(
            "written by another run (shard {}, this run is shard {shard})",
            part.shard
        )));
    }
    if !part
        .matrices
        .iter()
        .map(SpectrumEntry::id)
        .eq(ids.iter().copied())
    {
        let first = part
            .matrices
            .first()
            .map_or_else(|| "nothing".to_string(), |m| format!("{} first", m.id()));
        return Err(refuse(format!(
            "holds {} matrices ({first}), not the {} matrices of layer {} in shard {shard}",
            part.matrices.len(),
            ids.len(),
            ids[0].layer
        )));
    }
    Ok(part.matrices)
}

fn iv(x: Interval, what: &dyn std::fmt::Display) -> Result<CertInterval, Inconclusive> {
    CertInterval::of_inari(x).ok_or_else(|| Inconclusive::new(format!("{what} overflowed f64")))
}

/// The method names of a matrix's values (sorted, distinct), followed by
/// the notes of stages that failed.
fn method_list(sv: &SingularValues) -> Vec<String> {
    let mut methods: Vec<String> = sv.values.iter().map(|v| v.method.name()).collect();
    methods.sort();
    methods.dedup();
    // A stage that failed, was skipped or fell short is said, not hidden.
    methods.extend(sv.notes.iter().map(|n| format!("note: {n}")));
    methods
}

/// The program, model, parameters and extensions of a run.
pub fn run_header(
    path: &Path,
    hashes: &[FileHash],
    arch: &Architecture,
    l_phi_text: &str,
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
            files: hashes
                .iter()
                .map(|h| FileEntry {
                    file: h.file.clone(),
                    sha256: h.sha256.clone(),
                })
                .collect(),
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
            l_phi: l_phi_text.to_string(),
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
        extensions: arch.extensions(l_phi_text),
    }
}

/// The certificate of a model from the certified spectral quantities of
/// every one of its proxy matrices: the one place where the proxies and
/// bounds are computed, for `certify` and `merge` alike, so that a merged
/// certificate is the unsharded run's, number for number.
///
/// *Guarantee: certified enclosure* of every proxy and bound, given
/// enclosures as inputs (`bounds::evaluate`, `proofs/proxy-formulas.md`,
/// L18); inconclusive when a proxy overflows f64, or when `spectra` is not
/// one entry per matrix of the model (in any order).
///
/// For a family whose block the paper's reasoning does not cover
/// ([`crate::arch::families::bound_absent_reason`] of the model's
/// architecture), no proxy and no bound is computed: the certificate
/// ([`crate::certificate::VERSION_NO_BOUND`]) states the given spectra, in
/// certificate order, and the family's reason.
pub fn assemble(header: &Header, spectra: &[SpectrumEntry]) -> Result<Certificate, Inconclusive> {
    let md = &header.model;
    let mut order: Vec<&SpectrumEntry> = spectra.iter().collect();
    order.sort_by_key(|e| e.id());
    let expected = crate::certificate::expected_ids(md);
    if !order.iter().map(|e| e.id()).eq(expected.iter().copied()) {
        return Err(Inconclusive::new(format!(
            "{} matrix entries are not the {} matrices of the model, once each",
            spectra.len(),
            expected.len()
        )));
    }
    if let Some(reason) = crate::arch::families::bound_absent_reason(
        &md.architecture,
        header.parameters.stack.as_ref().map(|s| s.name.as_str()),
    ) {
        return Ok(Certificate {
            format: FORMAT.into(),
            version: crate::certificate::VERSION_NO_BOUND,
            tool: header.tool.clone(),
            model: header.model.clone(),
            parameters: header.parameters.clone(),
            matrices: Vec::new(),
            layers: Vec::new(),
            bounds: None,
            bound_absent: Some(reason.to_string()),
            spectra: Some(order.into_iter().cloned().collect()),
            extensions: header.extensions.clone(),
            init_model: None,
            raw_weights: None,
            measures: None,
        });
    }
    // A bound is made of the paper's families only (a cross-attention is in
    // no family with a bound; the table test): never form one otherwise.
    if let Some(e) = order
        .iter()
        .find(|e| !bounds::BOUND_KINDS.contains(&e.kind))
    {
        return Err(Inconclusive::new(format!(
            "{}: not one of the paper's matrices, and the family has a bound",
            e.id()
        )));
    }
    let p = &header.parameters;
    let l_phi = crate::spectral::positive_decimal_interval(&p.l_phi)
        .map_err(|e| Inconclusive::new(format!("invalid L_phi: {e}")))?;
    let params = ProxyParams {
        l_phi_text: p.l_phi.clone(),
        l_phi,
        grid_m: p.grid_m,
    };
    let enc = |x: &CertInterval, id: MatrixId, what: &str| {
        Enclosure::new(x.lo, x.hi)
            .ok_or_else(|| Inconclusive::new(format!("{id}: {what} is not an interval")))
    };
    let mut values = Vec::with_capacity(order.len());
    let mut inputs_meta = Vec::with_capacity(order.len());
    for e in &order {
        let id = e.id();
        values.push(
            e.singular_values
                .iter()
                .map(|x| enc(x, id, "a singular value"))
                .collect::<Result<Vec<Enclosure>, _>>()?,
        );
        inputs_meta.push((
            id,
            enc(&e.spectral_norm, id, "the spectral norm")?,
            enc(&e.norm_21, id, "the (2,1)-norm")?,
            IntEnclosure {
                lo: e.rank.lo,
                hi: e.rank.hi,
            },
        ));
    }
    let inputs: Vec<MatrixInput<'_>> = inputs_meta
        .iter()
        .zip(&values)
        .map(|(&(id, spectral_norm, norm_21, rank), v)| MatrixInput {
            id,
            singular_values: v,
            spectral_norm,
            norm_21,
            rank,
        })
        .collect();
    let proxies = bounds::evaluate(&inputs, md.layers, md.heads, md.hidden, &params);
    let m = params.grid_m;
    let mut matrices = Vec::with_capacity(order.len());
    for (e, px) in order.iter().zip(&proxies.matrices) {
        let id = e.id();
        let contributions = px
            .contributions
            .iter()
            .map(|(k, c)| {
                let g = GridPoint { k: *k, m };
                Ok(Contribution {
                    p: g.approx(),
                    p_fraction: g,
                    value: iv(*c, &format_args!("{id}: the contribution at p = {g}"))?,
                })
            })
            .collect::<Result<Vec<_>, Inconclusive>>()?;
        let p_opt_fraction: Vec<GridPoint> = px.p_opt.iter().map(|&k| GridPoint { k, m }).collect();
        matrices.push(MatrixEntry {
            layer: e.layer,
            head: e.head,
            expert: e.expert,
            kind: e.kind,
            rows: e.rows,
            cols: e.cols,
            spectral_norm: e.spectral_norm,
            frobenius_norm: e.frobenius_norm,
            nuclear_norm: e.nuclear_norm,
            norm_21: e.norm_21,
            norm_11: e.norm_11,
            stable_rank: e.stable_rank,
            rank: e.rank,
            singular_values: e.singular_values.clone(),
            structural_zeros: e.structural_zeros,
            method: e.method.clone(),
            alpha: iv(px.alpha, &format_args!("{id}: alpha"))?,
            gamma: iv(px.gamma, &format_args!("{id}: gamma"))?,
            scale: iv(px.scale, &format_args!("{id}: gamma alpha L"))?,
            contributions,
            p_opt: p_opt_fraction.iter().map(GridPoint::approx).collect(),
            p_opt_fraction,
            min_contribution: iv(
                px.min_contribution,
                &format_args!("{id}: the minimum contribution"),
            )?,
        });
    }
    let layers = proxies
        .layers
        .iter()
        .enumerate()
        .map(|(l, x)| {
            Ok(LayerEntry {
                layer: l,
                alpha: iv(x.alpha, &format_args!("layer {l} alpha"))?,
                xi: iv(x.xi, &format_args!("layer {l} xi"))?,
            })
        })
        .collect::<Result<Vec<_>, Inconclusive>>()?;
    Ok(Certificate {
        format: FORMAT.into(),
        version: VERSION,
        tool: header.tool.clone(),
        model: header.model.clone(),
        parameters: header.parameters.clone(),
        matrices,
        layers,
        bounds: Some(BoundsEntry {
            ours: iv(proxies.ours, &"B_ours")?,
            edelman: iv(proxies.edelman, &"B_Edel")?,
        }),
        bound_absent: None,
        spectra: None,
        extensions: header.extensions.clone(),
        init_model: None,
        raw_weights: None,
        measures: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn split_dominant_gives_the_whole_pool_to_the_critical_path_only() {
        // The cost model's shape of a LLaMA-7B layer: M_in, a small
        // matrix, M_out, then 64 heads.
        let costs: Vec<u128> = [2770u128, 30, 1660]
            .into_iter()
            .chain(std::iter::repeat_n(12u128, 64))
            .collect();
        // One thread: nothing is worth splitting but a lone matrix.
        let (dom, rest) = split_dominant(&costs, 1);
        assert!(dom.is_empty());
        assert_eq!(&rest[..3], &[0, 2, 1]);
        // Two threads: M_in (2770 of 5228) and then M_out (1660 of 2458)
        // each cost at least half of what is left; the rest do not.
        let mut rest = vec![1];
        rest.extend(3..67);
        assert_eq!(split_dominant(&costs, 2), (vec![0, 2], rest));
        // Sixteen threads: the same two; a lone matrix always.
        assert_eq!(split_dominant(&costs, 16).0, vec![0, 2]);
        assert_eq!(split_dominant(&[7], 4), (vec![0], vec![]));
        // Equal costs: nothing dominates.
        assert!(split_dominant(&[5; 8], 4).0.is_empty());
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
