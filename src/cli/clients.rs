//! The clients: `openvaala chat`, `send` and `acp`.

use std::process::ExitCode;

use anyhow::Context;

use crate::credential::ClientKind;

use super::args::*;

/// `openvaala acp`: stdout carries the protocol, so everything else goes to stderr.
pub(crate) fn acp(args: AcpArgs) -> anyhow::Result<()> {
    let token = args.token.clone().or_else(|| {
        std::env::var("OPENVAALA_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut api = args.service.api_with(token.clone(), ClientKind::Acp);
        if !crate::acp::service::answers(&api).await {
            if args.service.explicit_url() {
                anyhow::bail!("no service answers at {}", api.base);
            }
            let data_dir = args.service.data.resolve()?;
            api = crate::acp::service::start(&data_dir, token).await?;
        }
        crate::acp::run(api).await
    })
}

pub(crate) fn chat(args: ChatArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let cwd = std::env::current_dir()
        .context("cannot read the current directory")?
        .display()
        .to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let dumb = std::env::var("TERM").is_ok_and(|term| term == "dumb");
    if terminal && !dumb && !args.plain {
        return runtime.block_on(crate::client::tui::run(
            args.service.api(),
            cwd,
            args.conversation,
        ));
    }
    runtime.block_on(crate::client::chat::run(crate::client::chat::ChatOptions {
        api: args.service.api(),
        resume: args.conversation,
        cwd,
        interactive: std::io::stdin().is_terminal(),
    }))
}

/// `openvaala send`: the exit code tells how the turn ended (see `client::send`).
pub(crate) fn send(args: SendArgs) -> ExitCode {
    use crate::client::send::{self, SendError, SendOptions};
    use crate::domain::MessageMode;
    use std::io::IsTerminal;
    let options = (|| {
        let usage = |message: String| SendError {
            code: send::EXIT_USAGE,
            message,
        };
        let text = if args.text == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(|error| usage(format!("cannot read the message from stdin: {error}")))?
        } else {
            args.text.clone()
        };
        let cwd = match &args.cwd {
            Some(dir) => std::path::absolute(dir),
            None => std::env::current_dir(),
        }
        .map_err(|error| usage(format!("cannot resolve the working directory: {error}")))?;
        let api = args.service.api();
        if let Err(error) = reqwest::Url::parse(&api.base) {
            return Err(usage(format!(
                "{} is not a usable address: {error}",
                api.base
            )));
        }
        Ok(SendOptions {
            api,
            text,
            conversation: args.conversation.clone(),
            mode: args.mode.map(|mode| match mode {
                SendMode::Steer => MessageMode::Steer,
                SendMode::Queue => MessageMode::Queue,
                SendMode::Interrupt => MessageMode::Interrupt,
            }),
            cwd: cwd.display().to_string(),
            model: args.model.clone(),
            agent: args.agent.clone(),
            json: args.json,
            // Questions go to stderr, since stdout may be the reply an editor reads.
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
        })
    })();
    let outcome = options.and_then(|options| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| SendError {
                code: send::EXIT_FAILED,
                message: format!("cannot start: {error}"),
            })?;
        let outcome = runtime.block_on(send::run(options));
        // A question settled by another client leaves a read of stdin that cannot be
        // cancelled: waiting for it would keep `send` until Enter is pressed.
        runtime.shutdown_background();
        outcome
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("openvaala send: {error}");
            ExitCode::from(error.code)
        }
    }
}
