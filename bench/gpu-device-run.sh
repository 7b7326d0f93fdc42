#!/usr/bin/env bash
# bench/wgsl-decoder.ts on a machine with a real GPU, in under 5 minutes, including on a bare machine with
# no network (the project's lent GPU machine: x86-64, NVIDIA driver, Python with torch + onnx, no Node/Bun).
#
#   bash bench/gpu-device-run.sh pack   # here, with node_modules installed: writes .cache/device-bench/
#   bash bench/gpu-device-run.sh        # there: unpacks what is missing, builds a model if none, runs
#
# `pack` gathers what the bench needs and the bare machine lacks, compressed to fit the 64 MiB a device call
# carries: the Bun binary, the few packages the bench imports (bun-webgpu with its Dawn library, zod, the
# WebGPU build of onnxruntime-web) and the Vulkan/EGL loader packages. Carry `.cache/device-bench`.
# With network access instead, `npm ci` provides all of it.
#
# The model: `--model <bundle-dir>` passes through; else ../shared/fixtures/mimi-full if present; else a
# real-size random-weight decoder is exported on the spot by bench/bundle-generator/generate.py (~30 s).
# The CPU column needs onnxruntime-node (288 MB, not packed), so the bare-machine run compares WGSL with
# onnxruntime-web's WebGPU EP only; pass --backends to change that where node_modules is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
PACK=.cache/device-bench

if [[ "${1:-}" == "pack" ]]; then
  rm -rf "$PACK" && mkdir -p "$PACK"
  xz -T0 -6 -c node_modules/bun/bin/bun.exe >"$PACK/bun.xz"
  ort=node_modules/onnxruntime-web
  tar -cJf "$PACK/node_modules.tar.xz" node_modules/bun-webgpu node_modules/bun-webgpu-linux-x64 node_modules/zod \
    "$ort/package.json" "$ort/dist/ort.webgpu.bundle.min.mjs" "$ort/dist/ort.node.min.mjs" \
    "$ort/dist/ort-wasm-simd-threaded.asyncify.mjs" "$ort/dist/ort-wasm-simd-threaded.asyncify.wasm"
  (cd "$PACK" && apt-get download -oAPT::Architecture=amd64 libvulkan1 libegl1 libglvnd0 libopengl0 libgles2 >/dev/null)
  du -sh "$PACK"
  exit 0
fi

export PATH="$PWD/node_modules/.bin:$PATH"
if ! command -v bun >/dev/null; then
  if [[ -f "$PACK/bun.xz" ]]; then
    mkdir -p node_modules/.bin
    xz -dc "$PACK/bun.xz" >node_modules/.bin/bun && chmod +x node_modules/.bin/bun
    tar -xJf "$PACK/node_modules.tar.xz"
  else
    npm ci --no-audit --no-fund
  fi
fi
# The Vulkan loader, when the image lacks it (Dawn finds the NVIDIA driver through it).
if ! ldconfig -p | grep -q libvulkan.so.1 && compgen -G "$PACK/*.deb" >/dev/null; then
  for deb in "$PACK"/*.deb; do dpkg -x "$deb" /; done
  ldconfig
fi
if [[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true

args=("$@")
if [[ " ${args[*]} " != *" --model "* ]]; then
  if [[ -f ../shared/fixtures/mimi-full/mimi_decoder.onnx ]]; then
    args+=(--model ../shared/fixtures/mimi-full)
  else
    model=/tmp/mimi-bench-model
    if [[ ! -f $model/mimi_decoder.onnx ]]; then
      : >/tmp/empty-tokenizer.model
      # generate.py targets the TorchScript exporter; torch ≥ 2.9 defaults to the dynamo one.
      python3 - <<EOF
import functools, inspect, runpy, sys, torch
if "dynamo" in inspect.signature(torch.onnx.export).parameters:
    torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)
sys.argv = ["generate.py", "--config", "full", "--only", "decoder", "--seed", "1", "--save-weights", "--out", "$model", "--tokenizer", "/tmp/empty-tokenizer.model"]
runpy.run_path("bench/bundle-generator/generate.py", run_name="__main__")
EOF
    fi
    args+=(--model "$model")
  fi
  [[ " ${args[*]} " == *" --backends "* ]] || [[ -d node_modules/onnxruntime-node ]] || args+=(--backends wgsl,ort-webgpu)
fi
[[ " ${args[*]} " == *" --steps "* ]] || args+=(--steps 30 --warmup 3 --cell-seconds 20)
timeout 240 bun bench/wgsl-decoder.ts "${args[@]}"
