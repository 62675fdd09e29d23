//! llooma-net
