#!/usr/bin/env bash
# Exits 0 when this machine has an NVIDIA GPU (a device node, or nvidia-smi listing one), so
# the CUDA tests must run rather than skip; exits 1 otherwise.
[ -e /dev/nvidia0 ] && exit 0
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q "^GPU " && exit 0
exit 1
