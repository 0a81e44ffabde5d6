"""The static checks. Importing this package registers every built-in family in `registry.REGISTRY`.

| module | family |
|---|---|
| `registry` | `CheckSpec`, `@check`, `Finding`, `BadExample`, the registry |
| `context` | `CheckContext`: kernel, target limits, backend, cached analyses |
| `fixtures` | known-good bases that known-bad examples are derived from |
| `names`, `shapes`, `resources`, `sync`, `legality`, `backend` | E01 .. E06 |
| `fusion` | E0412: `fuse A into B` |

Run them through `cake.ir.check.check`.
"""

from cake.ir.checks import backend, cluster, defer, fusion, legality, names, resources, shapes, sync  # noqa: F401  (registration)
