"""Build the Cython evaluators in cython_ext/ as modules inside the cepsql package.

The typed interfaces the evaluators share (buffers, the condition VM, aggregates, match
order, Kleene-closure enumeration, the CEP evaluator's layers) are .pxd files under
cepsql/_ext/, where Cython looks for the declarations of a `cepsql._ext.<name>` module:
what is not `inline` there is compiled once (cython_ext/<name>.pyx) and `cimport`ed."""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

JOBS = os.cpu_count() or 1
ROOT = os.path.dirname(os.path.abspath(__file__))
#: the evaluators' optimisation flags; CEPSQL_OPT_FLAGS replaces them for a build whose
#: speed never matters (the packaging test's throwaway wheel: -O0 compiles ~5x faster)
OPT_FLAGS = os.environ.get("CEPSQL_OPT_FLAGS", "-O3 --param=inline-unit-growth=400 "
                                               "--param=max-inline-insns-single=800").split()


class ParallelBuildExt(build_ext):
    """Compiles the evaluators side by side (one C file each, nothing shared at build
    time): `pip install` waits for the slowest one instead of their sum."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = JOBS

extensions = [
    Extension(
        "cepsql._ext." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=[numpy.get_include(), "cython_ext"],
        extra_compile_args=OPT_FLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for path in sorted(glob.glob("cython_ext/*.pyx"))
]

setup(
    cmdclass={"build_ext": ParallelBuildExt},
    ext_modules=cythonize(
        extensions,
        language_level=3,
        nthreads=JOBS,
        include_path=[ROOT],
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    )
)
