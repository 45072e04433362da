//! Factored products (placeholder during bring-up).
