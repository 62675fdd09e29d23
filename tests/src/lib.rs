//! llooma-e2e
