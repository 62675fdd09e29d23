//! What the bytes are, decided from the bytes. A file's name and the type a browser sent are
//! claims anyone can write; the first bytes of a real JPEG, PDF or Ogg file are not a choice.
//! The name is used for two things only: the sub-kind of a text file (its bytes cannot tell
//! Markdown from plain text) and [`mismatch`], which compares the name's claim with the bytes.

/// What the bytes are, and the content type Llooma serves them with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sniffed {
    pub kind: Kind,
    /// The one type these bytes are ever served as. Every text is `text/plain; charset=utf-8`:
    /// an HTML or SVG file served as such would run its scripts on Llooma's origin.
    pub content_type: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Image(ImageFormat),
    Pdf,
    Text(TextFormat),
    Audio(AudioFormat),
    Unknown,
}

/// The images Llooma accepts: what phones, browsers and screenshots produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Jpeg,
    Png,
    Gif,
    Webp,
}

/// Text: valid UTF-8 (a byte order mark allowed) without NUL. The sub-kind comes from the
/// name's extension, and only once the bytes are known to be text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Plain,
    Markdown,
    Csv,
    Json,
    /// Program source, markup and configuration (`.rs`, `.py`, `.html`, `.svg`, `.yaml`...).
    Source,
}

/// What browsers' `MediaRecorder` produces and speech providers take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioFormat {
    Webm,
    Ogg,
    Mp4,
    Mpeg,
    Wav,
}

pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
const UNKNOWN_CONTENT_TYPE: &str = "application/octet-stream";

impl Kind {
    /// The content type these bytes are served with.
    pub fn content_type(self) -> &'static str {
        match self {
            Kind::Image(format) => format.content_type(),
            Kind::Pdf => "application/pdf",
            Kind::Text(_) => TEXT_CONTENT_TYPE,
            Kind::Audio(AudioFormat::Webm) => "audio/webm",
            Kind::Audio(AudioFormat::Ogg) => "audio/ogg",
            Kind::Audio(AudioFormat::Mp4) => "audio/mp4",
            Kind::Audio(AudioFormat::Mpeg) => "audio/mpeg",
            Kind::Audio(AudioFormat::Wav) => "audio/wav",
            Kind::Unknown => UNKNOWN_CONTENT_TYPE,
        }
    }

    /// How a person would name this kind of file, with its article ("a PDF document").
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Image(ImageFormat::Jpeg) => "a JPEG image",
            Kind::Image(ImageFormat::Png) => "a PNG image",
            Kind::Image(ImageFormat::Gif) => "a GIF image",
            Kind::Image(ImageFormat::Webp) => "a WebP image",
            Kind::Pdf => "a PDF document",
            Kind::Text(_) => "text",
            Kind::Audio(AudioFormat::Webm) => "WebM audio",
            Kind::Audio(AudioFormat::Ogg) => "Ogg audio",
            Kind::Audio(AudioFormat::Mp4) => "MP4 audio",
            Kind::Audio(AudioFormat::Mpeg) => "MP3 audio",
            Kind::Audio(AudioFormat::Wav) => "WAV audio",
            Kind::Unknown => "of a kind Llooma does not read",
        }
    }
}

impl ImageFormat {
    pub fn content_type(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Png => "image/png",
            ImageFormat::Gif => "image/gif",
            ImageFormat::Webp => "image/webp",
        }
    }
}

impl Sniffed {
    fn of(kind: Kind) -> Self {
        Self { kind, content_type: kind.content_type() }
    }
}

/// What `bytes` are. `name` only chooses the sub-kind of a text file; it never turns bytes that
/// are not text into text, nor text into anything else.
pub fn sniff(bytes: &[u8], name: &str) -> Sniffed {
    if let Some(kind) = binary_kind(bytes) {
        return Sniffed::of(kind);
    }
    if is_text(bytes) {
        return Sniffed::of(Kind::Text(text_format(extension(name).as_deref())));
    }
    Sniffed::of(Kind::Unknown)
}

/// Some(message) when `name`'s extension promises another kind than the bytes are ("photo.jpg
/// is not a JPEG image: its bytes are a PDF document"); None when it agrees or is not one
/// Llooma knows (an unknown extension promises nothing).
pub fn mismatch(sniffed: &Sniffed, name: &str) -> Option<String> {
    let claimed = claimed_kind(extension(name).as_deref()?)?;
    let agrees = match (claimed, sniffed.kind) {
        // Every text extension agrees with every text: the sub-kind came from the name anyway.
        (Kind::Text(_), Kind::Text(_)) => true,
        (claimed, actual) => claimed == actual,
    };
    if agrees {
        return None;
    }
    let claim = match claimed {
        Kind::Text(_) => "a text file",
        other => other.describe(),
    };
    Some(format!("{} is not {claim}: its bytes are {}", base_name(name), sniffed.kind.describe()))
}

/// The kinds whose first bytes say what they are.
fn binary_kind(bytes: &[u8]) -> Option<Kind> {
    let starts = |magic: &[u8]| bytes.starts_with(magic);
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    if starts(&[0xFF, 0xD8, 0xFF]) {
        return Some(Kind::Image(ImageFormat::Jpeg));
    }
    if starts(b"\x89PNG\r\n\x1a\n") {
        return Some(Kind::Image(ImageFormat::Png));
    }
    if starts(b"GIF87a") || starts(b"GIF89a") {
        return Some(Kind::Image(ImageFormat::Gif));
    }
    if starts(b"RIFF") && at(8, b"WEBP") {
        return Some(Kind::Image(ImageFormat::Webp));
    }
    if starts(b"RIFF") && at(8, b"WAVE") {
        return Some(Kind::Audio(AudioFormat::Wav));
    }
    // Readers accept a PDF header anywhere in the first kilobyte (some producers write a line
    // before it); a file they would open as a PDF is one here too.
    let head = &bytes[..bytes.len().min(1024)];
    if find(head, b"%PDF-").is_some() {
        return Some(Kind::Pdf);
    }
    if starts(b"OggS") {
        return Some(Kind::Audio(AudioFormat::Ogg));
    }
    if starts(&[0x1A, 0x45, 0xDF, 0xA3]) && is_webm(bytes) {
        return Some(Kind::Audio(AudioFormat::Webm));
    }
    if at(4, b"ftyp") && is_mp4_audio_brand(bytes.get(8..12)) {
        return Some(Kind::Audio(AudioFormat::Mp4));
    }
    if starts(b"ID3") || is_mpeg_audio_frame(bytes) {
        return Some(Kind::Audio(AudioFormat::Mpeg));
    }
    None
}

/// A Matroska file whose `DocType` is `webm` (the EBML header is short: the first 64 bytes hold
/// it). Other Matroska files are not what browsers record, nor what speech providers take.
fn is_webm(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(64)];
    // DocType element id 0x4282, a one-byte size 0x84, then the four letters.
    find(head, &[0x42, 0x82, 0x84, b'w', b'e', b'b', b'm']).is_some()
}

/// The major brands of MP4 files that carry audio as browsers (Safari's `MediaRecorder`) and
/// encoders write them. HEIC and AVIF images are `ftyp` files too; their brands are not here.
fn is_mp4_audio_brand(brand: Option<&[u8]>) -> bool {
    const BRANDS: &[&[u8; 4]] = &[
        b"M4A ", b"M4B ", b"M4P ", b"isom", b"iso2", b"iso4", b"iso5", b"iso6", b"iso8", b"iso9",
        b"mp41", b"mp42", b"dash", b"avc1", b"f4a ", b"3gp4", b"3gp5", b"3gp6",
    ];
    brand.is_some_and(|brand| BRANDS.iter().any(|known| known.as_slice() == brand))
}

/// MPEG audio without an ID3 tag: a frame header, and a second one where the first frame's
/// length says it ends. One header alone is four bytes that random data (or a UTF-16 byte order
/// mark followed by text) matches too often.
fn is_mpeg_audio_frame(bytes: &[u8]) -> bool {
    mpeg_frame_length(bytes)
        .and_then(|length| bytes.get(length..))
        .is_some_and(|next| mpeg_frame_length(next).is_some())
}

/// The length of the MPEG audio frame whose header starts `bytes`, if it is one.
fn mpeg_frame_length(bytes: &[u8]) -> Option<usize> {
    let [first, second, third, ..] = *bytes else {
        return None;
    };
    if first != 0xFF || second & 0xE0 != 0xE0 {
        return None;
    }
    // Version: 0 is MPEG 2.5, 2 is MPEG 2, 3 is MPEG 1 (1 is reserved).
    let version = (second >> 3) & 0b11;
    // Layer: 3 is layer I, 2 layer II, 1 layer III (0 is reserved).
    let layer = (second >> 1) & 0b11;
    let bitrate_index = usize::from(third >> 4);
    let rate_index = usize::from((third >> 2) & 0b11);
    let padding = usize::from((third >> 1) & 1);
    if version == 1 || layer == 0 || bitrate_index == 0 || bitrate_index == 15 || rate_index == 3 {
        return None;
    }
    const V1_L1: [usize; 14] = [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448];
    const V1_L2: [usize; 14] = [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384];
    const V1_L3: [usize; 14] = [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
    const V2_L1: [usize; 14] = [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256];
    const V2_L23: [usize; 14] = [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];
    let mpeg1 = version == 3;
    let table = match (mpeg1, layer) {
        (true, 3) => &V1_L1,
        (true, 2) => &V1_L2,
        (true, _) => &V1_L3,
        (false, 3) => &V2_L1,
        (false, _) => &V2_L23,
    };
    let bitrate = table[bitrate_index - 1] * 1000;
    let rate = [44_100, 48_000, 32_000][rate_index]
        >> match version {
            3 => 0,
            2 => 1,
            _ => 2,
        };
    let length = match layer {
        3 => (12 * bitrate / rate + padding) * 4,
        1 if !mpeg1 => 72 * bitrate / rate + padding,
        _ => 144 * bitrate / rate + padding,
    };
    Some(length).filter(|&length| length >= 4)
}

/// Valid UTF-8 (after an optional byte order mark) without NUL: what can be shown and sent to a
/// model as it is. UTF-16 files have NULs in them and are not text here.
pub(crate) fn is_text(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

pub(crate) const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

fn text_format(extension: Option<&str>) -> TextFormat {
    match extension {
        Some("md" | "markdown" | "mdown" | "mkd") => TextFormat::Markdown,
        Some("csv" | "tsv") => TextFormat::Csv,
        Some("json" | "jsonl" | "ndjson" | "geojson") => TextFormat::Json,
        Some(ext) if SOURCE_EXTENSIONS.contains(&ext) => TextFormat::Source,
        _ => TextFormat::Plain,
    }
}

const SOURCE_EXTENSIONS: &[&str] = &[
    "rs",
    "py",
    "js",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "jsx",
    "go",
    "c",
    "h",
    "cc",
    "cpp",
    "cxx",
    "hpp",
    "java",
    "kt",
    "kts",
    "swift",
    "rb",
    "php",
    "pl",
    "lua",
    "r",
    "scala",
    "cs",
    "fs",
    "hs",
    "ml",
    "ex",
    "exs",
    "erl",
    "clj",
    "dart",
    "zig",
    "nim",
    "jl",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "bat",
    "sql",
    "html",
    "htm",
    "xhtml",
    "css",
    "scss",
    "sass",
    "less",
    "xml",
    "svg",
    "xsl",
    "yaml",
    "yml",
    "toml",
    "ini",
    "cfg",
    "conf",
    "env",
    "properties",
    "gradle",
    "cmake",
    "make",
    "mk",
    "dockerfile",
    "tf",
    "proto",
    "graphql",
    "gql",
    "vue",
    "svelte",
    "tex",
    "bib",
    "diff",
    "patch",
    "ipynb",
    "lock",
];

/// The kind a file name's extension promises, for the extensions Llooma knows.
fn claimed_kind(extension: &str) -> Option<Kind> {
    Some(match extension {
        "jpg" | "jpeg" | "jpe" | "jfif" => Kind::Image(ImageFormat::Jpeg),
        "png" => Kind::Image(ImageFormat::Png),
        "gif" => Kind::Image(ImageFormat::Gif),
        "webp" => Kind::Image(ImageFormat::Webp),
        "pdf" => Kind::Pdf,
        "webm" | "weba" => Kind::Audio(AudioFormat::Webm),
        "ogg" | "oga" | "opus" => Kind::Audio(AudioFormat::Ogg),
        "m4a" | "mp4" => Kind::Audio(AudioFormat::Mp4),
        "mp3" => Kind::Audio(AudioFormat::Mpeg),
        "wav" => Kind::Audio(AudioFormat::Wav),
        "txt" | "text" | "log" => Kind::Text(TextFormat::Plain),
        ext => match text_format(Some(ext)) {
            TextFormat::Plain => return None,
            format => Kind::Text(format),
        },
    })
}

/// The name without any folders a browser or an archive put before it.
fn base_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

/// The extension, lowercased; none for `.bashrc` (a dot file's name is not an extension).
fn extension(name: &str) -> Option<String> {
    let (stem, ext) = base_name(name).rsplit_once('.')?;
    if stem.is_empty() || ext.is_empty() {
        return None;
    }
    Some(ext.to_ascii_lowercase())
}

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 16, b'J', b'F', b'I', b'F'];
    const PDF: &[u8] = b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n1 0 obj\n<<>>\nendobj\n";

    fn kind(bytes: &[u8], name: &str) -> Kind {
        sniff(bytes, name).kind
    }

    #[test]
    fn the_bytes_decide_whatever_the_name_says() {
        let webm = [
            0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84, b'w', b'e',
            b'b', b'm',
        ];
        // MPEG 1 layer III, 128 kbit/s, 44.1 kHz: frames of 417 bytes.
        let mut two_mp3_frames = vec![0; 417 * 2];
        two_mp3_frames[..4].copy_from_slice(&[0xFF, 0xFB, 0x90, 0x64]);
        two_mp3_frames[417..421].copy_from_slice(&[0xFF, 0xFB, 0x90, 0x64]);
        let mut wav = b"RIFF\x24\0\0\0WAVEfmt ".to_vec();
        wav.extend_from_slice(&[0; 8]);
        let table: &[(&[u8], &str, Kind, &str)] = &[
            (JPEG, "photo.png", Kind::Image(ImageFormat::Jpeg), "image/jpeg"),
            (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "x", Kind::Image(ImageFormat::Png), "image/png"),
            (b"GIF89a\x01\0\x01\0", "a.gif", Kind::Image(ImageFormat::Gif), "image/gif"),
            (b"RIFF\x1a\0\0\0WEBPVP8L", "a", Kind::Image(ImageFormat::Webp), "image/webp"),
            (PDF, "report.txt", Kind::Pdf, "application/pdf"),
            (b"junk line\n%PDF-1.4\n", "a.pdf", Kind::Pdf, "application/pdf"),
            (b"OggS\0\x02", "v.ogg", Kind::Audio(AudioFormat::Ogg), "audio/ogg"),
            (&webm, "rec.webm", Kind::Audio(AudioFormat::Webm), "audio/webm"),
            (b"\0\0\0\x20ftypM4A \0\0\0\0", "a.m4a", Kind::Audio(AudioFormat::Mp4), "audio/mp4"),
            (b"\0\0\0\x18ftypiso5\0\0\0\0", "rec.mp4", Kind::Audio(AudioFormat::Mp4), "audio/mp4"),
            (b"ID3\x04\0\0\0\0\0\0", "s.mp3", Kind::Audio(AudioFormat::Mpeg), "audio/mpeg"),
            (&two_mp3_frames, "s.mp3", Kind::Audio(AudioFormat::Mpeg), "audio/mpeg"),
            (&two_mp3_frames[..418], "s.mp3", Kind::Unknown, "application/octet-stream"),
            (&wav, "a.wav", Kind::Audio(AudioFormat::Wav), "audio/wav"),
            // HEIC is an `ftyp` file too, but not audio, and not an image Llooma reads.
            (
                b"\0\0\0\x18ftypheic\0\0\0\0",
                "IMG_1.heic",
                Kind::Unknown,
                "application/octet-stream",
            ),
            (b"MZ\x90\0\x03\0\0\0", "setup.txt", Kind::Unknown, "application/octet-stream"),
            (b"\xFF\xFEh\0i\0", "utf16.txt", Kind::Unknown, "application/octet-stream"),
            (b"hi\0there", "nul.txt", Kind::Unknown, "application/octet-stream"),
            (b"caf\xC3", "cut.txt", Kind::Unknown, "application/octet-stream"),
        ];
        for (bytes, name, want, content_type) in table {
            let got = sniff(bytes, name);
            assert_eq!(got.kind, *want, "{name}");
            assert_eq!(got.content_type, *content_type, "{name}");
        }
    }

    #[test]
    fn text_takes_its_sub_kind_from_the_name_and_is_always_served_as_plain_text() {
        let table = [
            ("notes.md", TextFormat::Markdown),
            ("data.CSV", TextFormat::Csv),
            ("a.json", TextFormat::Json),
            ("main.rs", TextFormat::Source),
            ("page.html", TextFormat::Source),
            ("logo.svg", TextFormat::Source),
            ("README", TextFormat::Plain),
            ("notes.txt", TextFormat::Plain),
            (".bashrc", TextFormat::Plain),
            ("dir.md/notes", TextFormat::Plain),
        ];
        for (name, format) in table {
            let got = sniff(b"<svg onload=alert(1)>", name);
            assert_eq!(got.kind, Kind::Text(format), "{name}");
            assert_eq!(got.content_type, "text/plain; charset=utf-8", "{name}");
        }
        assert_eq!(kind(b"\xEF\xBB\xBFcaf\xC3\xA9", "a.txt"), Kind::Text(TextFormat::Plain));
        assert_eq!(kind(b"", "empty.txt"), Kind::Text(TextFormat::Plain));
    }

    #[test]
    fn a_name_that_promises_other_bytes_is_a_mismatch() {
        let pdf = sniff(PDF, "photo.jpg");
        assert_eq!(
            mismatch(&pdf, "photo.jpg").as_deref(),
            Some("photo.jpg is not a JPEG image: its bytes are a PDF document")
        );
        let jpeg = sniff(JPEG, "x");
        assert_eq!(
            mismatch(&jpeg, "C:\\Users\\a\\scan.PDF").as_deref(),
            Some("scan.PDF is not a PDF document: its bytes are a JPEG image")
        );
        assert_eq!(
            mismatch(&jpeg, "notes.md").as_deref(),
            Some("notes.md is not a text file: its bytes are a JPEG image")
        );
        assert_eq!(
            mismatch(&sniff(b"MZ\x90\0", "x"), "song.mp3").as_deref(),
            Some("song.mp3 is not MP3 audio: its bytes are of a kind Llooma does not read")
        );
        assert_eq!(
            mismatch(&sniff(b"hello", "x"), "photo.png").as_deref(),
            Some("photo.png is not a PNG image: its bytes are text")
        );
    }

    #[test]
    fn a_name_that_agrees_or_promises_nothing_is_no_mismatch() {
        let text = sniff(b"a,b\n1,2\n", "data.csv");
        for name in ["data.csv", "data.txt", "data.json", "data", "data.unknownext", ".csv"] {
            assert_eq!(mismatch(&text, name), None, "{name}");
        }
        assert_eq!(mismatch(&sniff(JPEG, "a.JPEG"), "a.JPEG"), None);
        assert_eq!(mismatch(&sniff(JPEG, "a.jpg"), "IMG_0001.jpg"), None);
        assert_eq!(mismatch(&sniff(PDF, "a"), "a.docx"), None);
    }
}
