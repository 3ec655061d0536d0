//! Checks of a message's images before anything is stored. An image goes with every later
//! model call of its conversation, so one a provider will refuse (an unknown type, a header
//! claiming 100,000 × 100,000 pixels, a `file:` URL) would fail every turn after it: such
//! images are refused here, with the image and the reason named.

use base64::Engine as _;

use crate::domain::Image;

pub use crate::api::requests::{IMAGE_MEDIA_TYPES as MEDIA_TYPES, MAX_IMAGES};
/// The decoded bytes of a message's images together (Anthropic's limit for one image is 5 MB,
/// OpenAI's request limit about 20 MB).
pub const MAX_TOTAL_BYTES: usize = 20 * 1024 * 1024;
/// Pixels on the longer side (Anthropic refuses images over 8,000 pixels on a side).
pub const MAX_SIDE: usize = 8000;

/// Why the images of a message are refused: which one and why, as the client sees it.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// The request breaks a rule the API document states (a media type or URL scheme it does
    /// not list, empty data, too many images): 400 `invalid_request`.
    Invalid(String),
    /// The request has the documented shape but its content is no usable image (not an image
    /// of its media type, too many pixels, too many bytes): 422 `invalid_image`.
    Unusable(String),
}

impl Refusal {
    pub fn message(&self) -> &str {
        match self {
            Refusal::Invalid(message) | Refusal::Unusable(message) => message,
        }
    }

    fn about(self, n: usize) -> Refusal {
        match self {
            Refusal::Invalid(why) => Refusal::Invalid(format!("images[{n}]: {why}")),
            Refusal::Unusable(why) => Refusal::Unusable(format!("images[{n}]: {why}")),
        }
    }
}

pub fn check(images: &[Image]) -> Result<(), Refusal> {
    if images.len() > MAX_IMAGES {
        return Err(Refusal::Invalid(format!(
            "images: at most {MAX_IMAGES} images per message, got {}",
            images.len()
        )));
    }
    let mut total = 0;
    for (n, image) in images.iter().enumerate() {
        total += check_one(image).map_err(|refusal| refusal.about(n))?;
        if total > MAX_TOTAL_BYTES {
            return Err(Refusal::Unusable(format!(
                "images: the images of one message may hold at most {} MB together (images[{n}] \
                 goes past it)",
                MAX_TOTAL_BYTES / (1024 * 1024)
            )));
        }
    }
    Ok(())
}

/// One image's decoded size, or why it is refused.
fn check_one(image: &Image) -> Result<usize, Refusal> {
    check_media_type(&image.media_type).map_err(Refusal::Invalid)?;
    match (&image.data, &image.url) {
        (Some(data), None) => check_data(&image.media_type, data),
        (None, Some(url)) => check_url(&image.media_type, url),
        _ => Err(Refusal::Invalid(
            "each image needs exactly one of `data` (base64) or `url`".to_owned(),
        )),
    }
}

fn check_media_type(media_type: &str) -> Result<(), String> {
    if MEDIA_TYPES.contains(&media_type) {
        return Ok(());
    }
    // Quoted as JSON, so a CR, LF or other control character shows as what it is.
    Err(format!(
        "media_type {} is not one the models accept ({})",
        serde_json::Value::from(media_type),
        MEDIA_TYPES.join(", ")
    ))
}

/// An `https:` URL the provider fetches, or a `data:` URL holding the image itself.
fn check_url(media_type: &str, url: &str) -> Result<usize, Refusal> {
    if let Some(rest) = url.strip_prefix("data:") {
        let Some((header, data)) = rest.split_once(',') else {
            return Err(Refusal::Invalid(
                "a `data:` URL needs a comma before its data".to_owned(),
            ));
        };
        let Some(declared) = header.strip_suffix(";base64") else {
            return Err(Refusal::Invalid(
                "a `data:` URL must be base64 (`data:image/png;base64,…`)".to_owned(),
            ));
        };
        if declared != media_type {
            return Err(Refusal::Unusable(format!(
                "the `data:` URL says {declared}, the image's media_type {media_type}"
            )));
        }
        return check_data(media_type, data);
    }
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    if !scheme.eq_ignore_ascii_case("https") {
        return Err(Refusal::Invalid(format!(
            "`url` must be an https: or data: URL, not {}",
            if scheme.is_empty() {
                "a relative one".to_owned()
            } else {
                format!("{scheme}:")
            }
        )));
    }
    if url.len() <= "https://".len() || url.chars().any(char::is_control) {
        return Err(Refusal::Invalid(
            "`url` is not a valid https: URL".to_owned(),
        ));
    }
    Ok(0)
}

/// Base64 that decodes to an image of the declared type; its decoded length.
fn check_data(media_type: &str, data: &str) -> Result<usize, Refusal> {
    if data.is_empty() {
        return Err(Refusal::Invalid("`data` is empty".to_owned()));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|error| Refusal::Invalid(format!("`data` is not valid base64 ({error})")))?;
    check_image(media_type, &bytes).map_err(Refusal::Unusable)
}

/// Bytes that are an image of the declared type, whose header gives sizes a provider takes;
/// their length.
fn check_image(media_type: &str, bytes: &[u8]) -> Result<usize, String> {
    let found = match imagesize::image_type(bytes) {
        Ok(imagesize::ImageType::Png) => "image/png",
        Ok(imagesize::ImageType::Jpeg) => "image/jpeg",
        Ok(imagesize::ImageType::Gif) => "image/gif",
        Ok(imagesize::ImageType::Webp) => "image/webp",
        _ => return Err(format!("`data` is not a {media_type} image")),
    };
    if found != media_type {
        return Err(format!("`data` holds a {found} image, not {media_type}"));
    }
    let size = imagesize::blob_size(bytes)
        .map_err(|_| format!("`data` is not a complete {media_type} header"))?;
    if size.width == 0 || size.height == 0 {
        return Err(format!(
            "the image is {} × {} pixels",
            size.width, size.height
        ));
    }
    if size.width > MAX_SIDE || size.height > MAX_SIDE {
        return Err(format!(
            "the image is {} × {} pixels; models take at most {MAX_SIDE} on a side",
            size.width, size.height
        ));
    }
    Ok(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG's signature and IHDR chunk claiming the given size (enough for the header check).
    pub fn png(width: u32, height: u32) -> String {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn image(media_type: &str, data: Option<String>, url: Option<&str>) -> Image {
        Image {
            media_type: media_type.to_owned(),
            data,
            url: url.map(str::to_owned),
        }
    }

    #[test]
    fn a_small_png_and_an_https_url_pass() {
        let images = [
            image("image/png", Some(png(64, 48)), None),
            image("image/jpeg", None, Some("https://example.com/a.jpg")),
            image(
                "image/png",
                None,
                Some(&format!("data:image/png;base64,{}", png(2, 2))),
            ),
        ];
        assert_eq!(check(&images), Ok(()));
    }

    #[test]
    fn each_refusal_names_the_image_and_why() {
        let cases = [
            (
                image("image/png", Some(String::new()), None),
                "`data` is empty",
            ),
            (
                image("image/", Some(png(1, 1)), None),
                "media_type \"image/\"",
            ),
            (image("image/png\r\nX: y", Some(png(1, 1)), None), "\\r\\n"),
            (
                image("image/png", None, Some("javascript:alert(1)")),
                "not javascript:",
            ),
            (
                image("image/png", None, Some("file:///etc/passwd")),
                "not file:",
            ),
            (
                image("image/png", Some(png(100_000, 100_000)), None),
                "100000 × 100000",
            ),
            (
                image("image/jpeg", Some(png(4, 4)), None),
                "holds a image/png image",
            ),
            (
                image("image/png", Some("aGVsbG8=".into()), None),
                "not a image/png image",
            ),
            (
                image("image/png", None, Some("data:image/jpeg;base64,AAAA")),
                "says image/jpeg",
            ),
        ];
        for (bad, why) in cases {
            let refusal = check(&[image("image/png", Some(png(1, 1)), None), bad]).unwrap_err();
            let error = refusal.message();
            assert!(error.starts_with("images[1]: "), "{error}");
            assert!(error.contains(why), "{error} should say {why}");
        }
    }

    #[test]
    fn the_count_and_the_total_size_are_capped() {
        let many = vec![image("image/png", Some(png(1, 1)), None); MAX_IMAGES + 1];
        let refusal = check(&many).unwrap_err();
        assert!(matches!(&refusal, Refusal::Invalid(m) if m.contains("at most 20 images")));
        let mut big = base64::engine::general_purpose::STANDARD
            .decode(png(8, 8))
            .unwrap();
        big.resize(MAX_TOTAL_BYTES / 2 + 1, 0);
        let big = base64::engine::general_purpose::STANDARD.encode(big);
        let two = vec![image("image/png", Some(big), None); 2];
        let refusal = check(&two).unwrap_err();
        assert!(matches!(&refusal, Refusal::Unusable(m) if m.contains("images[1] goes past it")));
    }
}
