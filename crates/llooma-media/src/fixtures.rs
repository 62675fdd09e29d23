//! Real files for the tests, made here rather than checked in: PDFs written with lopdf's own
//! writer (with a text layer, without one, and hostile ones), images encoded with `image`.

use std::io::Cursor;
use std::sync::mpsc;
use std::time::Duration;

use flate2::{Compress, Compression, FlushCompress};
use lopdf::{Dictionary, Document, Object, ObjectId, Stream, dictionary};

/// Runs `work` on its own thread and fails the test if it has not returned after `limit`. Not
/// a measure of speed (that is `cargo bench`): a guard that turns a loop on hostile input into a
/// failed test instead of a test run that never ends. The limits are minutes' worth of work in
/// an unoptimised build for what takes milliseconds.
pub(crate) fn returns_within<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    match receiver.recv_timeout(limit) {
        Ok(value) => value,
        Err(_) => panic!("did not return within {limit:?}: a loop on hostile input?"),
    }
}

/// A document with one page per entry, each a content stream that shows the given lines with
/// Helvetica (compressed, as writers do).
pub(crate) fn text_pdf(pages: &[&[&str]]) -> Vec<u8> {
    let mut doc = Document::with_version("1.7");
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let contents: Vec<Vec<u8>> = pages
        .iter()
        .map(|lines| {
            let mut content = b"BT /F1 12 Tf 72 720 Td 14 TL\n".to_vec();
            for line in *lines {
                content.extend_from_slice(format!("({}) Tj T*\n", escape(line)).as_bytes());
            }
            content.extend_from_slice(b"ET\n");
            content
        })
        .collect();
    finish(&mut doc, Some(resources), contents)
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('(', "\\(").replace(')', "\\)")
}

/// Adds the page tree and catalogue for one page per content stream and writes the file.
pub(crate) fn finish(
    doc: &mut Document,
    resources: Option<ObjectId>,
    contents: Vec<Vec<u8>>,
) -> Vec<u8> {
    let pages_id = doc.new_object_id();
    let mut kids = Vec::new();
    for content in contents {
        let mut stream = Stream::new(Dictionary::new(), content);
        let _ = stream.compress();
        let content_id = doc.add_object(stream);
        let mut page = dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        };
        if let Some(resources) = resources {
            page.set("Resources", resources);
        }
        kids.push(Object::Reference(doc.add_object(page)));
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    save(doc)
}

pub(crate) fn save(doc: &mut Document) -> Vec<u8> {
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap_or_default();
    out
}

/// A scanned page: a JPEG drawn over the page and no text operator at all.
pub(crate) fn scan_pdf() -> Vec<u8> {
    let mut doc = Document::with_version("1.7");
    let photo = jpeg(64, 80);
    let image = doc.add_object(Stream::new(
        dictionary! {
            "Type" => "XObject", "Subtype" => "Image", "Width" => 64, "Height" => 80,
            "ColorSpace" => "DeviceRGB", "BitsPerComponent" => 8, "Filter" => "DCTDecode",
        },
        photo,
    ));
    let resources = doc.add_object(dictionary! { "XObject" => dictionary! { "Im1" => image } });
    finish(&mut doc, Some(resources), vec![b"q 612 0 0 792 0 0 cm /Im1 Do Q".to_vec()])
}

/// zlib data that inflates to `mib` MiB of zeros, about a thousandth of that in size: one
/// MiB of zeros compressed with a full flush (which makes the block independent of what came
/// before) repeated, then an empty final block and the checksum.
pub(crate) fn zlib_zeros(mib: u64) -> Vec<u8> {
    let mut compress = Compress::new(Compression::best(), false);
    let zeros = vec![0u8; 1024 * 1024];
    let mut block = Vec::with_capacity(64 * 1024);
    let _ = compress.compress_vec(&zeros, &mut block, FlushCompress::Full);
    let mut out = vec![0x78, 0xDA];
    for _ in 0..mib {
        out.extend_from_slice(&block);
    }
    // A final stored block of no bytes: BFINAL=1, BTYPE=00, then LEN 0 and NLEN 0xFFFF.
    out.extend_from_slice(&[0x01, 0x00, 0x00, 0xFF, 0xFF]);
    // Adler-32 of n zeros: a stays 1, b adds a per byte.
    let total = mib * 1024 * 1024;
    let adler = ((total % 65_521) << 16) | 1;
    out.extend_from_slice(&(adler as u32).to_be_bytes());
    out
}

/// A page whose one content stream inflates to `mib` MiB.
pub(crate) fn bomb_pdf(mib: u64) -> Vec<u8> {
    let mut doc = Document::with_version("1.7");
    let content =
        doc.add_object(Stream::new(dictionary! { "Filter" => "FlateDecode" }, zlib_zeros(mib)));
    let pages_id = doc.new_object_id();
    let page = doc.add_object(dictionary! {
        "Type" => "Page", "Parent" => pages_id, "Contents" => content,
    });
    doc.objects.insert(
        pages_id,
        Object::Dictionary(
            dictionary! { "Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1 },
        ),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    save(&mut doc)
}

pub(crate) fn jpeg(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x * 4) as u8, (y * 3) as u8, ((x ^ y) * 2) as u8])
    });
    let mut out = Cursor::new(Vec::new());
    let _ = image::DynamicImage::from(image).write_to(&mut out, image::ImageFormat::Jpeg);
    out.into_inner()
}

pub(crate) fn png_with_alpha(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([(x * 4) as u8, (y * 3) as u8, 90, if x > width / 2 { 0 } else { 255 }])
    });
    let mut out = Cursor::new(Vec::new());
    let _ = image::DynamicImage::from(image).write_to(&mut out, image::ImageFormat::Png);
    out.into_inner()
}
