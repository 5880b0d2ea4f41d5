#!/usr/bin/env bash
# Installs what vitreg needs from Debian's packages, skipping what is already there.
#   scripts/setup.sh           build and run: compiler, CMake, Eigen, oneTBB, stb, libjpeg-turbo, libwebp, JSON,
#                              CLI11, Catch2, OpenCV, pybind11, Python's headers and NumPy (the Python module)
#   scripts/setup.sh --tests   also pytest, PyTorch (the reference), PIL, torchvision and jpegtran (the photo
#                              fixtures), Chromium (the HTML report test), OpenCV highgui (vitreg-viewer), Xvfb,
#                              xdotool and xwd (the viewer test), clang and its sanitizer/libFuzzer runtime (the
#                              fuzzers), qemu-user (older CPUs)
set -euo pipefail
packages=(g++ cmake make pkg-config libeigen3-dev libtbb-dev libstb-dev libjpeg62-turbo-dev libwebp-dev nlohmann-json3-dev
          libcli11-dev catch2 libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev pybind11-dev python3-dev python3-numpy)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(python3 python3-numpy python3-pytest python3-torch python3-pil python3-torchvision libjpeg-turbo-progs
             chromium libopencv-highgui-dev xvfb xdotool x11-apps
             clang libclang-rt-14-dev qemu-user)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ "$(id -u)" -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi
