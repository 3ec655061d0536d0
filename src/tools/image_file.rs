//! Image files for `read_file`: a PNG, JPEG, GIF or WebP file, recognised by its bytes, goes to
//! the model as an image, with a note of its type, size and pixels as the text. It must pass
//! the checks of a message's image (`crate::images`), since it goes with every later request of
//! the conversation and one a provider refuses would fail every turn after it.

use std::io::Read;

use base64::Engine as _;

use super::call::ToolResult;
use crate::domain::Image;

/// The largest image file sent (Anthropic refuses an image over 5 MB).
pub(super) const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The media type of the image whose file begins with `head`, if it is one a model takes.
pub(super) fn media_type(head: &[u8]) -> Option<&'static str> {
    match imagesize::image_type(head).ok()? {
        imagesize::ImageType::Png => Some("image/png"),
        imagesize::ImageType::Jpeg => Some("image/jpeg"),
        imagesize::ImageType::Gif => Some("image/gif"),
        imagesize::ImageType::Webp => Some("image/webp"),
        _ => None,
    }
}

/// Reads the image file `shown` from `reader` as a result holding the image; an error for the
/// model when no provider would take it.
pub(super) fn read(
    reader: impl Read,
    shown: &str,
    media_type: &'static str,
) -> Result<ToolResult, String> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_IMAGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("could not read {shown}: {error}"))?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(format!(
            "{shown} is an image ({media_type}) larger than {}, more than models take",
            size(MAX_IMAGE_BYTES)
        ));
    }
    // An image cannot be redacted and still be the image.
    if crate::redact::holds_secret(&bytes) {
        return Err(format!(
            "{shown} holds a configured secret, so it is not sent to the model"
        ));
    }
    let pixels = imagesize::blob_size(&bytes)
        .map_err(|_| format!("{shown} is not a complete {media_type} image"))?;
    let image = Image {
        media_type: media_type.to_owned(),
        data: Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
        url: None,
    };
    if let Err(refusal) = crate::images::check(std::slice::from_ref(&image)) {
        // The message names the image by its place (`images[0]: …`), which means nothing here.
        let message = refusal.message();
        let why = message.split_once(": ").map_or(message, |(_, why)| why);
        return Err(format!("{shown} cannot be sent to a model: {why}"));
    }
    let mut result = ToolResult::completed(format!(
        "[image: {media_type}, {}x{}, {}]",
        pixels.width,
        pixels.height,
        size(bytes.len() as u64)
    ));
    result.images.push(image);
    Ok(result)
}

/// A size as people read it: bytes, KB or MB.
fn size(bytes: u64) -> String {
    const KB: u64 = 1024;
    if bytes < KB {
        format!("{bytes} bytes")
    } else if bytes < KB * KB {
        format!("{} KB", bytes.div_ceil(KB))
    } else {
        format!("{:.1} MB", bytes as f64 / (KB * KB) as f64)
    }
}

/// A PNG's signature and IHDR chunk claiming the given size (enough for the header checks).
#[cfg(test)]
pub(super) fn test_png(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    bytes.extend_from_slice(&width.to_be_bytes());
    bytes.extend_from_slice(&height.to_be_bytes());
    bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    bytes
}

#[cfg(test)]
mod tests {
    use super::super::call::ToolStatus;
    use super::test_png as png;
    use super::*;

    #[test]
    fn images_are_recognised_by_their_bytes() {
        assert_eq!(media_type(&png(1, 1)), Some("image/png"));
        assert_eq!(
            media_type(b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01"),
            Some("image/jpeg")
        );
        assert_eq!(media_type(b"GIF89a\x01\0\x01\0\0\0"), Some("image/gif"));
        // Fewer than 12 bytes tell nothing.
        assert_eq!(media_type(b"\xff\xd8\xff"), None);
        assert_eq!(media_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(media_type(b"fn main() {}\n"), None);
        assert_eq!(media_type(b""), None);
    }

    #[test]
    fn an_image_comes_with_a_note() {
        let bytes = png(640, 480);
        let result = read(&bytes[..], "logo.png", "image/png").unwrap();
        assert_eq!(result.status, ToolStatus::Completed);
        assert_eq!(result.output, "[image: image/png, 640x480, 33 bytes]");
        assert_eq!(result.images.len(), 1);
        assert_eq!(result.images[0].media_type, "image/png");
        let data = result.images[0].data.as_deref().unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap(),
            bytes
        );
    }

    #[test]
    fn images_no_provider_takes_are_refused() {
        let error = read(&png(9000, 10)[..], "wide.png", "image/png").unwrap_err();
        assert!(
            error.starts_with("wide.png cannot be sent to a model: the image is 9000 × 10"),
            "{error}"
        );
        let error = read(&png(10, 10)[..20], "cut.png", "image/png").unwrap_err();
        assert_eq!(error, "cut.png is not a complete image/png image");
        let mut big = png(10, 10);
        big.resize(MAX_IMAGE_BYTES as usize + 1, 0);
        let error = read(&big[..], "big.png", "image/png").unwrap_err();
        assert_eq!(
            error,
            "big.png is an image (image/png) larger than 5.0 MB, more than models take"
        );
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(12), "12 bytes");
        assert_eq!(size(12 * 1024), "12 KB");
        assert_eq!(size(12 * 1024 + 1), "13 KB");
        assert_eq!(size(3 * 1024 * 1024 / 2), "1.5 MB");
    }
}
