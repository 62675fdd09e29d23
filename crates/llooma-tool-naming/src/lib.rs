//! llooma-tool-naming
