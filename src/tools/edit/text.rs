//! A file's bytes as the text an edit works on, and back: UTF-8 (with or without a BOM) or
//! UTF-16 with its BOM, line endings `\n` while editing. A file whose every line ends in CRLF
//! is edited with `\n` and written back with CRLF, so a model that writes `\n` keeps the file's
//! endings; a file with mixed endings is edited as it is. Anything else is refused, never
//! rewritten lossily.

use std::borrow::Cow;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
const UTF16LE_BOM: &[u8] = b"\xFF\xFE";
const UTF16BE_BOM: &[u8] = b"\xFE\xFF";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    Utf8,
    Utf16Le,
    Utf16Be,
}

/// How a file's text is stored, so an edit writes it back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Form {
    pub encoding: Encoding,
    /// Starts with a byte order mark (always so for UTF-16).
    pub bom: bool,
    /// Every line ends in `\r\n`: edited as `\n`, written back as `\r\n`.
    pub crlf: bool,
}

impl Form {
    /// A file the edit tools create: UTF-8 without a BOM, `\n` endings.
    pub const NEW: Form = Form {
        encoding: Encoding::Utf8,
        bom: false,
        crlf: false,
    };

    /// Text from the model, in the line endings the edit works on: a CRLF file is edited with
    /// `\n`, whatever endings the model used.
    pub fn model_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.crlf && text.contains("\r\n") {
            Cow::Owned(text.replace("\r\n", "\n"))
        } else {
            Cow::Borrowed(text)
        }
    }
}

/// The text of the file `shown` and how it is stored; an error for the model when it is not
/// text the edit tools can write back unchanged.
pub(super) fn decode(shown: &str, bytes: &[u8]) -> Result<(String, Form), String> {
    let not_text = |why: String| {
        format!(
            "{shown} is not a text file the edit tools can change ({why}); nothing was \
             written. Use the shell for other files."
        )
    };
    let (text, encoding, bom) = if let Some(rest) = bytes.strip_prefix(UTF8_BOM) {
        (utf8(rest).map_err(not_text)?, Encoding::Utf8, true)
    } else if bytes.starts_with(b"\xFF\xFE\x00\x00") {
        return Err(not_text("it is UTF-32".to_owned()));
    } else if let Some(rest) = bytes.strip_prefix(UTF16LE_BOM) {
        let text = utf16(rest, u16::from_le_bytes).map_err(not_text)?;
        (text, Encoding::Utf16Le, true)
    } else if let Some(rest) = bytes.strip_prefix(UTF16BE_BOM) {
        let text = utf16(rest, u16::from_be_bytes).map_err(not_text)?;
        (text, Encoding::Utf16Be, true)
    } else {
        (utf8(bytes).map_err(not_text)?, Encoding::Utf8, false)
    };
    let line_ends = text.matches('\n').count();
    let crlf = line_ends > 0 && text.matches("\r\n").count() == line_ends;
    let text = if crlf {
        text.replace("\r\n", "\n")
    } else {
        text
    };
    Ok((
        text,
        Form {
            encoding,
            bom,
            crlf,
        },
    ))
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|error| format!("invalid UTF-8 at byte {}", error.utf8_error().valid_up_to()))
}

fn utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> Result<String, String> {
    if !bytes.len().is_multiple_of(2) {
        return Err("UTF-16 with an odd number of bytes".to_owned());
    }
    let units = bytes.chunks_exact(2).map(|pair| unit([pair[0], pair[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .map_err(|_| "invalid UTF-16: an unpaired surrogate".to_owned())
}

/// `text` (with `\n` endings) stored the way `form` says.
pub(super) fn encode(text: &str, form: Form) -> Vec<u8> {
    let text: Cow<str> = if form.crlf {
        Cow::Owned(text.replace('\n', "\r\n"))
    } else {
        Cow::Borrowed(text)
    };
    match form.encoding {
        Encoding::Utf8 => {
            let mut bytes = Vec::with_capacity(text.len() + 3);
            if form.bom {
                bytes.extend_from_slice(UTF8_BOM);
            }
            bytes.extend_from_slice(text.as_bytes());
            bytes
        }
        Encoding::Utf16Le | Encoding::Utf16Be => {
            let little = form.encoding == Encoding::Utf16Le;
            let mut bytes = Vec::with_capacity(text.len() * 2 + 2);
            bytes.extend_from_slice(if little { UTF16LE_BOM } else { UTF16BE_BOM });
            for unit in text.encode_utf16() {
                bytes.extend_from_slice(&if little {
                    unit.to_le_bytes()
                } else {
                    unit.to_be_bytes()
                });
            }
            bytes
        }
    }
}

/// The number of lines of `text` (a last line without `\n` counts).
pub(super) fn line_count(text: &str) -> usize {
    text.lines().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn round_trip(bytes: &[u8]) -> (String, Form) {
        let (text, form) = decode("f", bytes).unwrap();
        assert_eq!(encode(&text, form), bytes);
        (text, form)
    }

    #[test]
    fn utf8_crlf_and_bom_round_trip_byte_exactly() {
        let (text, form) = round_trip(b"a\r\nb\r\n");
        assert_eq!(text, "a\nb\n");
        assert!(form.crlf && !form.bom);

        let (text, form) = round_trip(b"\xEF\xBB\xBFa\r\nb");
        assert_eq!(text, "a\nb");
        assert!(form.crlf && form.bom);

        // Mixed endings are kept as they are, `\r` included.
        let (text, form) = round_trip(b"a\r\nb\nc\r\r\n");
        assert_eq!(text, "a\r\nb\nc\r\r\n");
        assert!(!form.crlf);

        let (text, form) = round_trip(b"");
        assert_eq!((text.as_str(), form), ("", Form::NEW));
    }

    #[test]
    fn utf16_round_trips_with_its_bom() {
        let mut le = vec![0xFF, 0xFE];
        for unit in "h\u{e9}\u{1F600}\r\nx\r\n".encode_utf16() {
            le.extend_from_slice(&unit.to_le_bytes());
        }
        let (text, form) = round_trip(&le);
        assert_eq!(text, "h\u{e9}\u{1F600}\nx\n");
        assert_eq!(form.encoding, Encoding::Utf16Le);
        assert!(form.crlf);

        let mut be = vec![0xFE, 0xFF];
        for unit in "ab\n".encode_utf16() {
            be.extend_from_slice(&unit.to_be_bytes());
        }
        let (text, form) = round_trip(&be);
        assert_eq!((text.as_str(), form.encoding), ("ab\n", Encoding::Utf16Be));
    }

    #[test]
    fn what_is_not_text_is_refused() {
        for (bytes, why) in [
            (&b"ok\xff\xfe"[..], "invalid UTF-8 at byte 2"),
            (b"\xFF\xFE\x00\x00a\x00\x00\x00", "it is UTF-32"),
            (b"\xFF\xFEa", "UTF-16 with an odd number of bytes"),
            (b"\xFF\xFE\x00\xD8", "invalid UTF-16: an unpaired surrogate"),
        ] {
            let error = decode("x.bin", bytes).unwrap_err();
            assert!(error.starts_with("x.bin is not a text file"), "{error}");
            assert!(error.contains(why), "{error}");
            assert!(error.contains("nothing was written"), "{error}");
        }
    }

    #[test]
    fn model_text_follows_the_files_endings() {
        let crlf = Form {
            crlf: true,
            ..Form::NEW
        };
        assert_eq!(crlf.model_text("a\r\nb\n"), "a\nb\n");
        assert_eq!(Form::NEW.model_text("a\r\nb"), "a\r\nb");
    }
}
