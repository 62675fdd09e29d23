/// Why an attachment could not be prepared. Every message is written for the person who
/// attached the file: what is wrong with it, and what they can do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    #[error(
        "this file is {found}, not an image Llooma reads; attach a JPEG, PNG, GIF or WebP image"
    )]
    NotImage { found: &'static str },

    #[error(
        "this {what} is damaged or cut short and cannot be read; save or export it again and \
         attach the new file"
    )]
    Corrupt { what: &'static str },

    #[error(
        "this image is {width} × {height} pixels; Llooma takes images up to {max_side} pixels on \
         a side: scale it down and attach it again"
    )]
    TooLarge { width: u32, height: u32, max_side: u32 },

    #[error(
        "this image is {width} × {height} pixels, more than the {max} pixels Llooma takes; scale \
         it down and attach it again"
    )]
    TooManyPixels { width: u32, height: u32, max: u64 },

    #[error(
        "this PDF has {pages} pages; Llooma reads documents of up to {max} pages: attach the \
         part you need as a shorter PDF"
    )]
    TooManyPages { pages: u64, max: u32 },

    #[error(
        "this PDF's compressed contents expand to more than {max_mib} MiB, far more than its \
         text needs; print it to a new PDF, or copy its text, and attach that"
    )]
    Inflates { max_mib: u64 },

    #[error(
        "this PDF is built in a way Llooma does not follow ({what}); print it to a new PDF, or \
         copy its text, and attach that"
    )]
    TooComplex { what: &'static str },

    #[error("this PDF has no text layer (a scan?); attach it as an image instead or copy its text")]
    NoText,

    #[error(
        "this PDF is encrypted, so its text cannot be read; save an unprotected copy (or copy \
         its text) and attach that"
    )]
    Encrypted,

    #[error(
        "Llooma reads text from text files and PDFs, not from {content_type} files; attach the \
         text as a file or paste it into the message"
    )]
    Unsupported { content_type: &'static str },
}
