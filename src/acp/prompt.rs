//! A prompt's content blocks as one message of the service: text, images, and the editor's
//! context (files it embeds or links) as text the agent reads.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};

use crate::domain::Image;

/// The message's `text` and `images`, or why the prompt cannot be sent.
pub fn message(blocks: &[ContentBlock]) -> Result<(String, Vec<Image>), String> {
    let mut text = String::new();
    let mut images = Vec::new();
    let mut add = |part: &str| {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(part);
    };
    for block in blocks {
        match block {
            ContentBlock::Text(block) => add(&block.text),
            ContentBlock::Image(image) if !image.data.is_empty() => images.push(Image {
                media_type: image.mime_type.clone(),
                data: Some(image.data.clone()),
                url: None,
            }),
            ContentBlock::Image(image) => match &image.uri {
                Some(uri) => images.push(Image {
                    media_type: image.mime_type.clone(),
                    data: None,
                    url: Some(uri.clone()),
                }),
                None => return Err("an image without data or uri".to_owned()),
            },
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => add(&format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    contents.uri, contents.text
                )),
                EmbeddedResourceResource::BlobResourceContents(contents) => add(&format!(
                    "<context uri=\"{}\">(binary content, {} bytes of base64)</context>",
                    contents.uri,
                    contents.blob.len()
                )),
                _ => return Err("an embedded resource of an unknown kind".to_owned()),
            },
            ContentBlock::ResourceLink(link) => add(&format!("@{}", link.uri)),
            ContentBlock::Audio(_) => return Err("audio is not supported".to_owned()),
            _ => return Err("a content block of an unknown kind".to_owned()),
        }
    }
    if text.trim().is_empty() && images.is_empty() {
        return Err("the prompt is empty".to_owned());
    }
    Ok((text, images))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EmbeddedResource, ImageContent, TextContent, TextResourceContents,
    };

    #[test]
    fn embedded_files_and_images_go_with_the_text() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("Explain this")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///w/main.rs",
                )),
            )),
            ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ];
        let (text, images) = message(&blocks).unwrap();
        assert_eq!(
            text,
            "Explain this\n<context uri=\"file:///w/main.rs\">\nfn main() {}\n</context>"
        );
        assert_eq!(
            images,
            [Image {
                media_type: "image/png".to_owned(),
                data: Some("iVBORw0KGgo=".to_owned()),
                url: None,
            }]
        );
        assert!(message(&[ContentBlock::Text(TextContent::new("  "))]).is_err());
    }
}
