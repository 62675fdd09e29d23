//! llooma-types
