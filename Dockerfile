# Stapel's image: every Procfile role from one image (bin/docker-entrypoint ROLE).
#   docker build -t stapel .                                  # CPU pools
#   docker build --build-arg VARIANT=gpu -t stapel-gpu .      # adds cuBLAS 12 for the gpu pool
#   docker run --read-only --tmpfs /tmp --tmpfs /app/var stapel web
# Runs as uid/gid 10001 with a read-only root filesystem; writable: /tmp and /app/var
# (deploy/ mounts emptyDirs there). Demo models under /app/models; others come from a
# volume named by STAPEL_MODEL_ROOT. Pin the base by digest for production builds:
#   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
# The lock files were resolved on Python 3.11: change PYTHON_IMAGE and the lock together.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# cpu: requirements.lock; gpu: requirements-gpu.lock (the same set plus nvidia-cublas-cu12).
ARG VARIANT=cpu
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY requirements.lock requirements-gpu.lock /tmp/
# Only the locked files, each checked against its hash, wheels only (no compiler here).
RUN python -m venv /opt/stapel \
    && lock=/tmp/requirements.lock \
    && if [ "$VARIANT" = gpu ]; then lock=/tmp/requirements-gpu.lock; fi \
    && /opt/stapel/bin/pip install --no-cache-dir --require-hashes --no-deps \
        --only-binary=:all: -r "$lock" \
    && /opt/stapel/bin/pip uninstall --yes pip

FROM ${PYTHON_IMAGE} AS runtime
ARG UID=10001
RUN groupadd --gid "$UID" stapel \
    && useradd --uid "$UID" --gid stapel --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin stapel
COPY --from=build /opt/stapel /opt/stapel
WORKDIR /app
# The code, owned by root: the stapel user can read it, never change it.
COPY alembic.ini celeryconfig.py Procfile ./
COPY bin bin
COPY migrations migrations
COPY models models
COPY stapel stapel
COPY app app
COPY workers workers
COPY autoscaler autoscaler
COPY stapel_cli stapel_cli
# Bytecode made now, since the running image cannot write it; var/ for beat's schedule.
RUN /opt/stapel/bin/python -m compileall -q /app \
    && mkdir /app/var && chown "$UID:$UID" /app/var
# LD_LIBRARY_PATH: where the gpu variant's nvidia-cublas-cu12 wheel puts libcublas.so.12
# (CTranslate2 loads it at run time); absent and harmless in the cpu variant.
ENV PATH=/opt/stapel/bin:$PATH \
    PYTHONPATH=/app \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    STAPEL_MODEL_ROOT=/app/models \
    LD_LIBRARY_PATH=/opt/stapel/lib/python3.11/site-packages/nvidia/cublas/lib
USER ${UID}:${UID}
EXPOSE 8000 5555 9100
ENTRYPOINT ["/app/bin/docker-entrypoint"]
CMD ["web"]
