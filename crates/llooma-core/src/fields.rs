//! Checks of the short texts people type, shared by every endpoint that takes them.

use crate::AppError;

/// A label: trimmed, `fallback` when empty, at most `max_chars` characters and no control
/// characters (it is shown in lists and, for MCP servers, becomes part of tool names).
pub fn label(
    typed: Option<&str>,
    fallback: impl FnOnce() -> String,
    max_chars: usize,
) -> Result<String, AppError> {
    let label = typed.map(str::trim).filter(|l| !l.is_empty()).map_or_else(fallback, str::to_owned);
    if label.chars().count() > max_chars || label.chars().any(char::is_control) {
        return Err(AppError::invalid(
            "invalid_label",
            format!("A label has at most {max_chars} characters and no control characters."),
        ));
    }
    Ok(label)
}
