//! End-to-end tests of the `llooma` binary live in `e2e/`; this library is intentionally empty.
