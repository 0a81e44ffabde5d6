"""`cake export` and `cake certify`: best verified kernels -> a serving package with a certificate (README.md)."""

from cake.export.build import ExportResult, export_package
from cake.export.errors import ExportError
from cake.export.sources import Candidate, from_choice_table, from_files, from_run

__all__ = ["Candidate", "ExportError", "ExportResult", "export_package", "from_choice_table", "from_files", "from_run"]
