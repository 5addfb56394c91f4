"""Build glue that pyproject.toml cannot express: setuptools reads
cffi_modules only from setup(), and the start-up hook's .pth file must be
copied next to the packages, in wheels and in editable installs alike."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "kwker_install.pth"


class build_py_with_pth(build_py):
    """Ship kwker_install.pth at the top of site-packages."""

    def run(self):
        super().run()
        self.copy_file(os.path.join("kwker_install", PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


setup(
    cffi_modules=["native/build_ffi.py:ffibuilder"],
    cmdclass={"build_py": build_py_with_pth},
)
