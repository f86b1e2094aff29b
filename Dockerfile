# mt-serve: one process per container (the micro-batcher lives in the process; scale with
# replicas, not workers).
#
# CPU (default):  docker build -t mt-serve .
# Run:            docker run -p 8000:8000 --stop-timeout 40 mt-serve
#                 (docker stop's default 10 s would cut short the 30 s drain of MT_SHUTDOWN_TIMEOUT_S)
# GPU:            docker build -t mt-serve:gpu \
#                   --build-arg BASE_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04 \
#                   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126 .
# Offline torch: a torch wheel in docker/wheels/ is installed instead of the index's.
# Behind a TLS-intercepting proxy: a CA bundle in docker/certs/ and
#                 --build-arg PIP_CERT=/tmp/certs/<file> (used by the build stage only).
#
# Two stages: `build` holds the compiler, the wheels, the CA bundle and pip's work; the final
# image gets only its virtual environment (/opt/venv), the weights and a non-root user.
# Every Python package comes at the version requirements.lock pins (torch included: the build,
# CPU or CUDA, comes from the wheel or the index, the version from the lock).
# torch has layers of its own, keyed on the lock's torch line alone: a change to any other
# line of the lock installs the other packages again, not torch, and the final image shares
# its torch layer with the previous build.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS python
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
SHELL ["/bin/sh", "-eu", "-c"]
# Python images ship python3; on a bare CUDA base, install it (the base image pins the
# distribution, so apt versions are left to it).
# hadolint ignore=DL3008
RUN if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends python3 \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# The lock's torch line alone: the build stage's torch layer is keyed on it.
FROM python AS torch-pin
COPY requirements.lock /tmp/
RUN grep -E '^torch==' /tmp/requirements.lock > /tmp/torch-pin.txt

FROM python AS build
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_CERT=
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The C kernels (model_core/_kernels.c) need a C compiler and Python's headers; venv needs
# ensurepip. Whatever the base lacks is installed here, in the build stage only.
# hadolint ignore=DL3008,SC2086
RUN deps=""; \
    command -v cc >/dev/null 2>&1 || deps="gcc libc6-dev"; \
    python3 -c "import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
        || deps="$deps python3-dev"; \
    python3 -m venv /tmp/probe-venv >/dev/null 2>&1 || deps="$deps python3-venv"; \
    rm -rf /tmp/probe-venv; \
    if [ -n "$deps" ]; then \
        apt-get update && apt-get install -y --no-install-recommends $deps; \
    fi; \
    python3 -m venv "$VIRTUAL_ENV"

# From /: `cp --parents` below copies absolute paths only from there (GNU cp 9).
WORKDIR /
COPY --from=torch-pin /tmp/torch-pin.txt /tmp/
COPY docker/wheels/ /tmp/wheels/
COPY docker/certs/ /tmp/certs/
# torch first, in its own layer: it is most of the image and changes least. torch alone (its
# dependencies come with the other packages, at their locked versions); its files are also
# hard-linked into /opt/torch-layer, which the final stage copies as a layer of its own.
RUN if ls /tmp/wheels/torch-*.whl >/dev/null 2>&1; then \
        pip install --no-deps -c /tmp/torch-pin.txt /tmp/wheels/torch-*.whl; \
    else \
        pip install --no-deps -c /tmp/torch-pin.txt --index-url "$TORCH_INDEX_URL" torch; \
    fi; \
    python -I -c "import os; from importlib.metadata import distribution; t = distribution('torch'); print(*sorted({os.path.normpath(t.locate_file(f if f.parts[0] == '..' else f.parts[0])) for f in t.files}), sep='\n')" > /tmp/torch-paths.txt; \
    mkdir /opt/torch-layer; \
    xargs cp -al --parents -t /opt/torch-layer < /tmp/torch-paths.txt

WORKDIR /src
COPY requirements.lock ./
COPY pyproject.toml setup.py README.md ./
COPY model_core/ model_core/
COPY app/ app/
# Built with the locked setuptools (no isolated build environment fetching another), which
# comes with torch's dependencies (torch itself is installed: kept). torch's files then leave
# the venv (the final stage takes them from /opt/torch-layer).
RUN pip install -c requirements.lock setuptools torch; \
    pip install -c requirements.lock --no-build-isolation .; \
    pip check; \
    python -I -c "from model_core import fused; assert fused.kernel_available()"; \
    xargs rm -r < /tmp/torch-paths.txt

FROM python
ENV MT_HOST=0.0.0.0 \
    MT_PORT=8000 \
    MT_WEIGHTS_DIR=/app/weights
WORKDIR /app
# torch, then the rest of the venv: two layers, the first unchanged while the torch line is.
COPY --from=build /opt/torch-layer/ /
COPY --from=build /opt/venv /opt/venv
# DejaVu and WenQuanYi Micro Hei (Chinese, Japanese, Korean): the fonts a translated PDF
# file's text is drawn in (app/formats/pdf_draw.py).
# The kernels run here without a compiler, on the OpenMP runtime torch ships: checked.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends fonts-dejavu-core \
        fonts-wqy-microhei \
    && rm -rf /var/lib/apt/lists/*; \
    useradd --create-home --uid 10001 --shell /usr/sbin/nologin mt; \
    python -I -c "from model_core import fused; assert fused.kernel_available()"
COPY weights/ weights/

USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('MT_PORT', '8000'), timeout=2)"]
STOPSIGNAL SIGTERM
CMD ["mt-serve"]
