"""The optional C extensions (the rest of the build is in pyproject.toml).

Each mirrors Python that stays the reference and the fallback: where no C compiler
is at hand, `optional=True` lets the install go on without them, pure Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    # spool.Ring.put's copy: a worker's text (bytes, or an ASCII str as it is) into its ring
    Extension("kdissect._spool_c", ["kdissect/_spool_c.c"], optional=True),
    # light.Lights and light.Light: the parent's merge of light batches, and pairing of it
    Extension("kdissect._light_c", ["kdissect/_light_c.c"], optional=True),
    # capture._record_heads: the walk over a classic pcap file's record headers; and
    # parallel._python_buckets: each record's connection bucket (zlib's CRC-32, as Python's)
    Extension("kdissect.ingest._pcap_index_c", ["kdissect/ingest/_pcap_index_c.c"], libraries=["z"],
              optional=True),
    # record_check._records_clean: the walk over a batch's records
    Extension("kdissect.decode._record_check_c", ["kdissect/decode/_record_check_c.c"],
              depends=["kdissect/decode/_varint.h"], optional=True),
    # verbose_records._plain_records: the -V text of a batch's records
    Extension("kdissect.present._verbose_records_c", ["kdissect/present/_verbose_records_c.c"],
              depends=["kdissect/decode/_varint.h"], optional=True),
    # report._python_remapped: a worker's detail line given the page's string indexes
    Extension("kdissect.present._report_c", ["kdissect/present/_report_c.c"], optional=True),
])
