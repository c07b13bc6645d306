"""Cython kernels: the arithmetic and copies under pycoll's collectives.

- ``reduce``: out = a op b for every (op, dtype); AVG's division; float16 and
  bfloat16 to and from float32.
- ``copy``: array_split blocks to and from contiguous buffers; packing many
  arrays into one buffer.

Rebuild after editing a .pyx or src/*.c: ``python setup.py build_ext --inplace``.
"""
