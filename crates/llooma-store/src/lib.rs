//! llooma-store
