//! llooma-api
