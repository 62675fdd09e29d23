use std::time::Duration;

use lopdf::{Document, Object, Stream, dictionary};

use super::*;
use crate::fixtures::{bomb_pdf, finish, returns_within, save, scan_pdf, text_pdf, zlib_zeros};

const MIB: u64 = 1024 * 1024;

fn read(bytes: &[u8]) -> Result<PdfText, MediaError> {
    extract(bytes, 100_000, 500, 64 * MIB)
}

/// Hostile input must come back with an answer; see `returns_within`.
fn read_hostile(bytes: Vec<u8>) -> Result<PdfText, MediaError> {
    returns_within(Duration::from_secs(120), move || read(&bytes))
}

#[test]
fn reads_the_text_of_every_page_with_its_lines() {
    let pdf = text_pdf(&[&["Quarterly report", "Revenue (net): 12 %"], &["Second page"]]);
    let got = read(&pdf).unwrap();
    assert_eq!(got.text, "Quarterly report\nRevenue (net): 12 %\n\nSecond page");
    assert_eq!(got.pages, 2);
    assert!(!got.cut);
}

#[test]
fn a_long_document_is_cut_and_the_pages_after_are_not_read() {
    let pdf = text_pdf(&[&["abcdef"], &["ghijkl"], &["mnopqr"]]);
    let got = extract(&pdf, 9, 500, 64 * MIB).unwrap();
    assert_eq!(got.text, "abcdef\n\ng");
    assert!(got.cut);
    assert_eq!(got.pages, 3);
    let exact = extract(&text_pdf(&[&["abc"]]), 3, 500, 64 * MIB).unwrap();
    assert_eq!((exact.text.as_str(), exact.cut), ("abc", false));
}

#[test]
fn word_gaps_in_tj_arrays_and_moves_on_a_line_become_spaces() {
    let mut doc = Document::with_version("1.7");
    let font = doc.add_object(
        dictionary! { "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica" },
    );
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let content = b"BT /F1 10 Tf 1 0 0 1 72 700 Tm [(Ker) 30 (ned) -600 (words)] TJ \
                    1 0 0 1 200 700 Tm (same line) Tj 1 0 0 1 72 680 Tm (next line) Tj ET";
    let pdf = finish(&mut doc, Some(resources), vec![content.to_vec()]);
    assert_eq!(read(&pdf).unwrap().text, "Kerned words same line\nnext line");
}

/// A Type0 font whose codes are two bytes and mean what its ToUnicode map says: how most
/// writers embed non-Latin text.
#[test]
fn unicode_text_is_read_through_the_font_s_to_unicode_map() {
    let mut doc = Document::with_version("1.7");
    let cmap = b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n\
        /CMapName /Test def 1 begincodespacerange <0000> <FFFF> endcodespacerange\n\
        3 beginbfchar <0001> <041F> <0002> <0440> <0003> <0438> endbfchar\n\
        endcmap CMapName currentdict /CMap defineresource pop end end";
    let mut to_unicode = Stream::new(dictionary! {}, cmap.to_vec());
    let _ = to_unicode.compress();
    let to_unicode = doc.add_object(to_unicode);
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type0", "BaseFont" => "Test",
        "Encoding" => "Identity-H", "ToUnicode" => to_unicode,
    });
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let content = b"BT /F1 12 Tf 72 700 Td <000100020003> Tj ET";
    let pdf = finish(&mut doc, Some(resources), vec![content.to_vec()]);
    assert_eq!(read(&pdf).unwrap().text, "При");
}

#[test]
fn text_inside_form_xobjects_is_read() {
    let mut doc = Document::with_version("1.7");
    let font = doc.add_object(
        dictionary! { "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica" },
    );
    let form = doc.add_object(Stream::new(
        dictionary! {
            "Type" => "XObject", "Subtype" => "Form",
            "Resources" => dictionary! { "Font" => dictionary! { "F9" => font } },
        },
        b"BT /F9 12 Tf (inside a form) Tj ET".to_vec(),
    ));
    let resources = doc.add_object(dictionary! { "XObject" => dictionary! { "Fm1" => form } });
    let pdf = finish(&mut doc, Some(resources), vec![b"q /Fm1 Do Q".to_vec()]);
    assert_eq!(read(&pdf).unwrap().text, "inside a form");
}

#[test]
fn a_scan_has_no_text_layer_and_says_what_to_do() {
    let refused = read(&scan_pdf()).err();
    assert_eq!(refused, Some(MediaError::NoText));
    assert_eq!(
        refused.map(|e| e.to_string()).as_deref(),
        Some(
            "this PDF has no text layer (a scan?); attach it as an image instead or copy its text"
        )
    );
}

#[test]
fn a_zip_bomb_is_refused_before_it_is_inflated() {
    let bomb = bomb_pdf(4096);
    assert!(bomb.len() < 5 * MIB as usize, "{} bytes inflate to 4 GiB", bomb.len());
    assert_eq!(read_hostile(bomb).err(), Some(MediaError::Inflates { max_mib: 64 }));
}

#[test]
fn the_bomb_builder_makes_what_it_says() {
    let mut exact = Budget::new(3 * MIB);
    assert_eq!(scan::check_streams(&bomb_pdf(3), &mut exact), Ok(()));
    assert_eq!(exact.left, 0);
    let mut inflated = Vec::new();
    let two_mib = zlib_zeros(2);
    let mut decoder = flate2::read::ZlibDecoder::new(&two_mib[..]);
    std::io::Read::read_to_end(&mut decoder, &mut inflated).unwrap();
    assert_eq!(inflated.len() as u64, 2 * MIB);
    assert!(inflated.iter().all(|&b| b == 0));
}

#[test]
fn many_small_bombs_count_together() {
    let mut doc = Document::with_version("1.7");
    let mut contents = Vec::new();
    for _ in 0..20 {
        contents.push(
            doc.add_object(Stream::new(dictionary! { "Filter" => "FlateDecode" }, zlib_zeros(4))),
        );
    }
    let pdf = {
        let pages_id = doc.new_object_id();
        let kids: Vec<Object> = contents
            .iter()
            .map(|&content| {
                doc.add_object(
                    dictionary! { "Type" => "Page", "Parent" => pages_id, "Contents" => content },
                )
                .into()
            })
            .collect();
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => 20 }),
        );
        let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
        doc.trailer.set("Root", catalog);
        save(&mut doc)
    };
    // Each stream is 4 MiB, far under the limit; the 80 MiB together are not.
    assert_eq!(read_hostile(pdf).err(), Some(MediaError::Inflates { max_mib: 64 }));
}

/// A content stream the raw scan passes over (its dictionary claims it is an image) is still
/// charged when the page is walked.
#[test]
fn a_bomb_disguised_as_an_image_is_caught_when_the_page_is_read() {
    let mut doc = Document::with_version("1.7");
    let content = doc.add_object(Stream::new(
        dictionary! { "Subtype" => "Image", "Filter" => "FlateDecode" },
        zlib_zeros(200),
    ));
    let pages_id = doc.new_object_id();
    let page = doc
        .add_object(dictionary! { "Type" => "Page", "Parent" => pages_id, "Contents" => content });
    doc.objects.insert(
        pages_id,
        Object::Dictionary(
            dictionary! { "Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1 },
        ),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let pdf = save(&mut doc);
    assert_eq!(read_hostile(pdf).err(), Some(MediaError::Inflates { max_mib: 64 }));
}

#[test]
fn too_many_pages_are_refused_and_a_claimed_count_is_not_believed() {
    let page: &[&str] = &["x"];
    let long = text_pdf(&vec![page; 501]);
    assert_eq!(read_hostile(long).err(), Some(MediaError::TooManyPages { pages: 501, max: 500 }));

    let liar = String::from_utf8_lossy(&text_pdf(&[&["one page"]]))
        .replace("/Count 1", "/Count 2147483647")
        .into_bytes();
    let got = read_hostile(liar).unwrap();
    assert_eq!((got.text.as_str(), got.pages), ("one page", 1));
}

#[test]
fn an_encrypted_pdf_is_refused_clearly() {
    let mut doc = Document::load_mem(&text_pdf(&[&["secret"]])).unwrap();
    let encrypt =
        doc.add_object(dictionary! { "Filter" => "Standard", "V" => 2, "R" => 3, "Length" => 128 });
    doc.trailer.set("Encrypt", encrypt);
    let refused = read_hostile(save(&mut doc)).err();
    assert_eq!(refused, Some(MediaError::Encrypted));
    assert!(refused.is_some_and(|e| e.to_string().contains("save an unprotected copy")));
}

#[test]
fn forms_that_draw_themselves_or_fan_out_are_stopped() {
    let mut doc = Document::with_version("1.7");
    let id = doc.new_object_id();
    doc.objects.insert(
        id,
        Object::Stream(Stream::new(
            dictionary! {
                "Type" => "XObject", "Subtype" => "Form",
                "Resources" => dictionary! { "XObject" => dictionary! { "Me" => id } },
            },
            b"/Me Do".to_vec(),
        )),
    );
    let resources = doc.add_object(dictionary! { "XObject" => dictionary! { "Me" => id } });
    let pdf = finish(&mut doc, Some(resources), vec![b"/Me Do".to_vec()]);
    assert!(matches!(read_hostile(pdf), Err(MediaError::TooComplex { .. })));

    // Eight levels, each drawing the next ten times: 10^8 entries if nothing counted them.
    let mut doc = Document::with_version("1.7");
    let mut below = doc.add_object(Stream::new(
        dictionary! { "Type" => "XObject", "Subtype" => "Form" },
        b"".to_vec(),
    ));
    for _ in 0..8 {
        below = doc.add_object(Stream::new(
            dictionary! {
                "Type" => "XObject", "Subtype" => "Form",
                "Resources" => dictionary! { "XObject" => dictionary! { "F" => below } },
            },
            b"/F Do ".repeat(10),
        ));
    }
    let resources = doc.add_object(dictionary! { "XObject" => dictionary! { "F" => below } });
    let pdf = finish(&mut doc, Some(resources), vec![b"/F Do".to_vec()]);
    assert!(matches!(read_hostile(pdf), Err(MediaError::TooComplex { .. })));
}

#[test]
fn truncated_and_corrupt_files_return_errors_or_what_they_still_hold() {
    let pdf = text_pdf(&[&["first"], &["second"]]);
    for cut in [10, pdf.len() / 3, pdf.len() / 2, pdf.len() - 40] {
        let got = read_hostile(pdf[..cut].to_vec());
        // A lenient reader may recover pages from a cut file; it must never invent text.
        if let Ok(text) = got {
            assert!(
                ["first", "second"].iter().any(|page| text.text.contains(page)),
                "{}",
                text.text
            );
        }
    }
    // Every offset in the cross-reference table points at the wrong place.
    let text = String::from_utf8_lossy(&pdf).into_owned();
    let xref = text.find("xref").unwrap();
    let (head, tail) = text.split_at(xref);
    let garbled = format!("{head}{}", tail.replace("0000000", "0000999"));
    let got = read_hostile(garbled.into_bytes());
    assert!(got.is_err() || got.is_ok_and(|t| t.text.contains("first")));

    assert_eq!(read(b"%PDF-1.7\n").err(), Some(MediaError::Corrupt { what: "PDF" }));
}

#[test]
fn deep_nesting_is_refused_without_exhausting_the_stack() {
    for (open, close) in [("[", "]"), ("<< /A ", " >>")] {
        let mut pdf = text_pdf(&[&["deep"]]);
        let deep =
            format!("99 0 obj\n{}1{}\nendobj\n", open.repeat(200_000), close.repeat(200_000));
        let at = pdf.windows(4).position(|w| w == b"xref").unwrap();
        pdf.splice(at..at, deep.into_bytes());
        // The offsets after the insertion are wrong now; lenient loading rebuilds them.
        let got = read_hostile(pdf);
        assert!(got.is_err() || got.is_ok_and(|t| t.text == "deep"));
    }
    // Nesting inside a content stream is counted by the walker, never recursed into.
    let mut doc = Document::with_version("1.7");
    let content = format!("{}{}", "[".repeat(500_000), "]".repeat(500_000));
    let pdf = finish(&mut doc, None, vec![content.into_bytes()]);
    assert_eq!(read_hostile(pdf).err(), Some(MediaError::NoText));
}

#[test]
fn a_page_tree_that_contains_itself_ends() {
    let pdf = String::from_utf8_lossy(&text_pdf(&[&["loop"]])).into_owned();
    // Object 3 is the page tree here, object 5 its one page.
    assert!(pdf.contains("3 0 obj\n<</Type/Pages/Kids[5 0 R]"), "{pdf}");
    // The page, then the tree itself again: the page is read once.
    let after = pdf.replace("/Kids[5 0 R]", "/Kids[5 0 R 3 0 R]");
    let got = read_hostile(after.into_bytes()).unwrap();
    assert_eq!((got.text.as_str(), got.pages), ("loop", 1));
    // The tree first: the walk ends before it finds a page.
    let before = pdf.replace("/Kids[5 0 R]", "/Kids[3 0 R 5 0 R]");
    assert_eq!(read_hostile(before.into_bytes()).err(), Some(MediaError::Corrupt { what: "PDF" }));
}

#[test]
fn encryption_is_recognised_from_the_raw_bytes() {
    let table: &[(&[u8], bool)] = &[
        (b"trailer\n<< /Encrypt 5 0 R /Root 1 0 R >>", true),
        (b"<</Encrypt<</Filter/Standard>>>>", true),
        (b"/Encrypt\n12 0 R", true),
        (b"BT (/Encrypt is a key) Tj ET", false),
        (b"/EncryptMetadata false", false),
        (b"", false),
    ];
    for (bytes, encrypted) in table {
        assert_eq!(declares_encryption(bytes), *encrypted, "{}", String::from_utf8_lossy(bytes));
    }
}
