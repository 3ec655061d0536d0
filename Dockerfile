# syntax=docker/dockerfile:1
#
# OpenVaala in a container (docs/install.md, "In a container"):
#
#   docker build -t openvaala .
#   docker run -d --name openvaala -p 127.0.0.1:7341:7341 \
#       -e OPENVAALA_TOKEN="$(openssl rand -hex 24)" -v openvaala-data:/var/lib/openvaala openvaala
#
# The service listens on 0.0.0.0:7341 in the container, off loopback, so it refuses to start
# without OPENVAALA_TOKEN (16 characters or more): every client sends it as
# `Authorization: Bearer <token>`. Several instances over one PostgreSQL:
# contrib/compose.yaml.

# The toolchain the project is built and tested with (Cargo.toml's rust-version is the
# oldest that builds it). Bookworm, like the runtime image: the binary needs the glibc it was
# linked against, and build.rs packs relocations only where that glibc is 2.36 or later.
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
# A `dist` profile in Cargo.toml, when there is one, is the profile meant for shipped
# binaries, so it is used; else `release`. The check runs at build time, so adding the
# profile needs no change here. `--bin openvaala`: the benchmark binary stays out.
# build.rs asks git for the commit (`openvaala --version`): .dockerignore lets in only
# .git's HEAD and refs, and git also wants an objects directory to call it a repository.
# The caches keep the registry and the build between builds (BuildKit, or Buildah/Podman).
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    set -eu; \
    if [ -f .git/HEAD ]; then mkdir -p .git/objects; fi; \
    if grep -q '^\[profile\.dist\]' Cargo.toml; then profile=dist; else profile=release; fi; \
    echo "building with the $profile profile"; \
    cargo build --locked --profile "$profile" --bin openvaala; \
    install -D -m 0755 "target/$profile/openvaala" /out/openvaala

FROM debian:bookworm-slim
# ca-certificates: providers and MCP servers over HTTPS. git: checkpoints, and the agent's own
# git commands. bash: a shell for the agent's tools (`sh` is dash). curl: the health check,
# and the agent's downloads. tini: PID 1, which reaps what a tool leaves behind and passes
# SIGTERM on to the service.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends bash ca-certificates curl git tini \
    && rm -rf /var/lib/apt/lists/*
# A user of its own with a fixed uid (a bind-mounted data directory must belong to it:
# `chown -R 10001:10001 DIR`), never root: a command that escaped the tool sandbox would
# run as root (docs/security.md).
RUN groupadd --system --gid 10001 openvaala \
    && useradd --system --uid 10001 --gid openvaala --home-dir /home/openvaala \
        --create-home --shell /bin/bash openvaala \
    && install -d -o openvaala -g openvaala -m 0700 /var/lib/openvaala \
    && install -d -o openvaala -g openvaala -m 0750 /workspaces
COPY --from=builder /out/openvaala /usr/local/bin/openvaala

# The data directory (conversations, the index, the local token): keep it on a volume.
ENV OPENVAALA_HOME=/var/lib/openvaala
VOLUME ["/var/lib/openvaala"]
# Conversations that name no `cwd` work here (never `/`, nor the data directory). Mount the
# projects the agent should work on under it.
WORKDIR /workspaces
USER openvaala:openvaala
EXPOSE 7341
# /api/health answers without the token; 503 (unhealthy) when the service is stopping or,
# in cluster mode, when PostgreSQL is unreachable. It asks the port of the CMD below.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD curl -fsS -o /dev/null http://127.0.0.1:7341/api/health || exit 1
# SIGTERM is what `openvaala serve stop` sends: the service interrupts its running turns,
# lets go of the data directory and exits 0, so `docker stop` is a graceful stop. Give it
# time: `docker stop -t 60` (the default is 10 s, then SIGKILL; nothing acknowledged is lost
# either way, docs/reliability.md).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/openvaala"]
CMD ["serve", "--addr", "0.0.0.0:7341"]
