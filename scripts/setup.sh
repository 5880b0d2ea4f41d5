#!/usr/bin/env bash
# Installs what vitreg needs from Debian's packages, skipping what is already there.
#   scripts/setup.sh           build and run: compiler, CMake, Eigen, oneTBB, stb, libjpeg-turbo, libwebp, libarchive (tar shards), zlib,
#                              JSON, CLI11, cpp-httplib (vitreg serve), Catch2, OpenCV, pybind11, Python's headers
#                              and NumPy (the Python module), venv, setuptools, wheel and build (pip's offline build
#                              of the package: pip install --no-build-isolation .), help2man (the man page),
#                              FAISS (vitreg index and search)
#   scripts/setup.sh --tests   also pytest, tqdm (progress=True), PyTorch (the reference), PIL, torchvision and jpegtran (the photo
#                              fixtures), Jupyter's nbclient and a python3 kernel (the notebook example),
#                              Chromium (the HTML report and explorer tests), Node.js and npm with playwright-core
#                              from the npm registry (tests/browser: the explorer tests drive Chromium), OpenCV
#                              highgui (vitreg-viewer), Xvfb, xdotool and xwd (the viewer test), clang and its
#                              sanitizer/libFuzzer runtime (the fuzzers), qemu-user (older CPUs), Sphinx with MyST
#                              and furo (scripts/docs.sh), opencv-doc and python3-skimage (the real pairs, masks and
#                              labelled faces `vitreg eval` is tested and benchmarked on, read in place)
set -euo pipefail
packages=(g++ cmake make pkg-config libeigen3-dev libtbb-dev libstb-dev libjpeg62-turbo-dev libwebp-dev libarchive-dev zlib1g-dev
          nlohmann-json3-dev libcli11-dev libcpp-httplib-dev catch2 libopencv-core-dev libopencv-imgproc-dev
          libopencv-imgcodecs-dev pybind11-dev python3-dev python3-numpy python3-venv python3-setuptools python3-wheel
          python3-build help2man libfaiss-dev)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(python3 python3-numpy python3-pytest python3-tqdm python3-torch python3-pil python3-torchvision libjpeg-turbo-progs
             python3-nbclient python3-nbformat python3-ipykernel
             chromium libopencv-highgui-dev xvfb xdotool x11-apps
             clang libclang-rt-14-dev qemu-user python3-sphinx python3-myst-parser furo opencv-doc python3-skimage)
  # Node.js from Debian (18) unless one is there already (a newer one serves as well).
  command -v node >/dev/null || packages+=(nodejs)
  command -v npm >/dev/null || packages+=(npm)
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
if [[ "${1:-}" == "--tests" ]]; then
  # playwright-core for the browser tests, at the version package-lock.json pins (no browser download:
  # the tests drive Debian's chromium).
  browser="$(dirname "$0")/../tests/browser"
  if ! node -e 'const [lock, got] = process.argv.slice(1).map(f => require(f));
                process.exit(lock.packages["node_modules/playwright-core"].version === got.version ? 0 : 1)' \
         "$(realpath "$browser/package-lock.json")" "$(realpath -m "$browser/node_modules/playwright-core/package.json")" 2>/dev/null; then
    echo "setup: installing playwright-core into tests/browser"
    npm ci --prefix "$browser" --no-audit --no-fund --loglevel=error </dev/null
  fi
fi
