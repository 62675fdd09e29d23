//! llooma-migration
