//! llooma-vault
