"""Build configuration beyond pyproject.toml: the optional C kernels of model_core.

`optional=True`: where no C compiler is available the install still succeeds, and
model_core.fused uses plain torch ops instead (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "model_core._kernels",
            sources=["model_core/_kernels.c"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
