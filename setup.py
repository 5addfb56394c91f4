"""Build glue that pyproject.toml cannot express: setuptools reads
cffi_modules only from setup(), and the start-up hook's .pth file must land
at the top of site-packages, in wheels and in editable installs alike."""
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
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


# CI only (.ci/run sets it): CPU targets the machine cannot run, compiled
# at -O0.  Their code is still compiled and linked, but no test there can
# execute it, and the optimised compile of avx512.c is half a minute of a CI
# run on the 2-core machines.  Never set for a build that is installed for
# use: those targets would then run unoptimised on CPUs that pick them.
UNRUN_TARGETS = {t for t in os.environ.get("KWKER_CI_UNRUN_TARGETS", "").split(",") if t}

# CI only: a folder that receives a copy of each native/src object as
# compiled for the install, so that native/tests/run.sh --opt-objects links
# its optimised tests against the shipped code instead of compiling the
# library a second time (a minute and a half of a CI run's CPU).
KEEP_OBJECTS = os.environ.get("KWKER_CI_KEEP_OBJECTS", "")


class build_ext_parallel_sources(build_ext):
    """Compile the native library's sources side by side: each CPU target
    compiles every kernel (targets/*.c), and one after another they take
    over a minute on the 2-core machines here.  The compiler's own
    per-source step (_compile) is what runs in the threads."""

    def build_extension(self, ext):
        compiler = self.compiler
        serial_compile = compiler.compile
        if not all(hasattr(compiler, name) for name in ("_setup_compile", "_get_cc_args", "_compile")):
            return super().build_extension(ext)  # not a Unix-style compiler: one at a time

        def compile_in_parallel(sources, output_dir=None, macros=None, include_dirs=None,
                                debug=0, extra_preargs=None, extra_postargs=None,
                                depends=None):
            macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs)
            cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

            def one(obj):
                src, ext_ = build[obj]
                post = list(extra_postargs or [])
                if os.path.splitext(os.path.basename(src))[0] in UNRUN_TARGETS:
                    post.append("-O0")  # after -O3: the last -O counts
                compiler._compile(obj, src, ext_, cc_args, post, pp_opts)
                if KEEP_OBJECTS and os.path.normpath(src).startswith(os.path.join("native", "src")):
                    os.makedirs(KEEP_OBJECTS, exist_ok=True)
                    shutil.copy(obj, os.path.join(KEEP_OBJECTS, os.path.basename(obj)))

            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                list(pool.map(one, [obj for obj in objects if obj in build]))
            return objects

        compiler.compile = compile_in_parallel
        try:
            super().build_extension(ext)
        finally:
            compiler.compile = serial_compile


# install()'s size-rule check in C (kwker/patching.py); optional: where it
# does not build, the Python wrappers do the same, ~1 us slower a call
GATE = Extension("kwker._gate", sources=["native/python/kwker_gate.c"], optional=True,
                 extra_compile_args=["-O2"] if os.name != "nt" else [])

setup(
    cffi_modules=["native/build_ffi.py:ffibuilder"],
    ext_modules=[GATE],
    cmdclass={"build_py": build_py_with_pth, "editable_wheel": editable_wheel_with_pth,
              "build_ext": build_ext_parallel_sources},
)
