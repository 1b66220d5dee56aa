#!/bin/sh
# What the software GPU of the test suite needs: Mesa's Vulkan driver (llvmpipe, a Vulkan
# device on any machine) to run llama.cpp's Vulkan plug-in, and glslc, the Vulkan headers and
# SPIR-V headers to build it. Installed with apt where it can be (Debian/Ubuntu, as root);
# elsewhere this says what is missing and the GPU tests skip with that reason.
set -eu
missing=""
command -v glslc >/dev/null 2>&1 || missing="$missing glslc"
[ -e /usr/include/vulkan/vulkan.hpp ] || missing="$missing libvulkan-dev"
[ -d /usr/share/cmake/SPIRV-Headers ] || [ -d /usr/lib/cmake/SPIRV-Headers ] || missing="$missing spirv-headers"
ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || missing="$missing mesa-vulkan-drivers"
[ -z "$missing" ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing the software GPU's packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q $missing >/dev/null
    exit 0
fi
echo "the software GPU needs:$missing (not installed; the GPU tests will skip)" >&2
exit 3
