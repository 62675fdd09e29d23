//! What a PDF's compressed streams expand to, measured on the raw bytes before any parser
//! reads them. lopdf decodes object and cross-reference streams while it loads a document and
//! bounds each one only by itself, so a file of many small bombs would cost gigabytes of
//! inflating before any check of ours ran; this pass finds every stream the way a lenient
//! reader could (every `stream` keyword, whatever surrounds it) and inflates each into a small
//! scratch buffer, counting, until the document's budget is spent. Nothing inflated is kept.
//!
//! Streams whose dictionary says they are an image or an embedded font are not counted: text
//! extraction never decodes them, and lopdf decodes at load only streams whose type is ObjStm
//! or XRef, which such a dictionary is not. A dictionary that cannot be read is no proof of
//! anything: that stream is tried as Flate and counted.

use flate2::{Decompress, FlushDecompress, Status};
use lopdf::content::Content;
use lopdf::{Dictionary, Object, Stream};

use super::Budget;
use crate::error::MediaError;
use crate::sniff::find;

/// How far back from a `stream` keyword its dictionary is looked for. Real stream dictionaries
/// are a few hundred bytes; a bound keeps a file of many `stream` keywords linear.
const DICT_WINDOW: usize = 64 * 1024;

/// How the filters of one stream are known.
enum Filters {
    /// From the stream's own dictionary, in decoding order.
    Named(Vec<Vec<u8>>),
    /// The dictionary could not be read, or names its filters indirectly.
    Unknown,
}

/// Counts what every stream of `bytes` inflates to against `budget`; an error as soon as the
/// total passes it.
pub(super) fn check_streams(bytes: &[u8], budget: &mut Budget) -> Result<(), MediaError> {
    let ends = positions(bytes, b"endstream");
    let mut search_from = 0;
    while let Some(found) = find(&bytes[search_from..], b"stream") {
        let keyword = search_from + found;
        search_from = keyword + b"stream".len();
        if bytes[..keyword].ends_with(b"end") {
            continue;
        }
        let data_start = match bytes.get(search_from..) {
            Some([b'\r', b'\n', ..]) => search_from + 2,
            Some([b'\n' | b'\r', ..]) => search_from + 1,
            _ => continue,
        };
        let dict = dictionary_before(bytes, keyword);
        if dict.as_ref().is_some_and(never_decoded_for_text) {
            continue;
        }
        let data_end = data_end(bytes, data_start, dict.as_ref(), &ends);
        let data = &bytes[data_start..data_end];
        let filters = match &dict {
            Some(dict) => filters_of(dict),
            None => Filters::Unknown,
        };
        match filters {
            Filters::Named(names) => decode_counted(data, &names, budget)?,
            Filters::Unknown => count_inflated(data, budget)?,
        }
    }
    Ok(())
}

/// Every position of `needle` in `haystack`, in order: found once, so that finding a stream's
/// end never scans the rest of the file again.
fn positions(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = find(&haystack[from..], needle) {
        found.push(from + at);
        from += at + needle.len();
    }
    found
}

/// The dictionary written just before a `stream` keyword, read with lopdf's own grammar so both
/// agree on names (`#xx` escapes), strings and nesting. None unless the text between the object's
/// `obj` keyword and `stream` is exactly one dictionary.
fn dictionary_before(bytes: &[u8], keyword: usize) -> Option<Dictionary> {
    let window_start = keyword.saturating_sub(DICT_WINDOW);
    let window = &bytes[window_start..keyword];
    let obj = window.windows(3).rposition(|w| w == b"obj")?;
    let text = &window[obj + 3..];
    let mut source = text.to_vec();
    source.extend_from_slice(b" stream");
    let content = Content::decode_strict(&source).ok()?;
    match content.operations.as_slice() {
        [operation] if operation.operator == "stream" => match operation.operands.as_slice() {
            [Object::Dictionary(dict)] => Some(dict.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// An image or an embedded font file: decoded by renderers, never by text extraction, and not a
/// type lopdf decodes while loading.
fn never_decoded_for_text(dict: &Dictionary) -> bool {
    let name = |key: &[u8]| dict.get(key).and_then(Object::as_name).ok();
    if matches!(name(b"Type"), Some(b"ObjStm" | b"XRef")) {
        return false;
    }
    let image = name(b"Subtype") == Some(b"Image");
    let font_file = dict.has(b"Length1")
        || dict.has(b"Length2")
        || matches!(name(b"Subtype"), Some(b"Type1C" | b"CIDFontType0C" | b"OpenType"));
    image || font_file
}

/// Where a stream's data ends: its direct `/Length` when `endstream` follows it there (as
/// lopdf checks), else the next `endstream`, else the end of the file.
fn data_end(bytes: &[u8], start: usize, dict: Option<&Dictionary>, ends: &[usize]) -> usize {
    let declared = dict
        .and_then(|dict| dict.get(b"Length").and_then(Object::as_i64).ok())
        .and_then(|length| usize::try_from(length).ok())
        .and_then(|length| start.checked_add(length))
        .filter(|&end| end <= bytes.len());
    if let Some(end) = declared {
        let after = &bytes[end..];
        let trimmed = after.iter().position(|&b| !b" \t\r\n\0\x0C".contains(&b)).unwrap_or(0);
        if after[trimmed..].starts_with(b"endstream") {
            return end;
        }
    }
    let next = ends.partition_point(|&end| end < start);
    ends.get(next).copied().unwrap_or(bytes.len())
}

fn filters_of(dict: &Dictionary) -> Filters {
    match dict.get(b"Filter") {
        Err(_) => Filters::Named(Vec::new()),
        Ok(Object::Name(name)) => Filters::Named(vec![full_filter_name(name)]),
        Ok(Object::Array(names)) => {
            let names: Option<Vec<Vec<u8>>> =
                names.iter().map(|name| name.as_name().ok().map(full_filter_name)).collect();
            names.map_or(Filters::Unknown, Filters::Named)
        }
        Ok(_) => Filters::Unknown,
    }
}

/// The abbreviations of inline images, which lenient readers accept on streams too.
fn full_filter_name(name: &[u8]) -> Vec<u8> {
    let full: &[u8] = match name {
        b"Fl" => b"FlateDecode",
        b"LZW" => b"LZWDecode",
        b"A85" => b"ASCII85Decode",
        b"AHx" => b"ASCIIHexDecode",
        b"RL" => b"RunLengthDecode",
        other => other,
    };
    full.to_vec()
}

/// Runs a named filter chain, counting what comes out. Filters before the last are run by
/// lopdf, bounded by what is left of the budget (their output is charged); the last one, if it
/// is Flate, is only counted. Image codecs (DCT, JPX, CCITT, JBIG2) end the chain: nothing here
/// decodes them, so they cost nothing.
fn decode_counted(data: &[u8], names: &[Vec<u8>], budget: &mut Budget) -> Result<(), MediaError> {
    let Some((last, before)) = names.split_last() else {
        return Ok(());
    };
    let mut input = data.to_vec();
    for name in before {
        if !is_general_filter(name) {
            return Ok(());
        }
        match decode_with_lopdf(&input, name, budget)? {
            Some(output) => input = output,
            None => return Ok(()),
        }
    }
    if last == b"FlateDecode" {
        return count_inflated(&input, budget);
    }
    if is_general_filter(last) {
        decode_with_lopdf(&input, last, budget)?;
    }
    Ok(())
}

fn is_general_filter(name: &[u8]) -> bool {
    matches!(
        name,
        b"FlateDecode"
            | b"LZWDecode"
            | b"ASCII85Decode"
            | b"ASCIIHexDecode"
            | b"RunLengthDecode"
            | b"BrotliDecode"
    )
}

/// One filter, by lopdf (the decoder the document will meet later), bounded by the budget and
/// charged. None when the data does not decode: lopdf will not get more out of it later.
fn decode_with_lopdf(
    data: &[u8],
    filter: &[u8],
    budget: &mut Budget,
) -> Result<Option<Vec<u8>>, MediaError> {
    let mut dict = Dictionary::new();
    dict.set("Filter", Object::Name(filter.to_vec()));
    let stream = Stream::new(dict, data.to_vec());
    match stream.decompressed_content_with_limit(budget.left_usize()) {
        Ok(output) => {
            budget.spend(output.len())?;
            Ok(Some(output))
        }
        Err(lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded { .. })) => {
            Err(budget.exceeded())
        }
        Err(_) => Ok(None),
    }
}

/// Inflates zlib data into a scratch buffer, charging every byte that comes out, whether the
/// data ends well or not (a stream that inflates to a gigabyte and then turns corrupt cost the
/// gigabyte). Data that is not zlib fails at its two-byte header and costs nothing.
fn count_inflated(data: &[u8], budget: &mut Budget) -> Result<(), MediaError> {
    let mut inflater = Decompress::new(true);
    let mut scratch = vec![0u8; 64 * 1024];
    loop {
        let before_in = inflater.total_in();
        let before_out = inflater.total_out();
        let consumed = usize::try_from(before_in).unwrap_or(usize::MAX).min(data.len());
        let status = inflater.decompress(&data[consumed..], &mut scratch, FlushDecompress::None);
        let produced = inflater.total_out() - before_out;
        budget.spend(usize::try_from(produced).unwrap_or(usize::MAX))?;
        match status {
            Ok(Status::StreamEnd) | Err(_) => return Ok(()),
            Ok(Status::Ok | Status::BufError) => {
                // No progress either way: the data ended before the stream did.
                if inflater.total_in() == before_in && produced == 0 {
                    return Ok(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(bytes: u64) -> Budget {
        Budget::new(bytes)
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = encoder.write_all(data);
        encoder.finish().unwrap_or_default()
    }

    fn stream_object(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut out = format!("1 0 obj\n{dict}\nstream\n").into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\nendstream\nendobj\n");
        out
    }

    #[test]
    fn counts_what_flate_streams_inflate_to() {
        let data = zlib(&[b'a'; 100_000]);
        let pdf =
            stream_object(&format!("<< /Length {} /Filter /FlateDecode >>", data.len()), &data);
        let mut enough = budget(100_000);
        assert_eq!(check_streams(&pdf, &mut enough), Ok(()));
        assert_eq!(enough.left, 0);
        assert!(check_streams(&pdf, &mut budget(99_999)).is_err());
    }

    #[test]
    fn a_stream_whose_dictionary_cannot_be_read_is_still_counted() {
        let data = zlib(&[0; 50_000]);
        let pdf = stream_object("<< /Length 5 0 R /Filter 7 0 R (obj >> junk", &data);
        assert!(check_streams(&pdf, &mut budget(10_000)).is_err());
    }

    #[test]
    fn images_and_fonts_are_not_counted_but_object_streams_always_are() {
        let data = zlib(&[0; 50_000]);
        let image = stream_object("<< /Subtype /Image /Filter /FlateDecode >>", &data);
        let font = stream_object("<< /Length1 50000 /Filter /FlateDecode >>", &data);
        assert_eq!(check_streams(&image, &mut budget(10)), Ok(()));
        assert_eq!(check_streams(&font, &mut budget(10)), Ok(()));
        let disguised =
            stream_object("<< /Type /Obj#53tm /Subtype /Image /Filter /FlateDecode >>", &data);
        assert!(check_streams(&disguised, &mut budget(10_000)).is_err());
    }

    #[test]
    fn chains_are_followed() {
        let inner = zlib(&[0; 50_000]);
        let hex: String = inner.iter().map(|b| format!("{b:02x}")).collect();
        let pdf = stream_object("<< /Filter [/AHx /FlateDecode] >>", format!("{hex}>").as_bytes());
        assert!(check_streams(&pdf, &mut budget(10_000)).is_err());
        assert_eq!(check_streams(&pdf, &mut budget(200_000)), Ok(()));
    }
}
