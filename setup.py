"""Build configuration beyond pyproject.toml: the optional C kernels of model_core.

`optional=True`: where no C compiler is available the install still succeeds, and
model_core.fused uses plain torch ops instead (same results, slower). The kernels spread rows
over threads with OpenMP; a compiler without OpenMP builds them single-threaded.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

OPENMP = ["-fopenmp"]


class BuildKernels(build_ext):
    """Build with OpenMP, or without it where the compiler lacks it."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as err:  # any compile or link error: retry without OpenMP
            print(f"building {ext.name} with OpenMP failed ({err}); building it without")
            ext.extra_compile_args = [a for a in ext.extra_compile_args if a not in OPENMP]
            ext.extra_link_args = [a for a in ext.extra_link_args if a not in OPENMP]
            super().build_extension(ext)


setup(
    cmdclass={"build_ext": BuildKernels},
    ext_modules=[
        Extension(
            "model_core._kernels",
            sources=["model_core/_kernels.c"],
            extra_compile_args=["-O3", *OPENMP],
            extra_link_args=OPENMP,
            optional=True,
        )
    ],
)
