//! Stage 2 (placeholder during bring-up).
use super::cluster::Group;
use super::dense::ApproxSvd;
use crate::enclosure::Inconclusive;
use faer::{MatRef, Par};
/// Placeholder.
pub fn certify_pairs(_a: MatRef<'_, f64>, _s: &ApproxSvd, _p: Par) -> Result<Vec<Group<f64>>, Inconclusive> {
    Err(Inconclusive::new("extended precision not built yet"))
}
