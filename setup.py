"""The extension of pip's build: vitreg._vitreg is the CMake target vitreg_python, built with the
project's own CMakeLists.txt (apps and tests off) and copied into the wheel. The CMake build folder
is VITREG_CMAKE_BUILD_DIR when set (an existing build/ is reused as it is configured: CI builds
the wheel from the build it has just tested), else build/pip, kept so that a second install
rebuilds only what changed. The version is CMake's project version."""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def cmake_project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(vitreg VERSION ([0-9.]+)", f.read()).group(1)


class CMakeExtension(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.environ.get("VITREG_CMAKE_BUILD_DIR") or os.path.join(ROOT, "build", "pip"))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                            "-DVITREG_BUILD_APPS=OFF", "-DVITREG_BUILD_TESTS=OFF",
                            f"-DPython_EXECUTABLE={sys.executable}"], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build_dir, "--target", "vitreg_python", "-j", jobs], check=True)
        built = glob.glob(os.path.join(build_dir, "python", "vitreg", "_vitreg*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one compiled module in {build_dir}/python/vitreg, found {built}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    version=cmake_project_version(),
    ext_modules=[Extension("vitreg._vitreg", sources=[])],
    cmdclass={"build_ext": CMakeExtension},
    # setuptools' own work files beside CMake's, not in build/ itself (CMake's build folder).
    options={"build": {"build_base": os.path.join("build", "pip-setuptools")}},
)
