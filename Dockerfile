# fluxsched-py on the Flux project's published images (Debian bookworm):
# flux-core alone by default, or flux-core with Fluxion installed in the same
# prefix, as most sites have it:
#
#   docker build -t fluxsched-py .
#   docker build --build-arg BASE=fluxrm/flux-sched:bookworm -t fluxsched-py-fluxion .
#   docker run --rm fluxsched-py flux start flux module list     # lists sched-py
#
# fluxsched-py goes into a virtualenv of the image's Python (the one flux-core
# runs its Python modules with), and the broker is pointed at it through the
# environment: FLUX_PYTHONPATH_PREPEND (the venv's site-packages),
# FLUX_MODULE_PATH_PREPEND (sched-py.py), FLUX_MODPROBE_PATH_APPEND (its
# modprobe declaration), and FLUX_CONF_DIR (container/conf.d, which makes
# sched-py the instance's scheduler).  EXTRAS=test also installs the test tools
# (CI runs t/flux in this image).
ARG BASE=fluxrm/flux-core:bookworm
# hadolint ignore=DL3006
FROM ${BASE}

ARG EXTRAS=""
# hadolint ignore=DL3066
USER root
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*

COPY . /opt/fluxsched-py/src
RUN python3 -m venv /opt/fluxsched-py/venv \
 && /opt/fluxsched-py/venv/bin/pip install --no-cache-dir "/opt/fluxsched-py/src${EXTRAS:+[$EXTRAS]}" \
 && ln -s "$(/opt/fluxsched-py/venv/bin/fluxsched-py module-path)" /opt/fluxsched-py/modules \
 && ln -s "$(/opt/fluxsched-py/venv/bin/fluxsched-py modprobe-path)" /opt/fluxsched-py/modprobe \
 && ln -s "$(/opt/fluxsched-py/venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
      /opt/fluxsched-py/site-packages \
 && (id -u fluxuser >/dev/null 2>&1 || useradd -m fluxuser) \
 && chown -R fluxuser /opt/fluxsched-py/src

ENV PATH=/opt/fluxsched-py/venv/bin:$PATH \
    FLUX_PYTHONPATH_PREPEND=/opt/fluxsched-py/site-packages \
    FLUX_MODULE_PATH_PREPEND=/opt/fluxsched-py/modules \
    FLUX_MODPROBE_PATH_APPEND=/opt/fluxsched-py/modprobe \
    FLUX_CONF_DIR=/opt/fluxsched-py/src/container/conf.d

# hadolint ignore=DL3066
USER fluxuser
WORKDIR /opt/fluxsched-py/src
