# syntax=docker/dockerfile:1
#
# Images of `electra serve` built from this source tree (the build context is the repository root):
#
#   docker build --target cuda  -t REGISTRY/electra-server:0.1.0-cuda  .   # GPU: CUDA 13 + cuDNN 9 runtime
#   docker build --target cpu   -t REGISTRY/electra-server:0.1.0-cpu   .   # CPU: python:slim, no CUDA
#   docker build --target train -t REGISTRY/electra-server:0.1.0-train .   # `electra pretrain` (PyTorch)
#
# Both serving images install exactly what CI installs for serving, `pip install -c constraints.txt
# ".[serve]"` (ONNX Runtime, tokenizers, Litestar, msgspec, uvicorn, prometheus-client; no PyTorch, no
# transformers), into a virtual environment that is copied into a fresh runtime stage. They run as the
# non-root user 10001 (numeric, so Kubernetes' runAsNonRoot can verify it), listen on 0.0.0.0:8000 and take
# every setting from ELECTRA_* variables (ELECTRA_MODELS="name=/models/name,...").
#
# Model bundles (directories written by `electra export`) are mounted at /models at run time, or baked in:
#
#   docker build --target cuda --build-arg MODEL_BUNDLE=bundles/detector --build-arg MODEL_NAME=detector .
#
# copies the bundle to /models/detector and sets ELECTRA_MODELS=detector=/models/detector. MODEL_BUNDLE is a
# path inside the build context, under bundles/ (the .dockerignore sends nothing else but the sources).
#
# onnxruntime-gpu and the CPU image: on linux/amd64 the serve extra selects onnxruntime-gpu, and the CPU image
# keeps it rather than swapping in `onnxruntime`, so it runs the very set of packages CI tests (the CPU
# execution provider is the same code in both wheels). The serve extra does not ask for onnxruntime-gpu's
# [cuda,cudnn] extras, so no CUDA library is installed, and python:slim carries none: the CPU image has no
# CUDA runtime. The cost is the larger wheel (about 280 MB more than `onnxruntime`). On linux/arm64 the serve
# extra selects `onnxruntime` by itself. The two are never installed together.
#
# The CUDA base must match the CUDA major that onnxruntime-gpu links against (1.31: CUDA 13, cuDNN 9; nodes
# need an NVIDIA driver >= 580). tests/test_dockerfile.py checks this against the onnxruntime-gpu installed
# in the CI environment.

ARG CUDA_IMAGE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04
# Ubuntu 24.04's python3 is 3.12; the CPU image uses the same minor version.
ARG PYTHON_IMAGE=python:3.12-slim-trixie

# ---------------------------------------------------------------------------------------------------------
# Bundles to bake in (empty /models unless MODEL_BUNDLE is given).
FROM ${PYTHON_IMAGE} AS bundle
ARG MODEL_BUNDLE=""
ARG MODEL_NAME=model
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN --mount=type=bind,target=/context \
    mkdir -p /models \
    && if [ -n "${MODEL_BUNDLE}" ]; then \
        if ! [[ "${MODEL_NAME}" =~ ^[A-Za-z0-9._-]+$ ]]; then \
            echo "MODEL_NAME=${MODEL_NAME}: letters, digits, '-', '_' and '.' only" >&2; exit 1; \
        fi; \
        if [ ! -f "/context/${MODEL_BUNDLE}/bundle.json" ]; then \
            echo "MODEL_BUNDLE=${MODEL_BUNDLE}: no bundle.json there; it must be a directory written by" \
                 "'electra export', inside the build context under bundles/" >&2; exit 1; \
        fi; \
        cp -r "/context/${MODEL_BUNDLE}" "/models/${MODEL_NAME}"; \
    fi \
    && chmod -R a+rX,go-w /models

# ---------------------------------------------------------------------------------------------------------
# CUDA: build the virtual environment on the runtime base (same Python, same paths), then copy it over.
FROM ${CUDA_IMAGE} AS cuda-builder
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Ubuntu's python3 is updated in place by the security pocket; pinning its exact version would only break
# the build when that happens.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY electra ./electra
# The serving install, identical to CI's; then prove it imports, has the CUDA provider and no torch.
RUN /opt/venv/bin/pip install --no-cache-dir -c constraints.txt ".[serve]" \
    && /opt/venv/bin/python -c "import onnxruntime as ort, electra.serving.http.server; \
assert 'CUDAExecutionProvider' in ort.get_available_providers(), ort.get_available_providers()" \
    && if /opt/venv/bin/pip show torch >/dev/null 2>&1; then echo "torch in a serving image" >&2; exit 1; fi

# ---------------------------------------------------------------------------------------------------------
# CPU: the same install on python:slim.
FROM ${PYTHON_IMAGE} AS cpu-builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY electra ./electra
RUN /opt/venv/bin/pip install --no-cache-dir -c constraints.txt ".[serve]" \
    && /opt/venv/bin/python -c "import onnxruntime, electra.serving.http.server" \
    && if /opt/venv/bin/pip show torch >/dev/null 2>&1; then echo "torch in a serving image" >&2; exit 1; fi

# ---------------------------------------------------------------------------------------------------------
# Training: `electra pretrain` under torchrun (the chart's optional Job). PyTorch's Linux wheels bring their
# own CUDA libraries, so python:slim is enough; nodes need only the NVIDIA driver.
FROM ${PYTHON_IMAGE} AS train
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:${PATH} \
    HOME=/tmp
RUN python -m venv /opt/venv \
    && groupadd --gid 10001 electra \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin electra
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY electra ./electra
RUN /opt/venv/bin/pip install --no-cache-dir -c constraints.txt ".[train]" \
    && /opt/venv/bin/python -c "import torch, electra.training.pretrain.trainer"
WORKDIR /tmp
USER 10001:10001
CMD ["electra", "--help"]

# ---------------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS cpu
RUN groupadd --gid 10001 electra \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin electra
COPY --from=cpu-builder /opt/venv /opt/venv
COPY --from=bundle /models /models
ARG MODEL_BUNDLE=""
ARG MODEL_NAME=model
ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    ELECTRA_HOST=0.0.0.0 \
    ELECTRA_PORT=8000 \
    ELECTRA_DEVICE=cpu \
    ELECTRA_MODELS=${MODEL_BUNDLE:+${MODEL_NAME}=/models/${MODEL_NAME}}
WORKDIR /tmp
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/health/ready' % os.environ.get('ELECTRA_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["electra", "serve"]

# ---------------------------------------------------------------------------------------------------------
# The default target.
FROM ${CUDA_IMAGE} AS cuda
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 electra \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin electra
COPY --from=cuda-builder /opt/venv /opt/venv
COPY --from=bundle /models /models
ARG MODEL_BUNDLE=""
ARG MODEL_NAME=model
ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    ELECTRA_HOST=0.0.0.0 \
    ELECTRA_PORT=8000 \
    ELECTRA_DEVICE=cuda \
    ELECTRA_MODELS=${MODEL_BUNDLE:+${MODEL_NAME}=/models/${MODEL_NAME}}
WORKDIR /tmp
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/health/ready' % os.environ.get('ELECTRA_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["electra", "serve"]
