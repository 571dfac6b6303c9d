"""Moving the books: `tally db import|export|check` between Tally's database and
upstream Placement's (read, checked against the ledger's rules, written, compared)."""
