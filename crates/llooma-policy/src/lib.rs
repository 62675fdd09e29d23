//! llooma-policy
