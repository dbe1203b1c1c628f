# portrait-serve image for a Ray cluster (KubeRay or `ray up`): Ray 2.60 with CUDA, torch 2.13 (CUDA build),
# the project, and the built-in models baked in (MediaPipe, MODNet, MTCNN, NudeNet 320n (its licence: see
# configs/models.yaml), and Real-ESRGAN x4plus converted from its authors' ncnn release: about 137 MB, all from the
# package registry). Other weights (GFPGAN, CodeFormer, GPEN, the official Real-ESRGAN, DCT-Net) come from the model
# store at run time (PORTRAIT_MODEL_STORE=s3://bucket/prefix), or bake them with
# --build-arg BAKE_MODELS="gfpgan-v1.4 realesrgan-x4plus ...".
#   docker build -t portrait-serve:0.1.0 .
FROM rayproject/ray:2.60.0-py311-gpu

ARG TORCH_INDEX=https://download.pytorch.org/whl/cu126
ARG BAKE_MODELS=""

WORKDIR /home/ray/portrait-serve
COPY --chown=ray:users pyproject.toml README.md ./
COPY --chown=ray:users serve_app serve_app
COPY --chown=ray:users deployments deployments
COPY --chown=ray:users storage storage
COPY --chown=ray:users configs configs

RUN pip install --no-cache-dir torch==2.13.0 --index-url ${TORCH_INDEX} \
 && pip install --no-cache-dir -e . \
 && portrait models pull --builtin \
 && if [ -n "${BAKE_MODELS}" ]; then portrait models pull ${BAKE_MODELS}; fi

ENV PORTRAIT_MODEL_STORE=/home/ray/portrait-serve/models \
    RAY_USAGE_STATS_ENABLED=0
EXPOSE 8000 8265 8080
# configs/gpu.yaml listens on 0.0.0.0: run with -e PORTRAIT_EVENTS_TOKEN=... (from a secret), or the ingress refuses
# to start the bucket webhook (docs/operations.md "Security").
CMD ["serve", "run", "configs/gpu.yaml"]
