#!/bin/sh
# Install what the vitreg training recipe needs from Debian, skipping what is there.
# Data needs no download beyond Debian packages:
#   dataset-fashion-mnist -> /usr/share/datasets/fashion-mnist/*.gz (Zalando, MIT/Expat)
#   python3-skimage       -> skimage/data/{brick,grass,gravel}.png textures
set -eu
need=""
for p in python3-torch python3-numpy python3-pil python3-skimage dataset-fashion-mnist; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends $need
else
  echo "setup.sh: everything is installed"
fi
