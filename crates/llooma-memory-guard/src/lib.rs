//! llooma-memory-guard
