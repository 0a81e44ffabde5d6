"""`cake replay`: regenerate a failing case from its replay token and run the kernel on it again.

Prints the inputs' hash (equal to the one in the failure's evidence when the bytes are identical) and
the case's outcome. Exit 0 when the case now passes, 1 when it still fails, 2 on a bad token or an
unloadable kernel. The kernel runs in a worker, like `cake verify`.
"""

from __future__ import annotations

import argparse

from cake.cli.common import ExitCode, UsageError
from cake.cli.verify import add_run_options, evidence_text, parse_kernel


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("replay", help="re-run one failing case from its replay token")
    parser.add_argument("token", help="a replay token (cake1:...) from a verdict")
    parser.add_argument("--kernel", required=True, metavar="PATH.py:FUNC")
    add_run_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cake.verifier.tokens import BadTokenError, ReplayToken
    from cake.verifier.worker import Died, KernelLoadError, TimedOut, replay_in_worker

    try:
        token = ReplayToken.decode(args.token)
    except BadTokenError as error:
        raise UsageError(str(error)) from None
    ref = parse_kernel(args.kernel)
    try:
        outcome = replay_in_worker(token.encode(), ref, device=args.device, timeout_s=args.timeout)
    except KernelLoadError as error:
        raise UsageError(str(error)) from None
    if isinstance(outcome, TimedOut):
        print(f"{token.gate_id}: TIMEOUT after {outcome.after_s:g} s")
        return ExitCode.FINDINGS
    if isinstance(outcome, Died):
        print(f"{token.gate_id}: RUNTIME_ERROR ({outcome.describe()})\n{outcome.stderr_tail}")
        return ExitCode.FINDINGS
    print(f"inputs hash: {outcome.inputs_hash}")
    print(f"{token.gate_id} case {token.case_index} ({outcome.case}): {outcome.status.value}: {outcome.reason}")
    if outcome.evidence is not None:
        print(f"evidence: {evidence_text(outcome.evidence)}")
    return ExitCode.FINDINGS if outcome.status.is_failure else ExitCode.OK
