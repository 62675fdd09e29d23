//! Random bytes, and valid files damaged at random, fed to every entry point: none may panic,
//! hang, or return more than its limits allow.

use std::time::Duration;

use proptest::prelude::*;

use crate::fixtures::{jpeg, png_with_alpha, returns_within, scan_pdf, text_pdf};
use crate::{
    ImageLimits, Kind, MediaError, TextLimits, extract_text, mismatch, prepare_image, sniff,
};

/// Small limits, so that what a damaged header claims is refused or cheap either way.
fn image_limits() -> ImageLimits {
    ImageLimits {
        max_side: 4096,
        max_pixels: 4_000_000,
        longest_side: 64,
        thumbnail_side: 16,
        jpeg_quality: 80,
    }
}

fn text_limits() -> TextLimits {
    TextLimits { max_chars: 500, max_pdf_pages: 20, max_pdf_bytes_inflated: 4 * 1024 * 1024 }
}

fn seeds() -> Vec<(Vec<u8>, &'static str)> {
    let mut gif = Vec::new();
    {
        let mut encoder = image::codecs::gif::GifEncoder::new(&mut gif);
        let frame =
            image::Frame::new(image::RgbaImage::from_pixel(12, 9, image::Rgba([9, 200, 30, 255])));
        let _ = encoder.encode_frames([frame]);
    }
    let mut webp = std::io::Cursor::new(Vec::new());
    let _ = image::DynamicImage::new_rgb8(10, 7).write_to(&mut webp, image::ImageFormat::WebP);
    vec![
        (jpeg(24, 16), "photo.jpg"),
        (png_with_alpha(20, 12), "sticker.png"),
        (gif, "a.gif"),
        (webp.into_inner(), "a.webp"),
        (text_pdf(&[&["Hello (world)", "second line"], &["page two"]]), "report.pdf"),
        (scan_pdf(), "scan.pdf"),
        ("# Title\n\nSome *text*, ünïcödé.\n".as_bytes().to_vec(), "notes.md"),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, value: u8 },
    Insert { at: usize, bytes: Vec<u8> },
    Delete { at: usize, len: usize },
    Truncate { at: usize },
    Repeat { at: usize, len: usize, times: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        (at, any::<u8>()).prop_map(|(at, value)| Mutation::Flip { at, value }),
        (at, prop::collection::vec(any::<u8>(), 1..32))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (at, 1usize..256).prop_map(|(at, len)| Mutation::Delete { at, len }),
        at.prop_map(|at| Mutation::Truncate { at }),
        (at, 1usize..64, 1usize..64).prop_map(|(at, len, times)| Mutation::Repeat {
            at,
            len,
            times
        }),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match mutation {
        Mutation::Flip { at, value } => bytes[at % len] = *value,
        Mutation::Insert { at, bytes: new } => {
            let at = at % len;
            bytes.splice(at..at, new.iter().copied());
        }
        Mutation::Delete { at, len: n } => {
            let at = at % len;
            bytes.drain(at..(at + n).min(len));
        }
        Mutation::Truncate { at } => bytes.truncate(at % len),
        Mutation::Repeat { at, len: n, times } => {
            let at = at % len;
            let part = bytes[at..(at + n).min(len)].to_vec();
            let copies: Vec<u8> = part.iter().copied().cycle().take(part.len() * times).collect();
            bytes.splice(at..at, copies);
        }
    }
}

/// Every entry point on `bytes`, each checked against its limits.
fn check_all(bytes: Vec<u8>, name: &'static str) -> Result<(), String> {
    returns_within(Duration::from_secs(120), move || {
        let sniffed = sniff(&bytes, name);
        if sniffed.content_type != sniffed.kind.content_type() {
            return Err(format!("{sniffed:?}"));
        }
        if let Some(message) = mismatch(&sniffed, name)
            && !message.starts_with(name)
        {
            return Err(message);
        }

        let limits = image_limits();
        match prepare_image(&bytes, &limits) {
            Ok(image) => {
                let fits = |side: u32, max: u32| (1..=max).contains(&side);
                let stored = image::load_from_memory(&image.bytes).map_err(|e| e.to_string())?;
                if !fits(image.width, limits.longest_side)
                    || !fits(image.height, limits.longest_side)
                    || (stored.width(), stored.height()) != (image.width, image.height)
                    || image.thumbnail.is_empty()
                {
                    return Err(format!("{image:?}"));
                }
            }
            Err(MediaError::NotImage { .. }) if !matches!(sniffed.kind, Kind::Image(_)) => {}
            Err(MediaError::NotImage { .. }) => return Err("an image said it was not".into()),
            Err(_) => {}
        }

        let limits = text_limits();
        if let Ok(text) = extract_text(&bytes, &sniffed, &limits) {
            if text.text.chars().count() > limits.max_chars {
                return Err(format!("{} characters", text.text.chars().count()));
            }
            if text.pages.is_some_and(|pages| pages > limits.max_pdf_pages) {
                return Err(format!("{:?} pages", text.pages));
            }
        }
        Ok(())
    })
}

// 256 cases each by default; `PROPTEST_CASES` runs more.
proptest! {
    #[test]
    fn random_bytes_never_panic_or_pass_a_limit(
        bytes in prop::collection::vec(any::<u8>(), 0..4096),
        name in prop::sample::select(vec!["a.jpg", "a.pdf", "a.txt", "a.png", "a", "a.mp3"]),
    ) {
        check_all(bytes, name).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn damaged_files_never_panic_or_pass_a_limit(
        seed in 0usize..7,
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let (mut bytes, name) = seeds().swap_remove(seed);
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        check_all(bytes, name).map_err(TestCaseError::fail)?;
    }

    /// Bytes that start as the kinds Llooma reads, so random data reaches past the sniffer
    /// into each decoder.
    #[test]
    fn random_bodies_behind_real_headers_never_panic(
        header in prop::sample::select(vec![
            &b"\xFF\xD8\xFF\xE0"[..], b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", b"GIF89a",
            b"RIFF\0\0\0\0WEBPVP8 ", b"%PDF-1.7\n", b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode /Length 40 >>\nstream\n",
        ]),
        body in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&body);
        check_all(bytes, "upload").map_err(TestCaseError::fail)?;
    }
}

#[test]
fn the_seeds_are_valid_files() {
    for (bytes, name) in seeds() {
        let sniffed = sniff(&bytes, name);
        assert_eq!(mismatch(&sniffed, name), None, "{name}");
        match sniffed.kind {
            Kind::Image(_) => assert!(prepare_image(&bytes, &image_limits()).is_ok(), "{name}"),
            Kind::Pdf if name == "scan.pdf" => {
                assert_eq!(extract_text(&bytes, &sniffed, &text_limits()), Err(MediaError::NoText));
            }
            _ => assert!(extract_text(&bytes, &sniffed, &text_limits()).is_ok(), "{name}"),
        }
    }
}
