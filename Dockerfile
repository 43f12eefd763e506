# syntax=docker/dockerfile:1
#
# One image for every mcsync program: `mcsync-hub` (default command) and `mcsync-agent`
# (the charts set `command:`), plus the `mcsync` CLI.
#
# Two stages: the builder turns the source into a wheel and installs it with its
# dependencies into a virtualenv; the runtime stage copies only that virtualenv onto a clean
# slim image. No compiler, no pip cache and no source tree reach the final image, and both
# stages start FROM the same base so the venv's interpreter symlinks stay valid.
#
#   docker build -t ghcr.io/mcsync/mcsync:0.1.0 .
#   docker run --rm -p 8080:8080 ghcr.io/mcsync/mcsync:0.1.0            # hub, SQLite in /var/lib/mcsync
#   docker run --rm ghcr.io/mcsync/mcsync:0.1.0 mcsync-agent --help

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/mcsync
# Metadata first, then the packages pyproject.toml ships (see [tool.setuptools.packages.find]).
# constraints.txt (scripts/lock) pins every dependency, so two builds of one commit install
# the same packages; the image carries both programs, hence both extras.
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY shared ./shared
COPY hub ./hub
COPY member ./member
COPY cli ./cli
COPY migrations ./migrations
COPY sandbox ./sandbox
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/mcsync/bin/pip install --constraint constraints.txt "$(ls /wheels/mcsync-*.whl)[hub,agent]" \
 && /opt/mcsync/bin/pip uninstall -y pip \
 && test -x /opt/mcsync/bin/mcsync-hub \
 && test -x /opt/mcsync/bin/mcsync-agent \
 && test -x /opt/mcsync/bin/mcsync

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="mcsync" \
      org.opencontainers.image.description="Multi-cluster service export hub and member agent" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric uid/gid, so Kubernetes' runAsNonRoot can verify it without /etc/passwd.
RUN groupadd --system --gid 10001 mcsync \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin mcsync \
 && mkdir -p /var/lib/mcsync \
 && chown 10001:10001 /var/lib/mcsync
COPY --from=builder /opt/mcsync /opt/mcsync
ENV PATH=/opt/mcsync/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# The hub's default SQLite file and generated admin token land in the working directory.
WORKDIR /var/lib/mcsync
USER 10001:10001
# Hub API (mcsync-hub serve --port) and the agent's /metrics, /healthz, /readyz.
EXPOSE 8080 9090
CMD ["mcsync-hub", "serve", "--host", "0.0.0.0"]
