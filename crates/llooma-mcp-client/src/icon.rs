//! Server and tool icons: which of the icons a server lists Llooma would show ([`chosen_icon`]).
//! Fetching one is [`crate::McpClient::fetch_icon`]'s. A server's word about an icon's type is
//! a claim: what the bytes are is for the caller to decide from the bytes.

use std::time::Duration;

use serde_json::Value;

/// The most bytes of one icon read; an icon is a small picture.
pub const MAX_ICON_BYTES: usize = 256 * 1024;
/// One icon's fetch, all of it.
pub(crate) const ICON_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest address kept for an icon (`data:` addresses carry the picture itself).
const MAX_ICON_SRC_BYTES: usize = MAX_ICON_BYTES * 4 / 3 + 64;
/// The longest `http(s)` icon address kept.
const MAX_ICON_URL_BYTES: usize = 2048;
/// Icons looked at per item: a list longer than this is a server's mistake or a trick.
const MAX_ICONS_LOOKED_AT: usize = 16;
/// The size shown (in CSS pixels, at twice the density): the closest the server offers wins.
const WANTED_SIDE: u32 = 48;

/// Raster types an icon may claim; SVG (which can carry script) and anything else are left.
const RASTER: [&str; 5] = ["image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp"];

/// The `src` of the icon Llooma would show among `icons` (the `icons` array of a tool or of
/// `serverInfo`, as the server wrote it): raster images only, `https:`/`http:` or a `data:`
/// address of a raster type, preferring icons for any theme, then a light one, and the size
/// closest to what is shown. None when none qualifies.
pub(crate) fn chosen_icon(icons: Option<&Value>) -> Option<String> {
    let listed = icons?.as_array()?;
    let mut best: Option<((u8, u32), &str)> = None;
    for icon in listed.iter().take(MAX_ICONS_LOOKED_AT) {
        let Some(src) = icon.get("src").and_then(Value::as_str) else { continue };
        let declared = icon.get("mimeType").and_then(Value::as_str).map(str::to_ascii_lowercase);
        if !usable_src(src, declared.as_deref()) {
            continue;
        }
        let theme = match icon.get("theme").and_then(Value::as_str) {
            None => 0,
            Some("light") => 1,
            Some(_) => 2,
        };
        let distance = icon
            .get("sizes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(side)
            .map(|s| s.abs_diff(WANTED_SIDE))
            .min()
            .unwrap_or(WANTED_SIDE);
        let score = (theme, distance);
        if best.is_none_or(|(kept, _)| score < kept) {
            best = Some((score, src));
        }
    }
    best.map(|(_, src)| src.to_owned())
}

/// Whether an icon's address (and the type it declares) can be a raster image Llooma fetches.
fn usable_src(src: &str, declared: Option<&str>) -> bool {
    if declared.is_some_and(|d| !RASTER.contains(&d)) {
        return false;
    }
    let lower = src.get(..16).unwrap_or(src).to_ascii_lowercase();
    if lower.starts_with("data:") {
        let head = src.split(',').next().unwrap_or_default().to_ascii_lowercase();
        let kind = head.trim_start_matches("data:").split(';').next().unwrap_or_default();
        return src.len() <= MAX_ICON_SRC_BYTES
            && RASTER.contains(&kind)
            && head.ends_with(";base64");
    }
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return false;
    }
    if src.len() > MAX_ICON_URL_BYTES {
        return false;
    }
    // Undeclared: an address that says SVG is taken at its word.
    let path = src.split(['?', '#']).next().unwrap_or_default().to_ascii_lowercase();
    declared.is_some() || !(path.ends_with(".svg") || path.ends_with(".svgz"))
}

/// The longest side a `sizes` entry names ("48x48"), or none for "any" and nonsense.
fn side(size: &str) -> Option<u32> {
    let (w, h) = size.split_once(['x', 'X'])?;
    Some(w.trim().parse::<u32>().ok()?.max(h.trim().parse::<u32>().ok()?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_raster_icon_of_the_closest_size_for_any_theme_is_chosen() {
        let icons = json!([
            {"src": "https://x.example/dark.png", "sizes": ["48x48"], "theme": "dark"},
            {"src": "https://x.example/big.png", "sizes": ["512x512"]},
            {"src": "https://x.example/right.png", "mimeType": "image/png", "sizes": ["64x64"]},
            {"src": "https://x.example/vector.svg"},
        ]);
        assert_eq!(chosen_icon(Some(&icons)).as_deref(), Some("https://x.example/right.png"));
    }

    #[test]
    fn svg_scripts_other_schemes_and_oversized_addresses_are_never_chosen() {
        for icons in [
            json!([{"src": "https://x.example/i.svg"}]),
            json!([{"src": "https://x.example/i", "mimeType": "image/svg+xml"}]),
            json!([{"src": "data:image/svg+xml;base64,PHN2Zz4="}]),
            json!([{"src": "data:text/html;base64,PHNjcmlwdD4="}]),
            json!([{"src": "data:image/png,notbase64"}]),
            json!([{"src": "javascript:alert(1)"}]),
            json!([{"src": "file:///etc/passwd"}]),
            json!([{"src": "ftp://x.example/i.png"}]),
            json!([{"src": format!("https://x.example/{}.png", "a".repeat(3000))}]),
            json!([{"src": format!("data:image/png;base64,{}", "A".repeat(400_000))}]),
            json!([{"mimeType": "image/png"}]),
            json!("https://x.example/i.png"),
        ] {
            assert_eq!(chosen_icon(Some(&icons)), None, "{icons}");
        }
        assert_eq!(chosen_icon(None), None);
        // A small raster data: address is fine.
        let inline = json!([{"src": "data:image/png;base64,iVBORw0KGgo="}]);
        assert!(chosen_icon(Some(&inline)).is_some());
    }
}
