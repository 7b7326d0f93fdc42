#!/usr/bin/env bash
# System packages, installed through apt when missing (as root; otherwise the command to run is printed).
#
# `--runtime` (run by `npm install`): only what serving can use beyond npm, Mesa's software GPU drivers, so
# `--decoder wgsl` / `--device gpu` work on a machine without a GPU (lavapipe on Vulkan for Deno, llvmpipe
# through EGL/OpenGL ES for bun-webgpu). Never fails the install: without root it only says what to run.
#
# Without arguments (run before `npm test`): also what the test suite needs: ffmpeg (independent decoder of
# every output format), pocketsphinx with its English model (intelligibility checks of the offline engine),
# Debian's PyTorch + ONNX (the random-weight Pocket TTS bundle generator, checked against the golden
# fixture), Chromium (the playground page tested in a real browser) and Ceph's monitor, OSD and radosgw (a
# real S3 server on loopback for the S3 storage, scripts/rgw-up.sh; mocks ignore conditional writes). Ceph is
# installed without its recommended packages, which would pull in far more than a one-host test cluster uses.
set -euo pipefail
runtime_only=false
[ "${1:-}" = "--runtime" ] && runtime_only=true
missing=()
missing_ceph=()
[ "$(uname -s)" = "Linux" ] || exit 0
[ -e /usr/lib/x86_64-linux-gnu/libvulkan_lvp.so ] || missing+=(mesa-vulkan-drivers)
[ -e /usr/lib/x86_64-linux-gnu/dri/swrast_dri.so ] || missing+=(libgl1-mesa-dri)
[ -e /usr/share/glvnd/egl_vendor.d/50_mesa.json ] || missing+=(libegl-mesa0)
[ -e /usr/lib/x86_64-linux-gnu/libEGL.so.1 ] || missing+=(libegl1)
if [ "$runtime_only" = false ]; then
  command -v ffmpeg >/dev/null 2>&1 || missing+=(ffmpeg)
  command -v pocketsphinx_continuous >/dev/null 2>&1 || missing+=(pocketsphinx)
  [ -d /usr/share/pocketsphinx/model/en-us ] || missing+=(pocketsphinx-en-us)
  /usr/bin/python3 -c "import torch" >/dev/null 2>&1 || missing+=(python3-torch)
  /usr/bin/python3 -c "import onnx, numpy" >/dev/null 2>&1 || missing+=(python3-onnx python3-numpy)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  # Each binary is named after its package.
  for binary in ceph-mon ceph-osd radosgw; do
    command -v "$binary" >/dev/null 2>&1 || missing_ceph+=("$binary")
  done
fi
[ ${#missing[@]} -eq 0 ] && [ ${#missing_ceph[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  [ ${#missing[@]} -eq 0 ] || echo "missing system packages: ${missing[*]}; install them with: sudo apt-get install -y ${missing[*]}" >&2
  [ ${#missing_ceph[@]} -eq 0 ] || echo "missing system packages: ${missing_ceph[*]}; install them with: sudo apt-get install -y --no-install-recommends ${missing_ceph[*]}" >&2
  [ "$runtime_only" = true ] && exit 0
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ "$runtime_only" = true ]; then
  { apt-get update -q && apt-get install -y -q "${missing[@]}"; } || echo "could not install ${missing[*]}; --decoder wgsl needs a WebGPU adapter" >&2
  exit 0
fi
apt-get update -q
[ ${#missing[@]} -eq 0 ] || apt-get install -y -q "${missing[@]}"
[ ${#missing_ceph[@]} -eq 0 ] || apt-get install -y -q --no-install-recommends "${missing_ceph[@]}"
