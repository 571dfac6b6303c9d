"""What if: sandboxes (issue 41). A sandbox is a copy-on-write overlay of the live
cloud holding only what its changes changed; reads inside answer from it with the
same code as outside, and a commit applies its changes in one transaction only if
nothing they read has moved.

    service.py           `Sandboxes`: one method per route
    changes.py           changes -> steps (the kinds, and what a step reads)
    claims.py            the steps that claim: move, resize, boot
    provider_changes.py  the steps on providers: inventory, remove, disable, add
    trial.py             `Trial`: steps run and judged over the sandbox, once a request
    commit.py            the steps replayed through the ledger's writes, reads checked
    store.py             sandboxes in the database; each worker's overlays and patches
    view.py              `SandboxView`, a candidates `Source` through a patch
    answers.py           a sandbox's kept answers, made from the live index's
    patch.py             the overlay in the index's ids, folded step by step
    overlay.py           the steps folded into what changed, by uuid and class name
    reads.py             what a sandbox reads of the database
"""

from tally.placement.ledger.sandbox.changes import KINDS, Change
from tally.placement.ledger.sandbox.service import Sandboxes
from tally.placement.ledger.sandbox.store import Kept

__all__ = ["KINDS", "Change", "Kept", "Sandboxes"]
