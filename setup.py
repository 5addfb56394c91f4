"""Build glue that pyproject.toml cannot express: setuptools reads
cffi_modules only from setup(), and the start-up hook's .pth file must land
at the top of site-packages, in wheels and in editable installs alike."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_SOURCE = os.path.join("kwker_install", "kwker_install.pth")


class build_py_with_pth(build_py):
    """Wheels: ship kwker_install.pth next to the packages."""

    def run(self):
        super().run()
        self.copy_file(PTH_SOURCE, os.path.join(self.build_lib, os.path.basename(PTH_SOURCE)))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [
            os.path.join(self.build_lib, os.path.basename(PTH_SOURCE))]


class editable_wheel_with_pth(editable_wheel):
    """Editable installs only put a path hook in site-packages and ignore
    build_py's extra files, so add the .pth to the editable wheel itself."""

    def _run_build_commands(self, dist_name, unpacked_wheel, build_lib, tmp_dir):
        result = super()._run_build_commands(dist_name, unpacked_wheel, build_lib, tmp_dir)
        shutil.copy(PTH_SOURCE, unpacked_wheel)
        return result


setup(
    cffi_modules=["native/build_ffi.py:ffibuilder"],
    cmdclass={"build_py": build_py_with_pth, "editable_wheel": editable_wheel_with_pth},
)
