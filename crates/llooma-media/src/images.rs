//! Images made safe to keep and to send: bounded before they are decoded, turned upright,
//! stripped of every piece of metadata (GPS position, device, comments) by encoding anew from
//! the pixels alone, scaled to what a model reads, with a thumbnail for the page.

use std::io::Cursor;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::metadata::Orientation;
use image::{DynamicImage, ExtendedColorType, ImageDecoder, ImageEncoder, ImageReader, Limits};

use crate::error::MediaError;
use crate::sniff::{ImageFormat, Kind, sniff};

/// How large an image may be, and what it is made into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageLimits {
    /// An image wider or taller than this is refused before its pixels are decoded.
    pub max_side: u32,
    /// An image of more pixels than this is refused before its pixels are decoded (a small
    /// file can claim a huge canvas: a decompression bomb).
    pub max_pixels: u64,
    /// The longest side of the stored image; larger images are scaled down to it, smaller ones
    /// keep their size.
    pub longest_side: u32,
    /// The longest side of the thumbnail.
    pub thumbnail_side: u32,
    /// Quality of the JPEG written for opaque images (1 to 100).
    pub jpeg_quality: u8,
}

impl Default for ImageLimits {
    /// 12,000 pixels a side and 50 megapixels cover every phone and camera (a 200 MP sensor
    /// writes 50 MP images by default); 2,048 is more than the models read (they tile or
    /// scale to about that); 320 suits a message's thumbnail on a high-density screen; JPEG
    /// quality 85 is where artefacts stop being visible and files are still small.
    fn default() -> Self {
        Self {
            max_side: 12_000,
            max_pixels: 50_000_000,
            longest_side: 2048,
            thumbnail_side: 320,
            jpeg_quality: 85,
        }
    }
}

/// An image ready to be stored and sent: the scaled image and its thumbnail, each as a JPEG
/// (opaque) or a PNG (with transparency), with no metadata of the original.
#[derive(Clone, PartialEq, Eq)]
pub struct PreparedImage {
    pub bytes: Vec<u8>,
    pub content_type: &'static str,
    pub width: u32,
    pub height: u32,
    pub thumbnail: Vec<u8>,
    pub thumbnail_content_type: &'static str,
}

impl std::fmt::Debug for PreparedImage {
    /// The sizes, not the bytes: a debug line with megabytes of numbers helps no one.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedImage")
            .field("bytes", &self.bytes.len())
            .field("content_type", &self.content_type)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("thumbnail", &self.thumbnail.len())
            .field("thumbnail_content_type", &self.thumbnail_content_type)
            .finish()
    }
}

/// Decodes a JPEG, PNG, GIF (first frame) or WebP (first frame) image, checks its size before
/// decoding, applies its EXIF orientation, scales it to `limits.longest_side` and encodes it
/// anew, with a thumbnail.
pub fn prepare_image(bytes: &[u8], limits: &ImageLimits) -> Result<PreparedImage, MediaError> {
    let format = match sniff(bytes, "").kind {
        Kind::Image(format) => format,
        other => return Err(MediaError::NotImage { found: other.describe() }),
    };
    let (pixels, orientation) = decode(bytes, format, limits)?;

    let longest_side = limits.longest_side.max(1);
    // Turned upright once scaled: a turn of the full-size pixels would copy them all again.
    let scaled = pixels.scaled_to(longest_side)?.unwrap_or(pixels).oriented(orientation)?;
    let thumbnail = scaled.scaled_to(limits.thumbnail_side.max(1))?;
    let quality = limits.jpeg_quality.clamp(1, 100);
    let (bytes, content_type) = scaled.encode(quality)?;
    let (thumbnail_bytes, thumbnail_content_type) =
        thumbnail.as_ref().unwrap_or(&scaled).encode(quality)?;
    Ok(PreparedImage {
        bytes,
        content_type,
        width: scaled.width,
        height: scaled.height,
        thumbnail: thumbnail_bytes,
        thumbnail_content_type,
    })
}

/// 8-bit pixels, RGB or RGBA, upright.
struct Pixels {
    width: u32,
    height: u32,
    /// RGBA when some pixel is not fully opaque, else RGB (no alpha channel to carry).
    transparent: bool,
    data: Vec<u8>,
}

const CORRUPT: MediaError = MediaError::Corrupt { what: "image" };

/// The pixels as stored, and how the picture says they are to be turned to be seen.
fn decode(
    bytes: &[u8],
    format: ImageFormat,
    limits: &ImageLimits,
) -> Result<(Pixels, Orientation), MediaError> {
    let format = match format {
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        ImageFormat::Png => image::ImageFormat::Png,
        ImageFormat::Gif => image::ImageFormat::Gif,
        ImageFormat::Webp => image::ImageFormat::WebP,
    };
    // Decoders allocate at most this much at once: the largest image allowed, at 16 bits per
    // channel with alpha (8 bytes a pixel). This bound holds while the header is read too
    // (compressed PNG chunks such as an ICC profile are inflated then).
    let max_alloc = limits.max_pixels.saturating_mul(8);
    let mut header_limits = Limits::default();
    header_limits.max_alloc = Some(max_alloc);
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(header_limits);
    // Reads the header only: the pixels are decoded below, once the size is known to be allowed.
    let mut decoder = reader.into_decoder().map_err(|_| CORRUPT)?;

    let (width, height) = decoder.dimensions();
    if width > limits.max_side || height > limits.max_side {
        return Err(MediaError::TooLarge { width, height, max_side: limits.max_side });
    }
    let too_many_pixels = || MediaError::TooManyPixels { width, height, max: limits.max_pixels };
    if u64::from(width) * u64::from(height) > limits.max_pixels {
        return Err(too_many_pixels());
    }
    if width == 0 || height == 0 {
        return Err(CORRUPT);
    }
    // The decoder's own bounds as well, in case a format's header and its data disagree.
    let mut decode_limits = Limits::default();
    decode_limits.max_image_width = Some(limits.max_side);
    decode_limits.max_image_height = Some(limits.max_side);
    decode_limits.max_alloc = Some(max_alloc);
    decoder.set_limits(decode_limits).map_err(|_| too_many_pixels())?;

    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let image = DynamicImage::from_decoder(decoder).map_err(|error| match error {
        image::ImageError::Limits(_) => too_many_pixels(),
        _ => CORRUPT,
    })?;
    Ok((Pixels::from_image(image), orientation))
}

impl Pixels {
    /// 8-bit RGB, or RGBA when some pixel is not fully opaque.
    fn from_image(image: DynamicImage) -> Pixels {
        let (width, height) = (image.width(), image.height());
        if image.color().has_alpha() {
            let rgba = image.into_rgba8().into_raw();
            if rgba.chunks_exact(4).any(|pixel| pixel[3] != u8::MAX) {
                return Pixels { width, height, transparent: true, data: rgba };
            }
            let rgb =
                rgba.chunks_exact(4).flat_map(|pixel| [pixel[0], pixel[1], pixel[2]]).collect();
            return Pixels { width, height, transparent: false, data: rgb };
        }
        Pixels { width, height, transparent: false, data: image.into_rgb8().into_raw() }
    }

    /// Turned and flipped as `orientation` says. A phone stores the picture as the sensor saw
    /// it and says how to turn it in EXIF; once the metadata is gone, the turn must be in the
    /// pixels or the photo lies on its side.
    fn oriented(self, orientation: Orientation) -> Result<Pixels, MediaError> {
        if orientation == Orientation::NoTransforms {
            return Ok(self);
        }
        let Pixels { width, height, transparent, data } = self;
        let mut image = if transparent {
            image::RgbaImage::from_raw(width, height, data).map(DynamicImage::ImageRgba8)
        } else {
            image::RgbImage::from_raw(width, height, data).map(DynamicImage::ImageRgb8)
        }
        .ok_or(CORRUPT)?;
        image.apply_orientation(orientation);
        let (width, height) = (image.width(), image.height());
        let data =
            if transparent { image.into_rgba8().into_raw() } else { image.into_rgb8().into_raw() };
        Ok(Pixels { width, height, transparent, data })
    }

    fn pixel_type(&self) -> PixelType {
        if self.transparent { PixelType::U8x4 } else { PixelType::U8x3 }
    }

    /// A copy whose longest side is `longest_side`, or None when the image is no larger: it
    /// is kept as it is (enlarging adds bytes, not detail).
    fn scaled_to(&self, longest_side: u32) -> Result<Option<Pixels>, MediaError> {
        let longest = self.width.max(self.height);
        if longest <= longest_side {
            return Ok(None);
        }
        let scale = f64::from(longest_side) / f64::from(longest);
        let side =
            |length: u32| ((f64::from(length) * scale).round() as u32).clamp(1, longest_side);
        let (width, height) = (side(self.width), side(self.height));

        let source = ImageRef::new(self.width, self.height, &self.data, self.pixel_type())
            .map_err(|_| CORRUPT)?;
        let mut target = Image::new(width, height, self.pixel_type());
        // Lanczos3 keeps text in screenshots legible when they shrink; the resizer multiplies
        // colour by alpha first, so transparent edges do not turn dark.
        let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
        Resizer::new().resize(&source, &mut target, &options).map_err(|_| CORRUPT)?;
        Ok(Some(Pixels { width, height, transparent: self.transparent, data: target.into_vec() }))
    }

    /// JPEG for opaque pixels (photos compress far better), PNG when transparency must survive.
    /// Only pixels are written: no EXIF, no ICC profile, no comment.
    fn encode(&self, jpeg_quality: u8) -> Result<(Vec<u8>, &'static str), MediaError> {
        let mut out = Vec::new();
        let written = if self.transparent {
            PngEncoder::new_with_quality(&mut out, CompressionType::Default, PngFilter::Adaptive)
                .write_image(&self.data, self.width, self.height, ExtendedColorType::Rgba8)
                .map(|()| "image/png")
        } else {
            JpegEncoder::new_with_quality(&mut out, jpeg_quality)
                .write_image(&self.data, self.width, self.height, ExtendedColorType::Rgb8)
                .map(|()| "image/jpeg")
        };
        let content_type = written.map_err(|_| CORRUPT)?;
        Ok((out, content_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgb, RgbImage, Rgba, RgbaImage};

    fn limits() -> ImageLimits {
        ImageLimits::default()
    }

    fn encode(image: &DynamicImage, format: image::ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        image.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    /// A photo-like picture: gradients, so scaling and JPEG have something to keep.
    fn gradient(width: u32, height: u32) -> RgbImage {
        RgbImage::from_fn(width, height, |x, y| {
            Rgb([(x * 255 / width) as u8, (y * 255 / height) as u8, ((x + y) % 256) as u8])
        })
    }

    fn decoded(bytes: &[u8]) -> DynamicImage {
        image::load_from_memory(bytes).unwrap()
    }

    #[test]
    fn a_large_photo_is_scaled_to_the_longest_side_with_a_thumbnail() {
        let jpeg = encode(&gradient(4000, 3000).into(), image::ImageFormat::Jpeg);
        let prepared = prepare_image(&jpeg, &limits()).unwrap();
        assert_eq!((prepared.width, prepared.height), (2048, 1536));
        assert_eq!(prepared.content_type, "image/jpeg");
        let stored = decoded(&prepared.bytes);
        assert_eq!((stored.width(), stored.height()), (2048, 1536));
        assert_eq!(prepared.thumbnail_content_type, "image/jpeg");
        let thumbnail = decoded(&prepared.thumbnail);
        assert_eq!((thumbnail.width(), thumbnail.height()), (320, 240));
        // Still the same picture: the top-left is dark, the bottom-right bright in red and green.
        let stored = stored.to_rgb8();
        let corner = stored.get_pixel(2040, 1530);
        assert!(corner[0] > 230 && corner[1] > 230, "{corner:?}");
    }

    #[test]
    fn a_small_image_keeps_its_size_and_a_tall_one_scales_by_its_height() {
        let png = encode(&gradient(100, 50).into(), image::ImageFormat::Png);
        let prepared = prepare_image(&png, &limits()).unwrap();
        assert_eq!((prepared.width, prepared.height), (100, 50));
        assert_eq!(prepared.content_type, "image/jpeg");
        assert_eq!(decoded(&prepared.thumbnail).width(), 100);

        let tall = encode(&gradient(300, 3000).into(), image::ImageFormat::Png);
        let prepared = prepare_image(&tall, &limits()).unwrap();
        assert_eq!((prepared.width, prepared.height), (205, 2048));
        let thumbnail = decoded(&prepared.thumbnail);
        assert_eq!((thumbnail.width(), thumbnail.height()), (32, 320));
    }

    #[test]
    fn transparency_stays_in_a_png_and_an_opaque_alpha_channel_becomes_a_jpeg() {
        let sticker = RgbaImage::from_fn(3000, 1000, |x, _| {
            if x < 1500 { Rgba([200, 10, 10, 255]) } else { Rgba([0, 0, 0, 0]) }
        });
        let png = encode(&sticker.into(), image::ImageFormat::Png);
        let prepared = prepare_image(&png, &limits()).unwrap();
        assert_eq!(prepared.content_type, "image/png");
        assert_eq!(prepared.thumbnail_content_type, "image/png");
        let stored = decoded(&prepared.bytes).to_rgba8();
        assert_eq!((stored.width(), stored.height()), (2048, 683));
        assert_eq!(stored.get_pixel(2000, 300)[3], 0);
        let opaque = stored.get_pixel(10, 300);
        // Premultiplied scaling: no dark fringe creeps into the opaque red.
        assert_eq!(opaque[3], 255);
        assert!(opaque[0] > 190, "{opaque:?}");

        let solid = RgbaImage::from_pixel(40, 40, Rgba([1, 2, 3, 255]));
        let png = encode(&solid.into(), image::ImageFormat::Png);
        assert_eq!(prepare_image(&png, &limits()).unwrap().content_type, "image/jpeg");
    }

    #[test]
    fn a_gif_or_a_webp_becomes_a_still_of_its_first_frame() {
        let mut gif = Vec::new();
        {
            let mut encoder = image::codecs::gif::GifEncoder::new(&mut gif);
            let frame = |colour| {
                image::Frame::new(RgbaImage::from_pixel(
                    30,
                    20,
                    Rgba([colour, 0, 255 - colour, 255]),
                ))
            };
            encoder.encode_frames([frame(255), frame(0)]).unwrap();
        }
        let prepared = prepare_image(&gif, &limits()).unwrap();
        assert_eq!(prepared.content_type, "image/jpeg");
        let first = decoded(&prepared.bytes).to_rgb8();
        assert!(first.get_pixel(15, 10)[0] > 200, "the first frame is red");

        let webp = encode(&gradient(64, 48).into(), image::ImageFormat::WebP);
        let prepared = prepare_image(&webp, &limits()).unwrap();
        assert_eq!(
            (prepared.width, prepared.height, prepared.content_type),
            (64, 48, "image/jpeg")
        );
    }

    /// A PNG of nothing but its header, claiming the given size: a decoder asked for its pixels
    /// would try to allocate them.
    fn png_header(width: u32, height: u32) -> Vec<u8> {
        fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let start = out.len();
            out.extend_from_slice(kind);
            out.extend_from_slice(data);
            let crc = crc32(&out[start..]);
            out.extend_from_slice(&crc.to_be_bytes());
        }
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&width.to_be_bytes());
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &[0x78, 0x9C, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
        chunk(&mut out, b"IEND", &[]);
        out
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn a_huge_canvas_is_refused_from_its_header() {
        let bomb = png_header(50_000, 50_000);
        assert!(bomb.len() < 100);
        let refused = prepare_image(&bomb, &limits()).unwrap_err();
        assert_eq!(
            refused,
            MediaError::TooLarge { width: 50_000, height: 50_000, max_side: 12_000 }
        );
        assert!(refused.to_string().contains("50000 × 50000 pixels"));

        let wide = prepare_image(&png_header(10_000, 10_000), &limits()).unwrap_err();
        assert_eq!(
            wide,
            MediaError::TooManyPixels { width: 10_000, height: 10_000, max: 50_000_000 }
        );

        let small_limits = ImageLimits { max_pixels: 100, ..limits() };
        let png = encode(&gradient(11, 10).into(), image::ImageFormat::Png);
        assert!(matches!(
            prepare_image(&png, &small_limits),
            Err(MediaError::TooManyPixels { width: 11, height: 10, max: 100 })
        ));
    }

    #[test]
    fn what_is_not_an_image_or_is_broken_says_so() {
        let pdf = b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n";
        assert_eq!(
            prepare_image(pdf, &limits()),
            Err(MediaError::NotImage { found: "a PDF document" })
        );
        let mut jpeg = encode(&gradient(64, 64).into(), image::ImageFormat::Jpeg);
        jpeg.truncate(12);
        assert_eq!(prepare_image(&jpeg, &limits()), Err(MediaError::Corrupt { what: "image" }));
        let png = png_header(0, 0);
        assert_eq!(prepare_image(&png, &limits()), Err(MediaError::Corrupt { what: "image" }));
    }

    /// A little-endian TIFF structure as EXIF stores it: IFD0 with a camera make, an
    /// orientation and a pointer to a GPS IFD holding a latitude and a longitude.
    fn exif_with_gps(orientation: u16) -> Vec<u8> {
        const ASCII: u16 = 2;
        const SHORT: u16 = 3;
        const LONG: u16 = 4;
        const RATIONAL: u16 = 5;
        let make = b"LloomaPhone\0";
        // Layout: header (8), IFD0 (2 + 3*12 + 4 = 42), GPS IFD (2 + 4*12 + 4 = 54), then data.
        let ifd0 = 8u32;
        let gps = ifd0 + 42;
        let make_at = gps + 54;
        let latitude_at = make_at + make.len() as u32;
        let longitude_at = latitude_at + 24;
        let mut t = b"II*\0".to_vec();
        t.extend_from_slice(&ifd0.to_le_bytes());
        let entry = |t: &mut Vec<u8>, tag: u16, kind: u16, count: u32, value: [u8; 4]| {
            t.extend_from_slice(&tag.to_le_bytes());
            t.extend_from_slice(&kind.to_le_bytes());
            t.extend_from_slice(&count.to_le_bytes());
            t.extend_from_slice(&value);
        };
        t.extend_from_slice(&3u16.to_le_bytes());
        entry(&mut t, 0x010F, ASCII, make.len() as u32, make_at.to_le_bytes());
        let [o0, o1] = orientation.to_le_bytes();
        entry(&mut t, 0x0112, SHORT, 1, [o0, o1, 0, 0]);
        entry(&mut t, 0x8825, LONG, 1, gps.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&4u16.to_le_bytes());
        entry(&mut t, 0x0001, ASCII, 2, *b"N\0\0\0");
        entry(&mut t, 0x0002, RATIONAL, 3, latitude_at.to_le_bytes());
        entry(&mut t, 0x0003, ASCII, 2, *b"E\0\0\0");
        entry(&mut t, 0x0004, RATIONAL, 3, longitude_at.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(make);
        for (degrees, minutes, seconds) in [(48u32, 51u32, 2409u32), (2, 17, 4012)] {
            for (numerator, denominator) in [(degrees, 1u32), (minutes, 1), (seconds, 100)] {
                t.extend_from_slice(&numerator.to_le_bytes());
                t.extend_from_slice(&denominator.to_le_bytes());
            }
        }
        t
    }

    /// `jpeg` with an APP1 EXIF segment right after its start-of-image marker, as cameras write.
    fn with_exif(jpeg: &[u8], tiff: &[u8]) -> Vec<u8> {
        let mut out = jpeg[..2].to_vec();
        out.extend_from_slice(&[0xFF, 0xE1]);
        out.extend_from_slice(&((tiff.len() + 8) as u16).to_be_bytes());
        out.extend_from_slice(b"Exif\0\0");
        out.extend_from_slice(tiff);
        out.extend_from_slice(&jpeg[2..]);
        out
    }

    fn gps_latitude(bytes: &[u8]) -> Option<String> {
        let exif = exif::Reader::new().read_from_container(&mut Cursor::new(bytes)).ok()?;
        let field = exif.get_field(exif::Tag::GPSLatitude, exif::In::PRIMARY)?;
        Some(field.display_value().to_string())
    }

    #[test]
    fn a_phone_photo_stays_upright_and_loses_its_gps_position_and_device() {
        // Stored as the sensor saw it: 60 wide, 20 high, red on the left. Orientation 6 says
        // "turn 90° clockwise to view", so the person saw it 20 wide, 60 high, red on top.
        let sensor =
            RgbImage::from_fn(
                60,
                20,
                |x, _| {
                    if x < 30 { Rgb([255, 0, 0]) } else { Rgb([0, 0, 255]) }
                },
            );
        let photo = with_exif(&encode(&sensor.into(), image::ImageFormat::Jpeg), &exif_with_gps(6));
        assert_eq!(gps_latitude(&photo).as_deref(), Some("48 deg 51 min 24.09 sec"));
        assert!(photo.windows(11).any(|w| w == b"LloomaPhone"));

        let prepared = prepare_image(&photo, &limits()).unwrap();
        assert_eq!((prepared.width, prepared.height), (20, 60));
        let upright = decoded(&prepared.bytes).to_rgb8();
        assert!(upright.get_pixel(10, 5)[0] > 200, "red is on top");
        assert!(upright.get_pixel(10, 55)[2] > 200, "blue is at the bottom");

        for output in [&prepared.bytes, &prepared.thumbnail] {
            assert_eq!(gps_latitude(output), None);
            assert!(!output.windows(4).any(|w| w == b"Exif"), "no EXIF segment at all");
            assert!(!output.windows(11).any(|w| w == b"LloomaPhone"));
        }
    }

    #[test]
    fn a_large_phone_photo_is_scaled_and_turned_upright_with_its_thumbnail() {
        // 3,000 wide and 1,000 high as the sensor saw it, red on the left, turned 90° to view:
        // stored 683 x 2,048 (scaled first, then turned), red on top, and so is the thumbnail.
        let sensor = RgbImage::from_fn(3000, 1000, |x, _| {
            if x < 1500 { Rgb([255, 0, 0]) } else { Rgb([0, 0, 255]) }
        });
        let photo = with_exif(&encode(&sensor.into(), image::ImageFormat::Jpeg), &exif_with_gps(6));

        let prepared = prepare_image(&photo, &limits()).unwrap();
        assert_eq!((prepared.width, prepared.height), (683, 2048));
        let upright = decoded(&prepared.bytes).to_rgb8();
        assert!(upright.get_pixel(300, 100)[0] > 200, "red is on top");
        assert!(upright.get_pixel(300, 1900)[2] > 200, "blue is at the bottom");
        let thumbnail = decoded(&prepared.thumbnail).to_rgb8();
        assert_eq!(thumbnail.dimensions(), (107, 320));
        assert!(thumbnail.get_pixel(50, 20)[0] > 200, "the thumbnail is upright too");
    }

    #[test]
    fn prepared_images_print_their_sizes_not_their_bytes() {
        let png = encode(&gradient(8, 8).into(), image::ImageFormat::Png);
        let debug = format!("{:?}", prepare_image(&png, &limits()).unwrap());
        assert!(debug.starts_with("PreparedImage { bytes: "), "{debug}");
        assert!(debug.len() < 200, "{debug}");
    }
}
