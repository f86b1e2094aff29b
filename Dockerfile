# mt-serve: one process per container (the micro-batcher lives in the process; scale with
# replicas, not workers).
#
# CPU (default):  docker build -t mt-serve .
# GPU:            docker build -t mt-serve:gpu \
#                   --build-arg BASE_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04 \
#                   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126 .
# Offline builds: put a torch wheel in docker/wheels/ and it is installed instead of the index.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0
# Only for builds behind a TLS-intercepting proxy: a CA bundle path inside docker/ (build-time only).
ARG PIP_CERT=

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    MT_HOST=0.0.0.0 \
    MT_PORT=8000 \
    MT_WEIGHTS_DIR=/app/weights

SHELL ["/bin/sh", "-eu", "-c"]
WORKDIR /app

# Python images ship python3 + venv; on a bare CUDA base, install them first (the base
# image pins the distribution, so apt versions are left to it).
# hadolint ignore=DL3008
RUN if ! python3 -m venv --help >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi; \
    python3 -m venv "$VIRTUAL_ENV"; \
    useradd --create-home --uid 10001 --shell /usr/sbin/nologin mt

COPY docker/wheels/ /tmp/wheels/
COPY docker/ /tmp/docker/
RUN if ls /tmp/wheels/torch-*.whl >/dev/null 2>&1; then \
        pip install /tmp/wheels/torch-*.whl; \
    else \
        pip install --index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple \
            "torch==${TORCH_VERSION}"; \
    fi; \
    rm -rf /tmp/wheels

COPY pyproject.toml setup.py constraints.txt README.md ./
COPY model_core/ model_core/
COPY app/ app/
# The optional decoding kernel (model_core/_kernels.c) needs a C compiler and Python's headers
# at install time only: installed here when missing, removed again in the same layer; the
# kernels then run on the OpenMP runtime torch ships, checked after the removal. The source
# trees go too: the package lives in the venv, and a copy in the working directory would shadow
# it (without the compiled kernels) for `python` run from there.
# hadolint ignore=DL3008,SC2086
RUN build_deps=""; \
    command -v cc >/dev/null 2>&1 || build_deps="gcc libc6-dev"; \
    python3 -c "import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
        || build_deps="$build_deps python3-dev"; \
    if [ -n "$build_deps" ]; then \
        apt-get update && apt-get install -y --no-install-recommends $build_deps; \
    fi; \
    pip install -c constraints.txt .; \
    if [ -n "$build_deps" ]; then \
        apt-get purge -y --auto-remove $build_deps && apt-get clean && rm -rf /var/lib/apt/lists/*; \
    fi; \
    python3 -I -c "from model_core import fused; assert fused.kernel_available()"; \
    rm -rf /tmp/docker model_core app build ./*.egg-info

COPY weights/ weights/

USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('MT_PORT', '8000'), timeout=2)"]
STOPSIGNAL SIGTERM
CMD ["mt-serve"]
