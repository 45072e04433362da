//! The lemmas every enclosure rests on, one page each: the files of
//! `proofs/`, brought into the library's documentation so that the lemma
//! citations of doc comments link to them. Each page states the lemma,
//! proves it and lists its floating-point assumptions; the floating-point
//! lemmas are also checked by Coq (`proofs/coq/`, run by `proofs/check` in
//! CI). [`crate::guarantees`] says which guarantee rests on which lemma.
//!
//! Documentation only: nothing here is code.

// The pages are Markdown with LaTeX math: their brackets (`[l_i, u_i]`)
// and angle signs are mathematics, not intra-doc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

/// A0: Floating-point model and environment assumptions (`proofs/assumptions.md`).
pub mod assumptions {
    #![doc = include_str!("../proofs/assumptions.md")]
}

/// L5: Collatz–Wielandt upper bound for the spectral norm of |A| (`proofs/collatz-bound.md`).
pub mod collatz_bound {
    #![doc = include_str!("../proofs/collatz-bound.md")]
}

/// L12: Error-free transformations and compensated summation (Sum2 / Dot2) (`proofs/compensated-sum.md`).
pub mod compensated_sum {
    #![doc = include_str!("../proofs/compensated-sum.md")]
}

/// L15: Derived quantities from index-matched enclosures (`proofs/derived-quantities.md`).
pub mod derived_quantities {
    #![doc = include_str!("../proofs/derived-quantities.md")]
}

/// L35: What a device backend must compute, and how the code checks it (`proofs/device-arithmetic.md`).
pub mod device_arithmetic {
    #![doc = include_str!("../proofs/device-arithmetic.md")]
}

/// L4: A priori error of floating-point matrix products in any order, with underflow (`proofs/dot-product-error.md`).
pub mod dot_product_error {
    #![doc = include_str!("../proofs/dot-product-error.md")]
}

/// L1: Exact conversion of binary16, bfloat16 and binary32 inputs to binary64 (`proofs/exact-conversion.md`).
pub mod exact_conversion {
    #![doc = include_str!("../proofs/exact-conversion.md")]
}

/// L38: Exact int8 dequantization: ONNX `DequantizeLinear` of 8-bit weights with a binary32 scale (`proofs/exact-dequantize.md`).
pub mod exact_dequantize {
    #![doc = include_str!("../proofs/exact-dequantize.md")]
}

/// L25: Exact differences of stored weights, and the norms of `W - W0` (`proofs/exact-difference.md`).
pub mod exact_difference {
    #![doc = include_str!("../proofs/exact-difference.md")]
}

/// L23: A Gram matrix computed exactly by any floating-point evaluation (`proofs/exact-gram.md`).
pub mod exact_gram {
    #![doc = include_str!("../proofs/exact-gram.md")]
}

/// L39: Entry norms from exact integer sums on a grid (`proofs/exact-integer-sums.md`).
pub mod exact_integer_sums {
    #![doc = include_str!("../proofs/exact-integer-sums.md")]
}

/// L30: Exact kernel certificates bound the rank from above (`proofs/exact-kernel.md`).
pub mod exact_kernel {
    #![doc = include_str!("../proofs/exact-kernel.md")]
}

/// L31: Exact LayerScale folding: products of two narrow floats are binary64 numbers (`proofs/exact-layerscale.md`).
pub mod exact_layerscale {
    #![doc = include_str!("../proofs/exact-layerscale.md")]
}

/// L37: An exact nonsingular submatrix bounds the rank and the r-th singular value from below (`proofs/exact-rank.md`).
pub mod exact_rank {
    #![doc = include_str!("../proofs/exact-rank.md")]
}

/// L14: Singular values of a factored matrix A = B C (`proofs/factored-product.md`).
pub mod factored_product {
    #![doc = include_str!("../proofs/factored-product.md")]
}

/// L19: GGUF tensor types decode exactly into binary64 (`proofs/gguf-exact-decode.md`).
pub mod gguf_exact_decode {
    #![doc = include_str!("../proofs/gguf-exact-decode.md")]
}

/// L24: Eigenvalue residual bound with cluster counting, and singular values as square roots (`proofs/gram-eigen.md`).
pub mod gram_eigen {
    #![doc = include_str!("../proofs/gram-eigen.md")]
}

/// L17: Kato–Temple refinement for isolated singular values (`proofs/kato-temple.md`).
pub mod kato_temple {
    #![doc = include_str!("../proofs/kato-temple.md")]
}

/// L26: The norm-based measures, evaluated in interval arithmetic (`proofs/measures.md`).
pub mod measures {
    #![doc = include_str!("../proofs/measures.md")]
}

/// L13: Directed rounding with MPFR (rug) (`proofs/mpfr-directed.md`).
pub mod mpfr_directed {
    #![doc = include_str!("../proofs/mpfr-directed.md")]
}

/// L8: Lower bound for the smallest singular value of a nearly orthonormal block (`proofs/near-orthogonal.md`).
pub mod near_orthogonal {
    #![doc = include_str!("../proofs/near-orthogonal.md")]
}

/// L16: Ogita–Aishima iterative refinement of an SVD (not a soundness lemma) (`proofs/ogita-aishima.md`).
pub mod ogita_aishima {
    #![doc = include_str!("../proofs/ogita-aishima.md")]
}

/// L21: Outward decimal rounding of a binary64 interval (`proofs/outward-decimal.md`).
pub mod outward_decimal {
    #![doc = include_str!("../proofs/outward-decimal.md")]
}

/// L11: Ozaki-style error-free splitting and exact slice products (`proofs/ozaki-exact-product.md`).
pub mod ozaki_exact_product {
    #![doc = include_str!("../proofs/ozaki-exact-product.md")]
}

/// L2: Exact power-of-two scaling and sound unscaling of enclosures (`proofs/power-of-two-scaling.md`).
pub mod power_of_two_scaling {
    #![doc = include_str!("../proofs/power-of-two-scaling.md")]
}

/// L18: Certified evaluation of the bound proxies (`proofs/proxy-formulas.md`).
pub mod proxy_formulas {
    #![doc = include_str!("../proofs/proxy-formulas.md")]
}

/// L20: Certified ratios of certified quantities (`proofs/ratio-enclosure.md`).
pub mod ratio_enclosure {
    #![doc = include_str!("../proofs/ratio-enclosure.md")]
}

/// L7: Residual bound for a group of approximate singular pairs, and the component-counting corollary (`proofs/residual-cluster.md`).
pub mod residual_cluster {
    #![doc = include_str!("../proofs/residual-cluster.md")]
}

/// L6: Residual bound for one approximate singular pair (`proofs/residual-single-pair.md`).
pub mod residual_single_pair {
    #![doc = include_str!("../proofs/residual-single-pair.md")]
}

/// L3: Directed scalar bounds in round-to-nearest (`proofs/rn-directed-scalar.md`).
pub mod rn_directed_scalar {
    #![doc = include_str!("../proofs/rn-directed-scalar.md")]
}

/// L22: Certified comparison of a claim's gap with rounding and with tolerances (`proofs/rounding-gap.md`).
pub mod rounding_gap {
    #![doc = include_str!("../proofs/rounding-gap.md")]
}

/// L10: Sorting lemma and intersection of index-matched enclosures (`proofs/sorting-lemma.md`).
pub mod sorting_lemma {
    #![doc = include_str!("../proofs/sorting-lemma.md")]
}

/// L27: A product split into an exact part and a short tail (`proofs/split-product.md`).
pub mod split_product {
    #![doc = include_str!("../proofs/split-product.md")]
}

/// L28: Ratios and changes of certified quantities along a trajectory (`proofs/trajectory-enclosure.md`).
pub mod trajectory_enclosure {
    #![doc = include_str!("../proofs/trajectory-enclosure.md")]
}

/// L32: The singular values of a two-column matrix, from two exact rationals (`proofs/two-column.md`).
pub mod two_column {
    #![doc = include_str!("../proofs/two-column.md")]
}

/// L9: Weyl's perturbation inequality for singular values (`proofs/weyl.md`).
pub mod weyl {
    #![doc = include_str!("../proofs/weyl.md")]
}
